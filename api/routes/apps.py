"""`/v1/desktop/launch` and `/v1/desktop/open`: translates HTTP to calls of `desktop.apps.launch.Apps`."""

from __future__ import annotations

from starlette.requests import Request

from api.http.operations import Operation
from api.server.services import desktop_of
from sandbox_desktop_wire.apps import LaunchRequest, LaunchResponse, OpenRequest, OpenResponse
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION



async def launch(request: Request, body: LaunchRequest) -> LaunchResponse:
    desktop = desktop_of(request)
    launched = await desktop.apps.launch(desktop.session(), body.app, body.args, body.wait, body.wait_timeout_ms)
    process = launched.process
    return LaunchResponse(process_id=process.id, pid=process.pid if process.running else None,
                          window_id=str(launched.window_id) if launched.window_id else None)


async def open_target(request: Request, body: OpenRequest) -> OpenResponse:
    desktop = desktop_of(request)
    process = await desktop.apps.open(desktop.session(), body.target)
    return OpenResponse(process_id=process.id, pid=process.pid if process.running else None,
                        exit_code=process.exit_code)


OPERATIONS = [
    Operation("POST", "/v1/desktop/launch", launch, "Launch an app on the desktop (optionally wait for its window)",
              body=LaunchRequest, response=LaunchResponse, invalid_code=INVALID, errors=(404, 409, 502, 503),
              tags=("apps",)),
    Operation("POST", "/v1/desktop/open", open_target, "Open a file or URL with xdg-open",
              body=OpenRequest, response=OpenResponse, invalid_code=INVALID, errors=(404, 409, 502, 503),
              tags=("apps",)),
]
