"""Screenshots between the wire and the domain: options from the query, the image response with its frame headers."""

from __future__ import annotations

from starlette.responses import Response

from desktop.screen.marks import MarkBox
from desktop.screen.screenshots import Region, Screenshot, ShotOptions
from sandbox_desktop_wire.screenshot import ScreenshotQuery

IMAGE_TYPES = "image/png, image/jpeg, image/webp"


FRAME_HEADERS = ("X-Screen-Width", "X-Screen-Height", "X-Image-Width", "X-Image-Height", "X-Scale",
                 "X-Region-X", "X-Region-Y", "X-Region-Width", "X-Region-Height", "X-Cursor-X", "X-Cursor-Y",
                 "X-Marks")


def shot_options(query: ScreenshotQuery, region: Region | None = None, marks: tuple[MarkBox, ...] = ()
                 ) -> ShotOptions:
    return ShotOptions(format=query.format, quality=query.quality, scale=query.scale,
                       show_cursor=query.show_cursor, region=region, marks=marks)


def image_response(shot: Screenshot) -> Response:
    """The image with headers that map its pixels back to screen pixels."""
    frame = {
        "X-Screen-Width": shot.screen_width, "X-Screen-Height": shot.screen_height,
        "X-Image-Width": shot.width, "X-Image-Height": shot.height, "X-Scale": shot.scale,
        "X-Region-X": shot.region.x, "X-Region-Y": shot.region.y,
        "X-Region-Width": shot.region.width, "X-Region-Height": shot.region.height,
    }
    if shot.cursor is not None:
        frame["X-Cursor-X"], frame["X-Cursor-Y"] = shot.cursor
    headers = {name: str(value) for name, value in frame.items()}
    headers["Cache-Control"] = "no-store"
    # Without this a browser on another origin could not read the frame headers.
    headers["Access-Control-Expose-Headers"] = ", ".join(FRAME_HEADERS)
    return Response(shot.data, media_type=shot.media_type, headers=headers)
