"""`POST /v1/desktop/display`: change the screen size of the running desktop (docs/display.md)."""

from __future__ import annotations

from starlette.requests import Request

from api.http.operations import Operation
from api.server.services import desktop_services
from sandbox_desktop_wire.display import DisplayChangeRequest, DisplayChangeResponse
from sandbox_desktop_wire.problems import ProblemCode

SCREEN_UPDATED = "screen/updated"
"""neko's event telling viewers the screen changed size: `{width, height, rate}`."""


async def change_display(request: Request, body: DisplayChangeRequest) -> DisplayChangeResponse:
    services = desktop_services(request)
    change = await services.desktop.set_display(body.width, body.height, body.dpi)
    stream = services.stream
    if stream.active:
        # The live view already follows (its encoder re-opens on the first frame of the new size); viewers
        # are told too, as neko's server does, so that players resize their canvas and coordinates.
        rate = stream.require_config().fps
        await stream.broadcast(SCREEN_UPDATED, {"width": change.width, "height": change.height, "rate": rate})
    return DisplayChangeResponse(width=change.width, height=change.height, dpi=change.dpi,
                                 max_width=change.max_width, max_height=change.max_height,
                                 elapsed_ms=round(change.elapsed_s * 1000, 2))


OPERATIONS = [
    Operation("POST", "/v1/desktop/display", change_display,
              "Change the screen size (and dpi) of the running desktop, its apps and windows kept",
              body=DisplayChangeRequest, response=DisplayChangeResponse,
              invalid_code=ProblemCode.DESKTOP_INVALID_ACTION, body_required=True, errors=(400, 409, 503),
              tags=("desktop",)),
]
