"""Wire models of `POST /v1/desktop/models/act`: what an open computer-use model printed in, the actions it
amounted to, the final answer and the next screenshot out (docs/vendors.md, "Open models")."""

from __future__ import annotations

import enum

from pydantic import Field

from sandbox_desktop_wire.actions import Image, SettleOptions
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.effects import Effect, ReportEffect
from sandbox_desktop_wire.enums import MouseButton

MAX_OUTPUT_CHARS = 100_000
"""A model's printed turn, thought and all; longer is not a model's output."""
MAX_FACTOR = 256
MAX_MODEL_PIXELS = 1 << 26
"""The largest `maxPixels` taken (64 Mpx, 4x Qwen3-VL's own bound)."""


class ModelFamily(enum.StrEnum):
    """Whose output it is: which syntax it is parsed as, and the coordinate convention taken by default."""

    QWEN25_VL = "qwen2.5-vl"
    """`<tool_call>{"name": "computer_use", "arguments": {...}}</tool_call>`; smart-resize pixels, factor 28."""
    QWEN3_VL = "qwen3-vl"
    """The same tool call; points on the 0-1000 grid."""
    UI_TARS_1 = "ui-tars-1.0"
    """`Thought: ...` then `Action: click(start_box='(x,y)')`; points on the 0-1000 grid."""
    UI_TARS_15 = "ui-tars-1.5"
    """The same syntax (and `point='<point>x y</point>'`); smart-resize pixels, factor 28."""
    OPENCUA = "opencua"
    """`pyautogui.click(x=..., y=...)` lines (and `computer.terminate`); smart-resize pixels, factor 28."""
    FARA = "fara"
    """Fara-7B's `computer_use` tool calls (with `visit_url`, `web_search`, `history_back`); smart-resize pixels."""


class CoordinateConvention(enum.StrEnum):
    """The space a model's points are in."""

    SMART_RESIZE = "smart-resize"
    """Pixels of the screenshot resized as the model's processor does (both sides a multiple of `factor`, the
    area within `minPixels`..`maxPixels`); the answer's screenshot is that size."""
    GRID_1000 = "grid-1000"
    """0-1000 on both axes, whatever the screen (Qwen3-VL, UI-TARS 1.0): `v / 1000 * size`."""
    RELATIVE = "relative"
    """Fractions 0-1 of the screen's width and height."""
    SCREEN = "screen"
    """Screen pixels."""


class ModelActRequest(ReportEffect):
    family: ModelFamily
    text: str = Field(min_length=1, max_length=MAX_OUTPUT_CHARS, description="What the model printed, as it "
                      "printed it: its thought, tool calls, action lines or code block")
    convention: CoordinateConvention | None = Field(default=None, description="Default: the family's own")
    factor: int | None = Field(default=None, ge=1, le=MAX_FACTOR, description="smart-resize: the multiple both "
                               "sides are rounded to (default 28; Qwen3-VL's processor uses 32)")
    min_pixels: int | None = Field(default=None, ge=1, le=MAX_MODEL_PIXELS, description="smart-resize: the "
                                   "smallest area (default: the family's processor's)")
    max_pixels: int | None = Field(default=None, ge=1, le=MAX_MODEL_PIXELS, description="smart-resize: the "
                                   "largest area (default: the family's processor's)")
    screenshot: bool = Field(default=True, description="Answer the screenshot after the actions")
    search_url: str = Field(default="https://www.bing.com/search?q={query}", min_length=1,
                            description="Fara's `web_search`: `{query}` is replaced by the query, URL-encoded")
    settle: SettleOptions | None = Field(default=None, description="Wait for the screen to settle after the "
                                         "actions (default before a screenshot: quietMs 300, timeoutMs 5000; none "
                                         "without one)")


class ModelActionKind(enum.StrEnum):
    MOVE = "move"
    CLICK = "click"
    DRAG = "drag"
    BUTTON = "button"
    SCROLL = "scroll"
    TYPE = "type"
    KEY = "key"
    KEY_DOWN = "key_down"
    KEY_UP = "key_up"
    WAIT = "wait"
    NAVIGATE = "navigate"
    BACK = "back"
    NOTE = "note"
    """Nothing to do on the desktop (Fara's `pause_and_memorize_fact`)."""
    FINAL = "final"


class ModelAction(WireModel):
    """One parsed action, as it ran: points in screen pixels, with the model's own beside them."""

    kind: ModelActionKind
    source: str = Field(description="The model's name for it (`left_click`, `left_double`, `pyautogui.click`)")
    x: int | None = None
    y: int | None = None
    model_x: float | None = None
    model_y: float | None = None
    to_x: int | None = Field(default=None, description="drag: where it ends")
    to_y: int | None = None
    button: MouseButton | None = None
    count: int | None = None
    down: bool | None = Field(default=None, description="button: pressed (true) or released")
    scroll_x: int | None = Field(default=None, description="Wheel clicks, right positive")
    scroll_y: int | None = Field(default=None, description="Wheel clicks, down positive")
    text: str | None = None
    keys: list[str] | None = None
    duration_ms: int | None = None
    url: str | None = None


class FinalAnswer(WireModel):
    status: str = Field(description="`success`, `failure` (as the model said), or `call_user`")
    content: str | None = None


class ModelActResult(WireModel):
    family: ModelFamily
    convention: CoordinateConvention
    model_width: int | None = Field(default=None, description="The size of the model's space: the smart-resized "
                                    "image, 1000 for the grid, 1 for relative, or the screen")
    model_height: int | None = None
    thought: str | None = Field(default=None, description="The model's thought, when it printed one")
    actions: list[ModelAction]
    final: FinalAnswer | None = Field(default=None, description="terminate, finished or answer: nothing ran for it")
    screenshot: Image | None = Field(default=None, description="After the actions, in the model's convention: the "
                                     "smart-resized size for smart-resize, else the screen's")
    effect: Effect | None = Field(default=None, description="What the actions changed (regions in screen pixels), "
                                  "with `reportEffect` (docs/effects.md)")
