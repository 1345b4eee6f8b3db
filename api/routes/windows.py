"""`/v1/desktop/windows`: translates HTTP to calls of `desktop.windows.control.Windows` and
`desktop.windows.states` (docs/windows.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request

from api.convert.windows import window_filter, window_model
from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.windows import states as window_states
from desktop.windows.control import parse_window_id
from desktop.windows.states import WindowCommand
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.windows import (
    DesktopWindowInfo,
    DesktopWindowListResponse,
    WindowAboveRequest,
    WindowCloseRequest,
    WindowCloseResponse,
    WindowListQuery,
    WindowMoveRequest,
    WindowResizeRequest,
)

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (404, 409, 503)
TAGS = ("windows",)


async def list_windows(request: Request, query: WindowListQuery) -> DesktopWindowListResponse:
    desktop = desktop_of(request)
    windows = await desktop.windows.list(desktop.session(), window_filter(query))
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


def _changer(command: WindowCommand) -> Callable[[Request], Awaitable[DesktopWindowInfo]]:
    async def change(request: Request) -> DesktopWindowInfo:
        desktop = desktop_of(request)
        wid = parse_window_id(request.path_params["id"])
        return window_model(await window_states.change(desktop.session(), wid, command))

    change.__name__ = f"{command.value}_window"
    return change


async def always_on_top(request: Request, body: WindowAboveRequest) -> DesktopWindowInfo:
    desktop = desktop_of(request)
    wid = parse_window_id(request.path_params["id"])
    return window_model(await window_states.set_above(desktop.session(), wid, body.enabled))


async def close(request: Request, body: WindowCloseRequest) -> WindowCloseResponse:
    desktop = desktop_of(request)
    wid = parse_window_id(request.path_params["id"])
    done = await window_states.close(desktop.session(), wid, body.timeout_ms / 1000, body.force)
    return WindowCloseResponse(id=str(done.window_id), closed=done.closed, forced=done.forced,
                               elapsed_ms=round(done.elapsed_s * 1000))


_SUMMARIES = {
    WindowCommand.MINIMIZE: "Minimise (iconify) a window",
    WindowCommand.MAXIMIZE: "Maximise a window (restoring it first when minimised)",
    WindowCommand.RESTORE: "Restore a minimised or maximised window",
    WindowCommand.RAISE: "Raise a window above the others of its layer, without focusing it",
}

OPERATIONS = [
    Operation("GET", "/v1/desktop/windows", list_windows, "Managed application windows, optionally filtered",
              query=WindowListQuery, response=DesktopWindowListResponse, invalid_code=INVALID, errors=(409, 503),
              tags=TAGS),
    Operation("GET", "/v1/desktop/windows/focused", focused, "The focused window",
              response=DesktopWindowInfo, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/windows/{id}/focus", focus, "Focus and raise a window",
              response=DesktopWindowInfo, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/windows/{id}/move", move, "Move a window's client area to x, y",
              body=WindowMoveRequest, response=DesktopWindowInfo, invalid_code=INVALID, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/windows/{id}/resize", resize, "Resize a window's client area",
              body=WindowResizeRequest, response=DesktopWindowInfo, invalid_code=INVALID, errors=ERRORS, tags=TAGS),
    *(Operation("POST", f"/v1/desktop/windows/{{id}}/{command.value}", _changer(command), summary,
                response=DesktopWindowInfo, errors=ERRORS, tags=TAGS) for command, summary in _SUMMARIES.items()),
    Operation("POST", "/v1/desktop/windows/{id}/always-on-top", always_on_top,
              "Keep a window above the others (`enabled: false` ends it)", body=WindowAboveRequest,
              response=DesktopWindowInfo, invalid_code=INVALID, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/windows/{id}/close", close,
              "Close a window politely (WM_DELETE_WINDOW), then disconnect its client after timeoutMs",
              body=WindowCloseRequest, response=WindowCloseResponse, invalid_code=INVALID, errors=ERRORS, tags=TAGS),
]
