"""Wire models of the mouse endpoints (docs/mouse.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.effects import Effect, ReportEffect
from sandbox_desktop_wire.enums import MouseButton
from sandbox_desktop_wire.limits import MAX_CLICKS, MAX_DRAG_MS, MAX_DRAG_STEPS, MAX_WHEEL_CLICKS

Button = Literal["left", "middle", "right", "back", "forward"]
"""`MouseButton`'s values, for type hints that take plain strings (sandbox_desktop_wire/enums.py)."""


class MousePositionResponse(WireModel):
    """The pointer position after the action; `window` is the decimal id of the client window under it."""

    x: int
    y: int
    screen: int | None = None
    window: str | None = None
    effect: Effect | None = Field(default=None, description="What the action changed, with `reportEffect`")


class MouseMoveRequest(ReportEffect):
    x: int = Field(description="Screen pixels, 0 <= x < width")
    y: int = Field(description="Screen pixels, 0 <= y < height")


class MouseClickRequest(ReportEffect):
    x: int
    y: int
    button: MouseButton = MouseButton.LEFT
    click_count: int = Field(default=1, ge=1, le=MAX_CLICKS,
                             description="Double and triple clicks are sent server-side")


class MouseButtonRequest(ReportEffect):
    """Press or release; with `x` and `y` the pointer moves there first (both or neither)."""

    x: int | None = None
    y: int | None = None
    button: MouseButton = MouseButton.LEFT


class MouseDragRequest(ReportEffect):
    start_x: int
    start_y: int
    end_x: int
    end_y: int
    button: MouseButton = MouseButton.LEFT
    steps: int | None = Field(default=None, ge=1, le=MAX_DRAG_STEPS,
                              description="Intermediate motion events (default from the distance)")
    duration_ms: int = Field(default=0, ge=0, le=MAX_DRAG_MS, description="Spread the motion over this many ms")


class MouseScrollRequest(ReportEffect):
    x: int
    y: int
    delta_x: int = Field(default=0, ge=-MAX_WHEEL_CLICKS, le=MAX_WHEEL_CLICKS,
                         description="Wheel clicks; > 0 scrolls right")
    delta_y: int = Field(default=0, ge=-MAX_WHEEL_CLICKS, le=MAX_WHEEL_CLICKS,
                         description="Wheel clicks; > 0 scrolls down")
