"""Wire models of the mouse endpoints (docs/mouse.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.base import WireModel

Button = Literal["left", "middle", "right", "back", "forward"]


class MousePositionResponse(WireModel):
    """The pointer position after the action; `window` is the decimal id of the client window under it."""

    x: int
    y: int
    screen: int | None = None
    window: str | None = None


class MouseMoveRequest(WireModel):
    x: int = Field(description="Screen pixels, 0 <= x < width")
    y: int = Field(description="Screen pixels, 0 <= y < height")


class MouseClickRequest(WireModel):
    x: int
    y: int
    button: Button = "left"
    click_count: int = Field(1, description="1-3; double and triple clicks are sent server-side")


class MouseButtonRequest(WireModel):
    """Press or release; with `x` and `y` the pointer moves there first (both or neither)."""

    x: int | None = None
    y: int | None = None
    button: Button = "left"


class MouseDragRequest(WireModel):
    start_x: int
    start_y: int
    end_x: int
    end_y: int
    button: Button = "left"
    steps: int | None = Field(None, description="Intermediate motion events (1-1000; default from the distance)")
    duration_ms: int = Field(0, description="Spread the motion over this many ms (0-60000)")


class MouseScrollRequest(WireModel):
    x: int
    y: int
    delta_x: int = Field(0, description="Wheel clicks; > 0 scrolls right")
    delta_y: int = Field(0, description="Wheel clicks; > 0 scrolls down")
