"""`/v1/desktop/windows`: translates HTTP to calls of `desktop.window_control.Windows` and
`desktop.window_states` (docs/windows.md)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request

from api.context import desktop_of
from api.operations import Operation
from desktop import window_states
from desktop.errors import invalid_action
from desktop.window_control import WindowFilter, parse_window_id
from desktop.window_states import WindowCommand
from desktop.windows import WindowInfo
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.windows import (
    DesktopRect,
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


def window_model(w: WindowInfo) -> DesktopWindowInfo:
    return DesktopWindowInfo(
        id=str(w.id), title=w.title, x=w.client.x, y=w.client.y, width=w.client.width,
        height=w.client.height, is_active=w.is_active, pid=w.pid,
        frame=DesktopRect(x=w.frame.x, y=w.frame.y, width=w.frame.width, height=w.frame.height),
        minimized=w.minimized, maximized=w.maximized, always_on_top=w.above,
        instance_name=w.wm_class[0] if w.wm_class else None, class_name=w.wm_class[1] if w.wm_class else None,
    )


def window_filter(query: WindowListQuery) -> WindowFilter | None:
    """The listing's filter, or None when the query asks for none (the plain, cheaper listing)."""
    if query.pid is None and query.class_ is None and query.title_regex is None and not query.minimized:
        return None
    title = None
    if query.title_regex is not None:
        try:
            title = re.compile(query.title_regex)
        except re.error as exc:
            raise invalid_action(f"titleRegex is not a valid regular expression: {exc}", "titleRegex",
                                 "query") from None
    return WindowFilter(pid=query.pid, wm_class=query.class_, title=title, minimized=query.minimized)


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
