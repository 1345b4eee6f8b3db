"""Anthropic's `computer_toolset_20260801` as batch steps and the tool_result content its SDK renders.

The toolset differs from the `computer` tool (desktop/vendors/anthropic.py) in three ways that matter here:
each action is its own member tool (`tool_use.name` is `left_click`, the input has no `action`); there is no
display size, so the driver picks the screenshot size within the model's image limits and the model's points
are pixels of those screenshots; and a pure action answers a short acknowledgement (`Clicked.`) rather than a
screenshot, so only `screenshot` and `zoom` wait for the screen to settle. Pure translation, no X.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from desktop.actions import batch
from desktop.core.errors import FieldError, field_errors, invalid_action
from desktop.input.coordinates import CoordinateSpace, ImageFit, fit_image
from desktop.input.keys import parse_chord, parse_keys, text_keysyms
from desktop.screen.screenshots import Region, ShotOptions
from desktop.vendors.anthropic import MAX_DURATION_S, MAX_SCROLL_AMOUNT, TYPE_DELAY_MS, Plan
from desktop.vendors.common import Point, move_to
from sandbox_desktop_wire.enums import MouseButton, ScreenshotFormat

TOOLSET = "computer_toolset_20260801"
MAX_LONG_EDGE = 1568
MAX_PIXELS = 1_150_000
"""The model's image limits (docs/actions.md uses the same for vendor screenshots)."""
MAX_REPEAT = 100
"""`key`'s `repeat`: enough for any real edit, short enough that one call cannot type for minutes."""

# The SDK's own acknowledgements (its renderer's registry), so a model reads what it was trained on; None: the
# member answers an image or the pointer's position instead.
ACKNOWLEDGEMENTS: dict[str, str | None] = {
    "key": "Pressed {text}.",
    "hold_key": "Held {text} for {duration}s.",
    "type": "Typed.",
    "cursor_position": None,
    "mouse_move": "Moved the mouse.",
    "left_mouse_down": "Left mouse button pressed.",
    "left_mouse_up": "Left mouse button released.",
    "left_click": "Clicked.",
    "left_click_drag": "Dragged.",
    "right_click": "Right-clicked.",
    "middle_click": "Middle-clicked.",
    "double_click": "Double-clicked.",
    "triple_click": "Triple-clicked.",
    "scroll": "Scrolled {scroll_direction}.",
    "wait": "Waited {duration}s.",
    "screenshot": None,
    "zoom": None,
}
MEMBERS = tuple(ACKNOWLEDGEMENTS)
NOT_EXECUTED = "Not executed: an earlier computer action in this turn failed."
"""The SDK runner's answer for the calls of a turn after the first that failed."""

_CLICKS = {"left_click": (MouseButton.LEFT, 1), "right_click": (MouseButton.RIGHT, 1),
           "middle_click": (MouseButton.MIDDLE, 1), "double_click": (MouseButton.LEFT, 2),
           "triple_click": (MouseButton.LEFT, 3)}
_SCROLL = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def screenshot_fit(screen_width: int, screen_height: int) -> ImageFit:
    """The screenshot the model sees: the largest image of the screen within the limits (never enlarged)."""
    return fit_image(screen_width, screen_height, max_long_edge=MAX_LONG_EDGE, max_pixels=MAX_PIXELS)


def zoom_fit(width: int, height: int) -> ImageFit:
    """A zoomed region enlarged to fill the limits, as the SDK describes zoom, so small text becomes legible.

    `fit_image` never enlarges, so it fits a capture `k` times the region's size (k large enough that the long
    edge limit is reachable); the same scale times `k` gives that size from the region itself."""
    k = max(1, math.ceil(MAX_LONG_EDGE / max(width, height)))
    fit = fit_image(width * k, height * k, max_long_edge=MAX_LONG_EDGE, max_pixels=MAX_PIXELS)
    return ImageFit(fit.scale * k, fit.width, fit.height)


def missing(field: str, what: str) -> FieldError:
    """A 422: a required member field absent or of the wrong type (docs/errors.md, "Bad input")."""
    return FieldError(field_errors(field, f"{field} is required: {what}"), wrong_shape=True)


def one_line(value: object) -> str:
    """A model-given value folded to one line for an acknowledgement; a whole number as JSON spells it."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return " ".join(str(value).split())


class ToolsetTranslator:
    """One member call as a Plan; errors name `<prefix>name` or `<prefix>input.<field>` (prefix: `tool_uses[i].`
    for a block of a turn)."""

    def __init__(self, space: CoordinateSpace, disabled: frozenset[str] = frozenset(), prefix: str = "") -> None:
        self.space = space
        self.disabled = disabled
        self.prefix = prefix

    def field(self, name: str) -> str:
        return f"{self.prefix}input.{name}"

    def plan(self, name: Any, data: Mapping[str, Any]) -> Plan:
        where = f"{self.prefix}name"
        if not isinstance(name, str) or name not in ACKNOWLEDGEMENTS:
            raise FieldError(field_errors(where, f"unknown computer toolset member {name!r}; "
                                                 f"{TOOLSET} has: {', '.join(MEMBERS)}"), wrong_shape=True)
        if name in self.disabled:
            raise invalid_action(f"the member {name!r} is disabled in tool.configs", where)
        plan: Plan = getattr(self, f"_{name}")(name, data)
        template = ACKNOWLEDGEMENTS[name]
        if template is None:
            return plan
        text = template.format(**{k: one_line(v) for k, v in data.items()})
        return Plan(plan.steps, render="text", settle=False, press=plan.press, text=text)

    # -- values ------------------------------------------------------------------------------------------

    def coordinate(self, value: Any, name: str = "coordinate") -> Point:
        where = self.field(name)
        if not isinstance(value, list | tuple) or len(value) != 2 or any(
                isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise FieldError(field_errors(where, f"{where} must be [x, y] (integers), got {value!r}"),
                             wrong_shape=True)
        x, y = value
        w, h = self.space.width, self.space.height
        if not (0 <= x < w and 0 <= y < h):
            raise invalid_action(f"{where} {[x, y]} is outside the {w}x{h} screenshot (0 <= x < {w}, "
                                 f"0 <= y < {h})", where)
        return self.space.to_screen(x, y)

    def optional_coordinate(self, data: Mapping[str, Any]) -> Point | None:
        value = data.get("coordinate")
        return None if value is None else self.coordinate(value)

    def text(self, data: Mapping[str, Any]) -> str:
        value = data.get("text")
        if not isinstance(value, str) or not value:
            raise missing(self.field("text"), "a non-empty string")
        return value

    def modifiers(self, data: Mapping[str, Any]) -> tuple[int, ...]:
        """Keys held during a click, drag or scroll (`text`, e.g. `ctrl+shift`)."""
        value = data.get("text")
        if value is None:
            return ()
        if not isinstance(value, str) or not value:
            raise missing(self.field("text"), "the keys to hold, e.g. \"shift\" or \"ctrl+shift\"")
        return tuple(parse_chord(value, self.field("text")))

    def duration_ms(self, data: Mapping[str, Any]) -> int:
        where, value = self.field("duration"), data.get("duration")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise missing(where, "seconds, a number")
        if not 0 <= value <= MAX_DURATION_S:
            raise invalid_action(f"{where}={value} must be between 0 and {MAX_DURATION_S} seconds", where)
        return round(value * 1000)

    # -- members -----------------------------------------------------------------------------------------

    def _key(self, name: str, data: Mapping[str, Any]) -> Plan:
        chords = tuple(tuple(chord) for chord in parse_keys(self.text(data), self.field("text")))
        repeat, where = data.get("repeat", 1), self.field("repeat")
        if isinstance(repeat, bool) or not isinstance(repeat, int):
            raise missing(where, "an integer")
        if not 1 <= repeat <= MAX_REPEAT:
            raise invalid_action(f"{where}={repeat} must be between 1 and {MAX_REPEAT}", where)
        return Plan([batch.Key(chords * repeat)])

    def _hold_key(self, name: str, data: Mapping[str, Any]) -> Plan:
        chord = parse_chord(self.text(data), self.field("text"))
        return Plan([batch.HoldKey(tuple(chord), self.duration_ms(data))])

    def _type(self, name: str, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Type(tuple(text_keysyms(self.text(data), self.field("text"))), TYPE_DELAY_MS)])

    def _mouse_move(self, name: str, data: Mapping[str, Any]) -> Plan:
        return Plan([move_to(self.coordinate(data.get("coordinate")))])

    def _click(self, name: str, data: Mapping[str, Any]) -> Plan:
        button, count = _CLICKS[name]
        return Plan([batch.Click(self.optional_coordinate(data), button, count, self.modifiers(data))])

    _left_click = _right_click = _middle_click = _double_click = _triple_click = _click

    def _left_click_drag(self, name: str, data: Mapping[str, Any]) -> Plan:
        start = self.coordinate(data.get("start_coordinate"), "start_coordinate")
        end = self.coordinate(data.get("coordinate"))
        return Plan([batch.Drag((start, end), MouseButton.LEFT, self.modifiers(data))])

    def _left_mouse_down(self, name: str, data: Mapping[str, Any]) -> Plan:
        # At the pointer, as the member is defined; run outside the batch so it outlives the request.
        return Plan([], press=batch.Button(None, MouseButton.LEFT, True))

    def _left_mouse_up(self, name: str, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Button(None, MouseButton.LEFT, False)])

    def _scroll(self, name: str, data: Mapping[str, Any]) -> Plan:
        direction = data.get("scroll_direction")
        if direction not in _SCROLL:
            raise FieldError(field_errors(self.field("scroll_direction"), "must be up, down, left or right, "
                                          f"got {direction!r}"), wrong_shape=True)
        amount, where = data.get("scroll_amount"), self.field("scroll_amount")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise missing(where, "wheel clicks, an integer")
        if not 0 <= amount <= MAX_SCROLL_AMOUNT:
            raise invalid_action(f"{where}={amount} must be between 0 and {MAX_SCROLL_AMOUNT} (wheel clicks)",
                                 where)
        at, modifiers = self.optional_coordinate(data), self.modifiers(data)
        if amount == 0:
            return Plan([move_to(at)] if at else [])
        dx, dy = _SCROLL[direction]
        return Plan([batch.Scroll(at, dx * amount, dy * amount, modifiers)])

    def _wait(self, name: str, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Wait(self.duration_ms(data))])

    def _cursor_position(self, name: str, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.CursorPosition()], render="cursor", settle=False)

    def _screenshot(self, name: str, data: Mapping[str, Any]) -> Plan:
        # Settles first: the actions before it answered at once, without waiting for the screen to redraw.
        return Plan([], render="screenshot", settle=True)

    def _zoom(self, name: str, data: Mapping[str, Any]) -> Plan:
        region, where = data.get("region"), self.field("region")
        if (not isinstance(region, list | tuple) or len(region) != 4
                or any(isinstance(v, bool) or not isinstance(v, int) for v in region)):
            raise FieldError(field_errors(where, f"{where} must be [x0, y0, x1, y1] (integers), got {region!r}"),
                             wrong_shape=True)
        x0, y0, x1, y1 = region
        w, h = self.space.width, self.space.height
        if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
            raise invalid_action(f"{where} {list(region)} must satisfy 0 <= x0 < x1 <= {w} and 0 <= y0 < y1 <= "
                                 f"{h} (top-left, bottom-right in the screenshot)", where)
        rect = Region(*self.space.rect_to_screen(x0, y0, x1 - x0, y1 - y0))
        fit = zoom_fit(rect.width, rect.height)
        return Plan([], render="screenshot", settle=True,
                    shot=ShotOptions(format=ScreenshotFormat.PNG, region=rect, scale=fit.scale))
