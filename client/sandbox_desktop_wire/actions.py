"""Wire models of `POST /v1/desktop/actions`: a batch of input primitives, then settle and observe."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from sandbox_desktop_wire.action_log import ActionLogEntry
from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.effects import Effect
from sandbox_desktop_wire.elements import ElementTarget
from sandbox_desktop_wire.enums import CoordinateSpaceKind, MouseButton, ScreenshotFormat
from sandbox_desktop_wire.limits import (
    MAX_ACTION_LOG_ENTRIES,
    MAX_ACTION_MS,
    MAX_ACTIONS,
    MAX_CLICKS,
    MAX_DRAG_POINTS,
    MAX_IMAGE_SIZE,
    MAX_MODIFIERS,
    MAX_QUALITY,
    MAX_SCALE,
    MAX_WHEEL_CLICKS,
    MIN_QUALITY,
    MIN_SCALE,
)
from sandbox_desktop_wire.waits import Conditions

Millis = Annotated[int, Field(ge=0, le=MAX_ACTION_MS)]
ImageSize = Annotated[int, Field(ge=1, le=MAX_IMAGE_SIZE)]
Modifiers = Annotated[list[str], Field(max_length=MAX_MODIFIERS, description="Key names held during the action, e.g. "
                                       "[\"ctrl\", \"shift\"]")]


class Point(WireModel):
    x: int
    y: int


class Rect(WireModel):
    x: int
    y: int
    width: int = Field(ge=1)
    height: int = Field(ge=1)


Element = Annotated[ElementTarget | None, Field(description="Instead of x and y: an element id, a set-of-marks "
                                                "number or a query matching one element (docs/accessibility.md); the "
                                                "action lands at the centre of its visible part")]


class MoveAction(WireModel):
    type: Literal["move"]
    x: int | None = None
    y: int | None = None
    element: Element = None


class ClickAction(WireModel):
    """A click at (x, y), on `element`, or where the pointer is when none is given."""

    type: Literal["click"]
    x: int | None = None
    y: int | None = None
    element: Element = None
    button: MouseButton = MouseButton.LEFT
    count: int = Field(default=1, ge=1, le=MAX_CLICKS)
    modifiers: Modifiers = []


class DownAction(WireModel):
    type: Literal["down"]
    x: int | None = None
    y: int | None = None
    element: Element = None
    button: MouseButton = MouseButton.LEFT


class UpAction(WireModel):
    type: Literal["up"]
    x: int | None = None
    y: int | None = None
    element: Element = None
    button: MouseButton = MouseButton.LEFT


class DragAction(WireModel):
    type: Literal["drag"]
    path: list[Point] = Field(min_length=2, max_length=MAX_DRAG_POINTS)
    button: MouseButton = MouseButton.LEFT
    modifiers: Modifiers = []
    duration_ms: Millis = 0


class ScrollAction(WireModel):
    type: Literal["scroll"]
    x: int | None = None
    y: int | None = None
    element: Element = None
    delta_x: int = Field(default=0, ge=-MAX_WHEEL_CLICKS, le=MAX_WHEEL_CLICKS,
                         description="Wheel clicks; > 0 scrolls right")
    delta_y: int = Field(default=0, ge=-MAX_WHEEL_CLICKS, le=MAX_WHEEL_CLICKS,
                         description="Wheel clicks; > 0 scrolls down")
    modifiers: Modifiers = []


class TypeAction(WireModel):
    type: Literal["type"]
    text: str
    delay_ms: Millis = 10


class KeyAction(WireModel):
    type: Literal["key"]
    keys: str = Field(description="xdotool key syntax: `ctrl+s`, `Return`, `ctrl+a BackSpace`")


class HoldKeyAction(WireModel):
    type: Literal["hold_key"]
    keys: str = Field(description="One chord, held for durationMs")
    duration_ms: Millis


class WaitAction(Conditions):
    """`durationMs`: sleep that long; or one condition (`window`, `screen`, `clipboard`) waited for up to
    `timeoutMs` (docs/events.md), its result's `matched` telling whether it held."""

    type: Literal["wait"]
    duration_ms: Millis | None = None
    timeout_ms: Millis | None = Field(default=None,
                                      description="With a condition (and then required): how long to wait")


class CursorPositionAction(WireModel):
    type: Literal["cursor_position"]


class ScreenshotAction(WireModel):
    type: Literal["screenshot"]


class ImageLimits(WireModel):
    """Shrink the image to fit every given limit (never enlarged); the aspect ratio is kept."""

    scale: float | None = Field(default=None, ge=MIN_SCALE, le=MAX_SCALE)
    target_width: ImageSize | None = None
    target_height: ImageSize | None = None
    max_long_edge: ImageSize | None = Field(default=None, description="e.g. 1568, a vendor's limit")
    max_pixels: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE * MAX_IMAGE_SIZE,
                                   description="e.g. 1150000, a vendor's limit")


class ZoomAction(ImageLimits):
    """A region at native resolution (by default), in the request's coordinate space."""

    type: Literal["zoom"]
    region: Rect


Action = Annotated[
    MoveAction | ClickAction | DownAction | UpAction | DragAction | ScrollAction | TypeAction | KeyAction
    | HoldKeyAction | WaitAction | CursorPositionAction | ScreenshotAction | ZoomAction,
    Field(discriminator="type"),
]


class CoordinateOptions(WireModel):
    """The frame of every x/y in the request and the response."""

    space: CoordinateSpaceKind = CoordinateSpaceKind.SCREEN
    width: ImageSize | None = Field(default=None, description="image space: the size of the image the client saw "
                                    "(default: the size of this request's screenshots); window space: the size of "
                                    "the scaled window capture it saw (default: the window's client area)")
    height: ImageSize | None = None
    window_id: str | None = Field(default=None, description="window space: the window (its id as listed); x, y are "
                                  "its client area's pixels, as its screenshot shows them")


class SettleOptions(WireModel):
    quiet_ms: int = Field(default=300, ge=10, le=MAX_ACTION_MS, description="How long the screen must stay unchanged")
    timeout_ms: int = Field(default=5000, ge=0, le=MAX_ACTION_MS, description="Give up waiting after this long")


class ScreenshotOptions(ImageLimits):
    format: ScreenshotFormat = ScreenshotFormat.PNG
    quality: int = Field(default=85, ge=MIN_QUALITY, le=MAX_QUALITY)
    show_cursor: bool = False


class ActionsRequest(WireModel):
    actions: list[Action] = Field(max_length=MAX_ACTIONS)
    coordinates: CoordinateOptions | None = None
    settle: SettleOptions | None = None
    screenshot: ScreenshotOptions | None = Field(default=None, description="Take a screenshot after the actions "
                                                 "(also taken when `settle` is given)")
    report_effect: bool | None = Field(default=None, description="Answer what the batch changed in `effect` "
                                       "(default: the desktop's `reportEffects`); the settle, when given, is its "
                                       "window")


class ImageFrame(WireModel):
    """How the image's pixels map to the screen and to the request's coordinate space."""

    screen_width: int
    screen_height: int
    image_width: int
    image_height: int
    scale: float
    region: Rect
    """The captured rectangle in screen pixels."""
    space: str
    """The coordinate space positions in this response use."""


class Image(WireModel):
    media_type: str
    data: str
    """Base64 of the encoded image."""
    frame: ImageFrame


class ActionResult(WireModel):
    index: int
    type: str
    ok: bool = True
    x: int | None = None
    y: int | None = None
    """The pointer after a mouse action or `cursor_position`, in the request's space."""
    window: str | None = None
    element: str | None = None
    """The id of the element the action was aimed at (an `element` target)."""
    image: Image | None = None
    matched: bool | None = None
    """A `wait` for a condition: whether it held before its timeout."""
    match: dict[str, Any] | None = None
    last_state: dict[str, Any] | None = None


class ActionError(WireModel):
    index: int
    """The failing action; `len(actions)` when the final settle or screenshot failed."""
    type: str
    problem: dict[str, Any]


class CoordinateFrame(WireModel):
    space: str
    width: int
    height: int
    screen_width: int
    screen_height: int
    window_id: str | None = None
    area: Rect | None = Field(default=None, description="window space: the window's client area in screen "
                              "pixels when the batch began")


class ActionsResponse(WireModel):
    results: list[ActionResult]
    error: ActionError | None = None
    coordinates: CoordinateFrame
    settled: bool | None = None
    settle_ms: int | None = None
    screenshot: Image | None = None
    effect: Effect | None = None


class ActionLogQuery(QueryModel):
    since: int = Field(default=0, ge=0)
    """Only entries with a larger `seq`."""
    limit: int = Field(default=1000, ge=1, le=MAX_ACTION_LOG_ENTRIES)


class ActionLogResponse(WireModel):
    entries: list[ActionLogEntry]
    """Oldest first: `seq`, `t` (monotonic seconds), `at`, `source`, `kind` and the action's fields."""
