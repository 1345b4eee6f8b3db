"""Wire models of the window endpoints (docs/windows.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.limits import MAX_ACTION_MS, MAX_WINDOW_COORDINATE
from sandbox_desktop_wire.screenshot import ScreenshotQuery

MAX_TITLE_PATTERN = 1000
"""The longest `titleRegex` accepted."""
DEFAULT_CLOSE_TIMEOUT_MS = 3000


class DesktopRect(WireModel):
    x: int
    y: int
    width: int
    height: int


class DesktopWindowInfo(WireModel):
    """x, y, width, height: the client area in screen pixels; `frame` includes the decorations."""

    id: str = Field(description="Decimal X window id")
    title: str
    x: int
    y: int
    width: int
    height: int
    is_active: bool
    frame: DesktopRect | None = None
    pid: int | None = None
    minimized: bool = False
    """Iconified: listed only with `minimized=true`, has no pixels (capture answers 409)."""
    maximized: bool = False
    always_on_top: bool = False
    instance_name: str | None = Field(default=None, description="WM_CLASS instance name, e.g. `xterm`")
    class_name: str | None = Field(default=None, description="WM_CLASS class name, e.g. `XTerm`")


class DesktopWindowListResponse(WireModel):
    windows: list[DesktopWindowInfo]


class WindowMoveRequest(WireModel):
    x: int = Field(ge=-MAX_WINDOW_COORDINATE, le=MAX_WINDOW_COORDINATE,
                   description="Client area left edge in screen pixels")
    y: int = Field(ge=-MAX_WINDOW_COORDINATE, le=MAX_WINDOW_COORDINATE,
                   description="Client area top edge in screen pixels")


class WindowResizeRequest(WireModel):
    width: int = Field(ge=1, le=MAX_WINDOW_COORDINATE,
                       description="Client area width (the app may round it, e.g. terminals)")
    height: int = Field(ge=1, le=MAX_WINDOW_COORDINATE, description="Client area height")


class WindowListQuery(QueryModel):
    """Filters of `GET /v1/desktop/windows`; every given one must hold."""

    pid: int | None = Field(default=None, ge=1, description="Only windows whose `_NET_WM_PID` is this")
    class_: str | None = Field(default=None, alias="class", min_length=1,
                               description="Only windows whose WM_CLASS instance or class name is this "
                               "(ignoring case)")
    title_regex: str | None = Field(default=None, max_length=MAX_TITLE_PATTERN,
                                    description="Only windows whose title this Python regular expression "
                                    "matches somewhere (re.search)")
    minimized: bool = Field(default=False, description="List minimised windows too")


class WindowScreenshotQuery(ScreenshotQuery):
    """The screenshot options, for one window's own pixels."""

    frame: bool = Field(default=False, description="Include the window manager's decorations (title bar, "
                        "borders); by default the image is the client area")


class WindowCloseRequest(WireModel):
    timeout_ms: int = Field(default=DEFAULT_CLOSE_TIMEOUT_MS, ge=0, le=MAX_ACTION_MS,
                            description="How long the application has to close after the polite request")
    force: bool = Field(default=True, description="After `timeoutMs`, disconnect the application's X client "
                        "(XKillClient)")


class WindowCloseResponse(WireModel):
    id: str
    closed: bool
    """The window is gone from the window manager's list."""
    forced: bool
    """The polite request timed out and the client was disconnected."""
    elapsed_ms: int


class WindowAboveRequest(WireModel):
    enabled: bool = Field(default=True, description="true keeps the window above the others, false ends it")
