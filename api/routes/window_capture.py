"""`GET /v1/desktop/windows/{id}/screenshot`: one window's own pixels (desktop/windows/capture.py).

The image answers with the screenshot's frame headers (api/routes/screenshot.py), where `X-Region-*`
is the captured rectangle in screen pixels, plus `X-Window-*`: image pixel (0, 0) is screen pixel
(`X-Window-X`, `X-Window-Y`) at scale 1, so a window-local point p is the screen point origin + p.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from api.convert.screenshots import FRAME_HEADERS, IMAGE_TYPES, image_response, shot_options
from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.windows.control import parse_window_id
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.windows import WindowScreenshotQuery

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
WINDOW_HEADERS = ("X-Window-Id", "X-Window-X", "X-Window-Y", "X-Window-Width", "X-Window-Height", "X-Window-Frame")


async def window_screenshot(request: Request, query: WindowScreenshotQuery) -> Response:
    desktop = desktop_of(request)
    session = desktop.session()
    wid = parse_window_id(request.path_params["id"])
    marks = tuple(await desktop.accessibility.mark(session)) if query.som else ()
    taken = await desktop.windows.capture.capture(session, wid, shot_options(query, marks=marks), frame=query.frame)
    response = image_response(taken.shot)
    r = taken.shot.region
    window = {"X-Window-Id": taken.window_id, "X-Window-X": r.x, "X-Window-Y": r.y, "X-Window-Width": r.width,
              "X-Window-Height": r.height, "X-Window-Frame": str(taken.frame).lower()}
    response.headers.update({name: str(value) for name, value in window.items()})
    if query.som:
        response.headers["X-Marks"] = str(len(marks))
    response.headers["Access-Control-Expose-Headers"] = ", ".join(FRAME_HEADERS + WINDOW_HEADERS)
    return response


OPERATIONS = [
    Operation("GET", "/v1/desktop/windows/{id}/screenshot", window_screenshot,
              "One window's own pixels, also where other windows cover it (XComposite); X-Window-* headers "
              "give its place on the screen", query=WindowScreenshotQuery, media_type=IMAGE_TYPES,
              invalid_code=INVALID, errors=(404, 409, 502, 503), tags=("windows", "screenshot")),
]
