"""OpenAI's `computer_call` (one `action` or a batch of `actions`) as batch steps and a call output.

Pure translation, no X. Points are in the display the tool declared (`display_width`x`display_height`,
mapped like pixels of a scaled screenshot) or screen pixels without one. `scroll_x`/`scroll_y` are
pixels, as OpenAI's browser samples pass them to `window.scrollBy`; the desktop scrolls in wheel
clicks of SCROLL_PX_PER_CLICK pixels, rounded, at least one click for any non-zero amount.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from desktop.actions import batch
from desktop.core.errors import invalid_action
from desktop.input.coordinates import CoordinateSpace
from desktop.input.keys import keysym_for_name, text_keysyms
from desktop.screen.screenshots import Screenshot
from desktop.vendors.common import Point, element_at, integer, move_to, point, text
from sandbox_desktop_wire.enums import MouseButton
from sandbox_desktop_wire.limits import MAX_ACTIONS, MAX_WHEEL_CLICKS

SCROLL_PX_PER_CLICK = 100
"""Pixels per wheel click (what browsers scroll per click, and what TanStack's adapter assumes)."""
MAX_SCROLL_PX = SCROLL_PX_PER_CLICK * MAX_WHEEL_CLICKS
"""The batch's limit of wheel clicks."""
WAIT_MS = 1000
"""`wait` carries no duration; OpenAI's samples sleep 1-2 s."""
TYPE_DELAY_MS = 10
BUTTONS = {"left": MouseButton.LEFT, "right": MouseButton.RIGHT, "wheel": MouseButton.MIDDLE, "back": MouseButton.BACK,
           "forward": MouseButton.FORWARD}
"""OpenAI's button names: its `wheel` is the middle button."""
ACTIONS = ("click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait")


def wheel_clicks(pixels: int) -> int:
    """Scroll pixels as wheel clicks: rounded to SCROLL_PX_PER_CLICK, at least one when non-zero."""
    if pixels == 0:
        return 0
    clicks = max(1, (abs(pixels) + SCROLL_PX_PER_CLICK // 2) // SCROLL_PX_PER_CLICK)
    return clicks if pixels > 0 else -clicks


def key_names(value: Any, where: str) -> tuple[int, ...]:
    """OpenAI key names (`CTRL`, `ENTER`, `ArrowLeft`, `a`) as keysyms of one chord.

    A single letter is its lower-case key, so `["CTRL", "A"]` is Ctrl+A, not Ctrl+Shift+A.
    """
    if not isinstance(value, list) or not value:
        raise invalid_action(f"{where} must be a non-empty list of key names", where)
    keysyms: list[int] = []
    for j, name in enumerate(value):
        name_field = f"{where}[{j}]"
        name = text(name, name_field).strip()
        keysym = keysym_for_name(name.lower() if len(name) == 1 and name.isalpha() else name)
        if keysym is None:
            raise invalid_action(f"unknown key {name!r}; use names such as CTRL, SHIFT, ALT, ENTER, ESC, "
                                 f"ARROWLEFT, PAGEDOWN, F5 or a single character", name_field)
        if keysym not in keysyms:
            keysyms.append(keysym)
    return tuple(keysyms)


@dataclass
class Plan:
    """The steps of a call; `origins[i]` is the index of the action step `i` came from."""

    steps: list[batch.Step] = field(default_factory=list)
    origins: list[int] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    """`call.actions[i]` (or `call.action`) of every action, to name a failing one."""


class Translator:
    """A `computer_call` as a Plan; a 400 naming `call.actions[i].<field>` for a bad value."""

    def __init__(self, space: CoordinateSpace) -> None:
        self.space = space

    def plan(self, call: Mapping[str, Any]) -> Plan:
        single, batch = call.get("action"), call.get("actions")
        if batch is not None:
            if not isinstance(batch, list) or len(batch) > MAX_ACTIONS:
                raise invalid_action(f"call.actions must be a list of at most {MAX_ACTIONS} actions",
                                     "call.actions")
            items = [(f"call.actions[{i}]", a) for i, a in enumerate(batch)]
        elif single is not None:
            items = [("call.action", single)]
        else:
            raise invalid_action("give call.action or call.actions", "call.actions")
        plan = Plan()
        for index, (prefix, action) in enumerate(items):
            plan.prefixes.append(prefix)
            step = self.step(action, prefix)
            if step is not None:
                plan.steps.append(step)
                plan.origins.append(index)
        return plan

    def at(self, action: Mapping[str, Any], prefix: str) -> batch.Where:
        """`x` and `y`, or our `element` (a set-of-marks number) instead (docs/vendors.md)."""
        element = element_at(action.get("element"), f"{prefix}.element")
        if element is not None:
            return element
        return point(self.space, action.get("x"), action.get("y"), f"{prefix}.x", f"{prefix}.y")

    def point_at(self, action: Mapping[str, Any], prefix: str) -> Point:
        return point(self.space, action.get("x"), action.get("y"), f"{prefix}.x", f"{prefix}.y")

    @staticmethod
    def held(action: Mapping[str, Any], prefix: str) -> tuple[int, ...]:
        keys = action.get("keys")
        return () if keys is None or keys == [] else key_names(keys, f"{prefix}.keys")

    def step(self, action: Any, prefix: str) -> batch.Step | None:
        if not isinstance(action, Mapping):
            raise invalid_action(f"{prefix} must be an object with a type", prefix)
        kind = action.get("type")
        if kind not in ACTIONS:
            raise invalid_action(f"unknown action type {kind!r}; expected one of {', '.join(ACTIONS)}",
                                 f"{prefix}.type")
        match kind:
            case "click":
                button = action.get("button", "left")
                if button not in BUTTONS:
                    raise invalid_action(f"{prefix}.button must be one of {', '.join(BUTTONS)}, got {button!r}",
                                         f"{prefix}.button")
                return batch.Click(self.at(action, prefix), BUTTONS[button], 1, self.held(action, prefix))
            case "double_click":
                return batch.Click(self.at(action, prefix), MouseButton.LEFT, 2, self.held(action, prefix))
            case "drag":
                path = action.get("path")
                if not isinstance(path, list) or not 2 <= len(path) <= 1000:
                    raise invalid_action(f"{prefix}.path must be a list of 2 to 1000 points {{x, y}}",
                                         f"{prefix}.path")
                points = []
                for j, pt in enumerate(path):
                    if not isinstance(pt, Mapping):
                        raise invalid_action(f"{prefix}.path[{j}] must be an object {{x, y}}", f"{prefix}.path[{j}]")
                    points.append(self.point_at(pt, f"{prefix}.path[{j}]"))
                return batch.Drag(tuple(points), MouseButton.LEFT, self.held(action, prefix))
            case "keypress":
                return batch.Key((key_names(action.get("keys"), f"{prefix}.keys"),))
            case "move":
                # A Move step holds no keys; `keys` on a move is accepted and not held (documented).
                return move_to(self.at(action, prefix))
            case "scroll":
                at = self.at(action, prefix)
                dx, dy = (wheel_clicks(integer(action.get(name, 0), f"{prefix}.{name}", -MAX_SCROLL_PX,
                                               MAX_SCROLL_PX)) for name in ("scroll_x", "scroll_y"))
                if dx == 0 and dy == 0:
                    return move_to(at)
                return batch.Scroll(at, dx, dy, self.held(action, prefix))
            case "type":
                return batch.Type(tuple(text_keysyms(text(action.get("text"), f"{prefix}.text"), f"{prefix}.text")),
                                  TYPE_DELAY_MS)
            case "wait":
                return batch.Wait(WAIT_MS)
        return None  # screenshot: the observation after the batch is the screenshot


def call_output(call_id: str, safety_checks: list[Any], shot: Screenshot) -> dict[str, Any]:
    """The `computer_call_output` item that answers the call, acknowledging its pending safety checks."""
    data = base64.b64encode(shot.data).decode()
    return {"type": "computer_call_output", "call_id": call_id, "acknowledged_safety_checks": safety_checks,
            "output": {"type": "computer_screenshot", "image_url": f"data:{shot.media_type};base64,{data}"}}
