"""`/v1/desktop/screenshot[/region]`: translates HTTP to `desktop.screen.screenshots.Screen.capture`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from api.convert.screenshots import IMAGE_TYPES, image_response, shot_options
from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.screen.screenshots import Region
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.screenshot import RegionScreenshotQuery, ScreenshotQuery

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (409, 502, 503)


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
