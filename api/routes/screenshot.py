"""`/v1/desktop/screenshot[/region]`: translates HTTP to `desktop.screen.Screen.capture`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from api.context import desktop_of
from api.operations import Operation
from desktop.accessibility.marks import MarkBox
from desktop.screen import Region, Screenshot, ShotOptions
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.screenshot import RegionScreenshotQuery, ScreenshotQuery

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
IMAGE_TYPES = "image/png, image/jpeg, image/webp"
ERRORS = (409, 502, 503)

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


async def capture(request: Request, query: ScreenshotQuery, region: Region | None = None) -> Response:
    desktop = desktop_of(request)
    session = desktop.session()
    marks = tuple(await desktop.accessibility.mark(session)) if query.som else ()
    response = image_response(await desktop.screen.capture(session, shot_options(query, region, marks)))
    if query.som:
        response.headers["X-Marks"] = str(len(marks))
    return response


async def screenshot(request: Request, query: ScreenshotQuery) -> Response:
    return await capture(request, query)


async def region_screenshot(request: Request, query: RegionScreenshotQuery) -> Response:
    return await capture(request, query, Region(query.x, query.y, query.width, query.height))


OPERATIONS = [
    Operation("GET", "/v1/desktop/screenshot", screenshot,
              "A fresh screenshot (png, jpeg or webp); X-* headers give its coordinate frame",
              query=ScreenshotQuery, media_type=IMAGE_TYPES, invalid_code=INVALID, errors=ERRORS,
              tags=("screenshot",)),
    Operation("GET", "/v1/desktop/screenshot/region", region_screenshot,
              "A fresh screenshot of a rectangle that lies on the screen",
              query=RegionScreenshotQuery, media_type=IMAGE_TYPES, invalid_code=INVALID, errors=ERRORS,
              tags=("screenshot",)),
]
