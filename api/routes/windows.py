"""`/v1/desktop/windows`: translates HTTP to window queries of the desktop."""

from __future__ import annotations

from starlette.requests import Request

from api.models.windows import DesktopRect, DesktopWindowInfo, DesktopWindowListResponse
from api.operations import Operation
from desktop import windows as desktop_windows
from desktop.runtime import Desktop
from desktop.windows import WindowInfo


def desktop_of(request: Request) -> Desktop:
    desktop: Desktop = request.app.state.desktop
    return desktop


def window_model(w: WindowInfo) -> DesktopWindowInfo:
    return DesktopWindowInfo(
        id=str(w.id), title=w.title, x=w.client.x, y=w.client.y, width=w.client.width,
        height=w.client.height, is_active=w.is_active, pid=w.pid,
        frame=DesktopRect(x=w.frame.x, y=w.frame.y, width=w.frame.width, height=w.frame.height),
    )


async def list_windows(request: Request) -> DesktopWindowListResponse:
    windows = await desktop_of(request).session().x.call(desktop_windows.list_windows)
    return DesktopWindowListResponse(windows=[window_model(w) for w in windows])


OPERATIONS = [
    Operation("GET", "/v1/desktop/windows", list_windows, "Managed application windows",
              response=DesktopWindowListResponse, errors=(409, 503), tags=("windows",)),
]
