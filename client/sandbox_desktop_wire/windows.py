"""Wire models of the window endpoints (docs/windows.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.limits import MAX_WINDOW_COORDINATE


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
