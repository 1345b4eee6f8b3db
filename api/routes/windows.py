"""`/v1/desktop/windows`: translates HTTP to calls of `desktop.window_control.Windows`."""

from __future__ import annotations

from starlette.requests import Request

from api.context import desktop_of
from api.operations import Operation
from desktop.windows import WindowInfo
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.windows import (
    DesktopRect,
    DesktopWindowInfo,
    DesktopWindowListResponse,
    WindowMoveRequest,
    WindowResizeRequest,
)

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (404, 409, 503)



def window_model(w: WindowInfo) -> DesktopWindowInfo:
    return DesktopWindowInfo(
        id=str(w.id), title=w.title, x=w.client.x, y=w.client.y, width=w.client.width,
        height=w.client.height, is_active=w.is_active, pid=w.pid,
        frame=DesktopRect(x=w.frame.x, y=w.frame.y, width=w.frame.width, height=w.frame.height),
    )


async def list_windows(request: Request) -> DesktopWindowListResponse:
    desktop = desktop_of(request)
    windows = await desktop.windows.list(desktop.session())
    return DesktopWindowListResponse(windows=[window_model(w) for w in windows])


async def focused(request: Request) -> DesktopWindowInfo:
    desktop = desktop_of(request)
    return window_model(await desktop.windows.focused(desktop.session()))


async def focus(request: Request) -> DesktopWindowInfo:
    desktop = desktop_of(request)
    return window_model(await desktop.windows.focus(desktop.session(), request.path_params["id"]))


async def move(request: Request, body: WindowMoveRequest) -> DesktopWindowInfo:
    desktop = desktop_of(request)
    info = await desktop.windows.move(desktop.session(), request.path_params["id"], body.x, body.y)
    return window_model(info)


async def resize(request: Request, body: WindowResizeRequest) -> DesktopWindowInfo:
    desktop = desktop_of(request)
    info = await desktop.windows.resize(desktop.session(), request.path_params["id"], body.width, body.height)
    return window_model(info)


OPERATIONS = [
    Operation("GET", "/v1/desktop/windows", list_windows, "Managed application windows",
              response=DesktopWindowListResponse, errors=(409, 503), tags=("windows",)),
    Operation("GET", "/v1/desktop/windows/focused", focused, "The focused window",
              response=DesktopWindowInfo, errors=ERRORS, tags=("windows",)),
    Operation("POST", "/v1/desktop/windows/{id}/focus", focus, "Focus and raise a window",
              response=DesktopWindowInfo, errors=ERRORS, tags=("windows",)),
    Operation("POST", "/v1/desktop/windows/{id}/move", move, "Move a window's client area to x, y",
              body=WindowMoveRequest, response=DesktopWindowInfo, invalid_code=INVALID, errors=ERRORS,
              tags=("windows",)),
    Operation("POST", "/v1/desktop/windows/{id}/resize", resize, "Resize a window's client area",
              body=WindowResizeRequest, response=DesktopWindowInfo, invalid_code=INVALID, errors=ERRORS,
              tags=("windows",)),
]
