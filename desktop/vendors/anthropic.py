"""Anthropic's `computer` tool (computer_20241022, _20250124, _20251124) as batch steps and a tool_result.

(`computer_toolset_20260801`, one tool per action, is desktop/vendors/anthropic_toolset.py; it plans into the same
`Plan` and answers through the same `content()`.)

Pure translation, no X: `plan()` turns one tool input into steps of `desktop.actions.batch` in screen pixels
(the model's points are pixels of a `display_width_px`x`display_height_px` image of the screen), and
`content()` turns the batch's outcome into the tool_result content to forward to the model.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from desktop.actions import batch
from desktop.core.errors import DomainError, invalid_action
from desktop.input.coordinates import CoordinateSpace
from desktop.input.keys import parse_chord, parse_keys, text_keysyms
from desktop.screen.screenshots import Region, Screenshot, ShotOptions
from desktop.vendors.common import Point, element_at, move_to, text
from sandbox_desktop_wire.enums import MouseButton, ScreenshotFormat

_V1 = frozenset({"key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
                 "double_click", "screenshot", "cursor_position"})
_V2 = _V1 | {"left_mouse_down", "left_mouse_up", "scroll", "hold_key", "wait", "triple_click"}
VERSIONS: dict[str, frozenset[str]] = {
    "computer_20241022": _V1,
    "computer_20250124": _V2,
    "computer_20251124": _V2 | {"zoom"},
}
ALL_ACTIONS = VERSIONS["computer_20251124"]
MAX_DURATION_S = 100
"""hold_key and wait, as the reference demo caps them."""
MAX_SCROLL_AMOUNT = 100
TYPE_DELAY_MS = 10
"""Between typed characters, as `/keyboard/type` by default."""
_CLICKS = {"left_click": (MouseButton.LEFT, 1), "right_click": (MouseButton.RIGHT, 1),
           "middle_click": (MouseButton.MIDDLE, 1), "double_click": (MouseButton.LEFT, 2),
           "triple_click": (MouseButton.LEFT, 3)}
_SCROLL = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}

Render = Literal["screenshot", "cursor", "zoom", "text"]


@dataclass(frozen=True)
class Tool:
    """The tool definition the model was given."""

    version: str
    width: int
    height: int
    enable_zoom: bool = False


@dataclass(frozen=True)
class Plan:
    """Steps to run, whether to settle first, and what the tool_result shows."""

    steps: list[batch.Step]
    render: Render = "screenshot"
    settle: bool = True
    press: batch.Button | None = None
    """left_mouse_down: a press that must outlive this request, so it is not run inside the batch
    (a batch releases the buttons it pressed)."""
    shot: ShotOptions | None = None
    """The final screenshot's own options (a toolset zoom's region and scale); None: the whole display."""
    text: str | None = None
    """render "text": the acknowledgement a toolset member answers."""


class Translator:
    """One tool input as a Plan; a 400 naming `input.<field>` for a bad value."""

    def __init__(self, tool: Tool, space: CoordinateSpace) -> None:
        self.tool = tool
        self.space = space

    def coordinate(self, value: Any, name: str = "coordinate") -> Point:
        where = f"input.{name}"
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise invalid_action(f"{where} must be [x, y], got {value!r}", where)
        x, y = value
        w, h = self.tool.width, self.tool.height
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (x, y)) or not (0 <= x < w and 0 <= y < h):
            raise invalid_action(f"{where} {[x, y]} is outside the {w}x{h} display (0 <= x < {w}, 0 <= y < {h})",
                                 where)
        return self.space.to_screen(x, y)

    def optional_coordinate(self, data: Mapping[str, Any]) -> batch.Where | None:
        """`coordinate`, or our `element` (a set-of-marks number), or neither: where the pointer is."""
        element = element_at(data.get("element"), "input.element")
        value = data.get("coordinate")
        if element is not None and value is not None:
            raise invalid_action("give input.coordinate or input.element, not both", "input.element")
        return element if element is not None else None if value is None else self.coordinate(value)

    @staticmethod
    def modifiers(data: Mapping[str, Any]) -> tuple[int, ...]:
        """Keys held during a click or scroll: `text` (the schema) or `key` (the reference demo)."""
        for name in ("text", "key"):
            value = data.get(name)
            if value is not None:
                return tuple(parse_chord(text(value, f"input.{name}"), f"input.{name}"))
        return ()

    @staticmethod
    def duration_ms(data: Mapping[str, Any]) -> int:
        value = data.get("duration")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid_action("input.duration (seconds) is required for this action", "input.duration")
        if not 0 <= value <= MAX_DURATION_S:
            raise invalid_action(f"input.duration={value} must be between 0 and {MAX_DURATION_S} seconds",
                                 "input.duration")
        return round(value * 1000)

    def plan(self, data: Mapping[str, Any]) -> Plan:
        action = data.get("action")
        allowed = VERSIONS[self.tool.version]
        if not isinstance(action, str) or action not in ALL_ACTIONS:
            raise invalid_action(f"unknown action {action!r}; {self.tool.version} supports: "
                                 f"{', '.join(sorted(allowed))}", "input.action")
        if action not in allowed:
            newer = next(v for v in VERSIONS if action in VERSIONS[v])
            raise invalid_action(f"action {action!r} is not part of {self.tool.version}; it needs tool type "
                                 f"{newer} or later", "input.action")
        if action == "zoom" and not self.tool.enable_zoom:
            raise invalid_action("zoom needs the tool defined with enable_zoom: true", "input.action")
        return getattr(self, f"_{action}")(data)

    def _key(self, data: Mapping[str, Any]) -> Plan:
        keys = text(data.get("text"), "input.text")
        return Plan([batch.Key(tuple(tuple(chord) for chord in parse_keys(keys, "input.text")))])

    def _type(self, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Type(tuple(text_keysyms(text(data.get("text"), "input.text"), "input.text")),
                                TYPE_DELAY_MS)])

    def _mouse_move(self, data: Mapping[str, Any]) -> Plan:
        at = self.optional_coordinate(data)
        return Plan([move_to(at if at is not None else self.coordinate(data.get("coordinate")))])

    def _click(self, data: Mapping[str, Any]) -> Plan:
        button, count = _CLICKS[data["action"]]
        return Plan([batch.Click(self.optional_coordinate(data), button, count, self.modifiers(data))])

    _left_click = _right_click = _middle_click = _double_click = _triple_click = _click

    def _left_click_drag(self, data: Mapping[str, Any]) -> Plan:
        end = self.coordinate(data.get("coordinate"))
        start = data.get("start_coordinate")
        if start is not None:
            return Plan([batch.Drag((self.coordinate(start, "start_coordinate"), end), MouseButton.LEFT,
                                    self.modifiers(data))])
        # computer_20241022 drags from wherever the pointer is.
        return Plan([batch.Button(None, MouseButton.LEFT, True), batch.Move(*end),
                     batch.Button(None, MouseButton.LEFT, False)])

    def _left_mouse_down(self, data: Mapping[str, Any]) -> Plan:
        return Plan([], press=batch.Button(self.optional_coordinate(data), MouseButton.LEFT, True))

    def _left_mouse_up(self, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Button(self.optional_coordinate(data), MouseButton.LEFT, False)])

    def _scroll(self, data: Mapping[str, Any]) -> Plan:
        direction = data.get("scroll_direction")
        if direction not in _SCROLL:
            raise invalid_action(f"input.scroll_direction must be up, down, left or right, got {direction!r}",
                                 "input.scroll_direction")
        amount = data.get("scroll_amount")
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= MAX_SCROLL_AMOUNT:
            raise invalid_action(f"input.scroll_amount must be an integer from 0 to {MAX_SCROLL_AMOUNT} "
                                 f"(wheel clicks), got {amount!r}", "input.scroll_amount")
        at, modifiers = self.optional_coordinate(data), self.modifiers(data)
        if amount == 0:
            return Plan([move_to(at)] if at else [])
        dx, dy = _SCROLL[direction]
        return Plan([batch.Scroll(at, dx * amount, dy * amount, modifiers)])

    def _hold_key(self, data: Mapping[str, Any]) -> Plan:
        chord = parse_chord(text(data.get("text"), "input.text"), "input.text")
        return Plan([batch.HoldKey(tuple(chord), self.duration_ms(data))])

    def _wait(self, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.Wait(self.duration_ms(data))])

    def _screenshot(self, data: Mapping[str, Any]) -> Plan:
        return Plan([], settle=False)

    def _cursor_position(self, data: Mapping[str, Any]) -> Plan:
        return Plan([batch.CursorPosition()], render="cursor", settle=False)

    def _zoom(self, data: Mapping[str, Any]) -> Plan:
        region = data.get("region")
        w, h = self.tool.width, self.tool.height
        if (not isinstance(region, list | tuple) or len(region) != 4
                or any(isinstance(v, bool) or not isinstance(v, int) for v in region)):
            raise invalid_action(f"input.region must be [x1, y1, x2, y2], got {region!r}", "input.region")
        x1, y1, x2, y2 = region
        if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
            raise invalid_action(f"input.region {list(region)} must satisfy 0 <= x1 < x2 <= {w} and "
                                 f"0 <= y1 < y2 <= {h} (top-left, bottom-right in the display)", "input.region")
        rect = Region(*self.space.rect_to_screen(x1, y1, x2 - x1, y2 - y1))
        return Plan([batch.Capture(ShotOptions(format=ScreenshotFormat.PNG, region=rect))], render="zoom", settle=False)


def image_block(shot: Screenshot) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": shot.media_type,
                                        "data": base64.b64encode(shot.data).decode()}}


def error_result(message: str, prefix: str = "Error: ") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{prefix}{message}"}], "is_error": True}


def content(plan: Plan, outcome: batch.BatchOutcome, space: CoordinateSpace,
            describe: Callable[[DomainError], str] = lambda exc: exc.message) -> dict[str, Any]:
    """The tool_result fields (`content`, `is_error` on failure) for a batch run from `plan`; `describe`
    words a failure (the route passes the problem's detail)."""
    if outcome.error is not None:
        return error_result(describe(outcome.error[1]))
    # The effect, when asked, rides on the text the model reads: the acknowledgement, or a line before the image.
    effect = f"Effect: {outcome.effect.summary}." if outcome.effect is not None else None
    if plan.render == "text":
        return {"content": [{"type": "text", "text": " ".join(t for t in (plan.text, effect) if t)}]}
    if plan.render == "cursor":
        pointer = outcome.results[-1].pointer
        assert pointer is not None
        x, y = space.from_screen(pointer.x, pointer.y)
        return {"content": [{"type": "text", "text": f"X={x},Y={y}"}]}
    shot = outcome.results[-1].shot if plan.render == "zoom" else outcome.shot
    if shot is None:
        return error_result("no screenshot was taken")
    return {"content": ([{"type": "text", "text": effect}] if effect else []) + [image_block(shot)]}
