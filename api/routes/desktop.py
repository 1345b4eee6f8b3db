"""`/v1/desktop` lifecycle and status: translates HTTP to calls of `desktop.lifecycle.runtime.Desktop`."""

from __future__ import annotations

from starlette.requests import Request

from api.convert.desktop import resolution, start_options, status_model
from api.http.operations import Operation
from api.server.services import desktop_of
from sandbox_desktop_wire.desktop import (
    DesktopDisplayInfoResponse,
    DesktopStartRequest,
    DesktopStatusResponse,
)
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
READY_ERRORS = (409, 503)


async def start(request: Request, body: DesktopStartRequest) -> DesktopStatusResponse:
    requested = {name for name, value in body.model_dump().items() if value is not None}
    desktop = desktop_of(request)
    snapshot = await desktop.start(start_options(body), requested)
    return status_model(snapshot, desktop.options)


async def stop(request: Request) -> DesktopStatusResponse:
    return status_model(await desktop_of(request).stop())


async def status(request: Request) -> DesktopStatusResponse:
    desktop = desktop_of(request)
    return status_model(await desktop.snapshot(), desktop.options)


async def display_info(request: Request) -> DesktopDisplayInfoResponse:
    desktop = desktop_of(request)
    supervisor = desktop.require_active()
    options = desktop.options
    assert options is not None
    return DesktopDisplayInfoResponse(display=supervisor.display, resolution=resolution(options))


OPERATIONS = [
    Operation("GET", "/v1/desktop/status", status, "Desktop state, display, processes and windows",
              response=DesktopStatusResponse, tags=("desktop",)),
    Operation("POST", "/v1/desktop/start", start, "Start the desktop (idempotent while active)",
              body=DesktopStartRequest, response=DesktopStatusResponse, invalid_code=INVALID,
              errors=(400, 409, 501, 503), tags=("desktop",)),
    Operation("POST", "/v1/desktop/stop", stop, "Stop the desktop and everything it started",
              response=DesktopStatusResponse, errors=(409,), tags=("desktop",)),
    Operation("GET", "/v1/desktop/display/info", display_info, "Display name and resolution",
              response=DesktopDisplayInfoResponse, errors=READY_ERRORS, tags=("desktop",)),
]
