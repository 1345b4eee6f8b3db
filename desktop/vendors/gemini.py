"""Gemini's computer-use `functionCall` (the predefined browser functions) as batch steps and browser moves.

Pure translation, no X. Points and scroll magnitudes are on Gemini's normalized 0-999 grid whatever the screen:
a grid value v is the screen pixel v * size // 1000 (the screenshot is answered at the screen's own size, so the
same mapping serves the model both ways). The browser functions (`navigate`, `search`, `go_back`, `go_forward`,
`open_web_browser`) need the desktop's browser window first, so they are planned as a `Browser` move the endpoint
carries out before the steps (api/routes/vendors.py). Missing or mistyped arguments and unknown functions are
422s naming `functionCall.args.<arg>` / `functionCall.name`; values out of range are 400s, as docs/errors.md
separates a body of the wrong shape from one whose values cannot be acted on.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from desktop.actions import batch
from desktop.core.errors import FieldError, field_errors, invalid_action
from desktop.input.keys import keysym_for_name, text_keysyms
from desktop.screen.screenshots import Screenshot
from desktop.vendors.openai import MAX_SCROLL_PX, wheel_clicks

GRID = 1000
"""The model's grid: 0-999 on both axes."""
FUNCTIONS = ("click_at", "hover_at", "type_text_at", "scroll_document", "scroll_at", "key_combination",
             "drag_and_drop", "wait_5_seconds", "navigate", "go_back", "go_forward", "search", "open_web_browser")
DIRECTIONS = ("up", "down", "left", "right")
DEFAULT_MAGNITUDE = 800
"""`scroll_at` without a magnitude: Google's reference agent scrolls 800 grid units."""
TYPE_DELAY_MS = 10
WAIT_MS = 5000
ARGS = "functionCall.args"

CTRL, ALT, RETURN, DELETE = (keysym_for_name(n) for n in ("ctrl", "alt", "Return", "Delete"))
LEFT, RIGHT, PAGE_UP, PAGE_DOWN, KEY_A, KEY_L = (keysym_for_name(n) for n in ("Left", "Right", "Prior", "Next", "a",
                                                                            "l"))


def chord(*keysyms: int | None) -> batch.Key:
    return batch.Key((tuple(k for k in keysyms if k is not None),))


@dataclass(frozen=True)
class Browser:
    """What a browser function needs before its steps: the browser window focused (launched at `url` if there is
    none), and for `navigate` the address typed into it."""

    kind: Literal["open", "navigate", "back", "forward"]
    url: str | None = None


@dataclass
class Plan:
    name: str
    steps: list[batch.Step] = field(default_factory=list)
    browser: Browser | None = None
    confirm: str | None = None
    """The `safety_decision` explanation when it asks for a person's confirmation (`require_confirmation`)."""


def shape_error(where: str, message: str) -> FieldError:
    """A 422: the call is not one of the functions as the model declares them."""
    return FieldError(field_errors(where, message), wrong_shape=True)


class Translator:
    """A `functionCall` as a Plan over a `width` x `height` screen."""

    def __init__(self, width: int, height: int, search_url: str) -> None:
        self.width, self.height, self.search_url = width, height, search_url

    def plan(self, name: Any, args: Mapping[str, Any]) -> Plan:
        if name not in FUNCTIONS:
            raise shape_error("functionCall.name", f"unknown function {name!r}; expected one of {', '.join(FUNCTIONS)}")
        plan = Plan(name, confirm=self.confirmation(args.get("safety_decision")))
        match name:
            case "click_at":
                plan.steps = [batch.Click(self.point(args))]
            case "hover_at":
                plan.steps = [batch.Move(*self.point(args))]
            case "type_text_at":
                text = self.string(args, "text")
                steps: list[batch.Step] = [batch.Click(self.point(args))]
                # Google's reference agent: select all and delete unless told not to; Enter only when asked.
                if self.flag(args, "clear_before_typing", True):
                    steps += [chord(CTRL, KEY_A), chord(DELETE)]
                steps.append(batch.Type(tuple(text_keysyms(text, f"{ARGS}.text")), TYPE_DELAY_MS))
                if self.flag(args, "press_enter", False):
                    steps.append(chord(RETURN))
                plan.steps = steps
            case "scroll_document":
                plan.steps = [self.scroll_document(self.direction(args))]
            case "scroll_at":
                plan.steps = [self.scroll_at(args)]
            case "key_combination":
                plan.steps = [self.keys(args)]
            case "drag_and_drop":
                start = self.point(args)
                end = self.point(args, "destination_x", "destination_y")
                plan.steps = [batch.Drag((start, end))]
            case "wait_5_seconds":
                plan.steps = [batch.Wait(WAIT_MS)]
            case "navigate":
                plan.browser = Browser("navigate", self.string(args, "url"))
            case "search":
                plan.browser = Browser("navigate", self.search_url)
            case "go_back":
                plan.browser = Browser("back")
            case "go_forward":
                plan.browser = Browser("forward")
            case "open_web_browser":
                plan.browser = Browser("open")
        return plan

    @staticmethod
    def confirmation(decision: Any) -> str | None:
        if decision is None:
            return None
        if not isinstance(decision, Mapping):
            raise shape_error(f"{ARGS}.safety_decision", "must be an object {decision, explanation}")
        if decision.get("decision") != "require_confirmation":
            return None
        explanation = decision.get("explanation")
        return explanation if isinstance(explanation, str) and explanation else "the model asks for confirmation"

    def grid(self, args: Mapping[str, Any], name: str, size: int, default: int | None = None) -> int:
        """A grid value as a screen pixel (or length) of an axis `size` pixels long."""
        value = args.get(name, default)
        where = f"{ARGS}.{name}"
        if value is None:
            raise shape_error(where, "field required")
        # JSON numbers from protobuf Structs may arrive as 500.0; only whole numbers are grid points.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise shape_error(where, "must be an integer on the 0-999 grid")
        if not 0 <= value < GRID:
            raise invalid_action(f"{where}={value} is out of range (0 <= {name} <= {GRID - 1})", where)
        return value * size // GRID

    def point(self, args: Mapping[str, Any], x: str = "x", y: str = "y") -> tuple[int, int]:
        return self.grid(args, x, self.width), self.grid(args, y, self.height)

    @staticmethod
    def string(args: Mapping[str, Any], name: str) -> str:
        value = args.get(name)
        if not isinstance(value, str):
            raise shape_error(f"{ARGS}.{name}", "field required (a string)" if value is None else "must be a string")
        if not value:
            raise invalid_action(f"{ARGS}.{name} must not be empty", f"{ARGS}.{name}")
        return value

    @staticmethod
    def flag(args: Mapping[str, Any], name: str, default: bool) -> bool:
        value = args.get(name, default)
        if not isinstance(value, bool):
            raise shape_error(f"{ARGS}.{name}", "must be a boolean")
        return value

    @staticmethod
    def direction(args: Mapping[str, Any]) -> str:
        value = args.get("direction")
        if value not in DIRECTIONS:
            raise shape_error(f"{ARGS}.direction", f"must be one of {', '.join(DIRECTIONS)}, got {value!r}")
        return str(value)

    def scroll_document(self, direction: str) -> batch.Step:
        """Up and down are Page Up / Page Down to the focused window, as Google's reference agent does; sideways,
        half a screen of wheel clicks at its centre (there is no key that scrolls a page sideways)."""
        if direction in ("up", "down"):
            return chord(PAGE_UP if direction == "up" else PAGE_DOWN)
        clicks = wheel_clicks(self.width // 2)
        return batch.Scroll((self.width // 2, self.height // 2), clicks if direction == "right" else -clicks, 0)

    def scroll_at(self, args: Mapping[str, Any]) -> batch.Step:
        at = self.point(args)
        direction = self.direction(args)
        vertical = direction in ("up", "down")
        pixels = self.grid(args, "magnitude", self.height if vertical else self.width, DEFAULT_MAGNITUDE)
        clicks = wheel_clicks(min(pixels, MAX_SCROLL_PX))
        if clicks == 0:
            return batch.Move(*at)
        signed = -clicks if direction in ("up", "left") else clicks
        return batch.Scroll(at, 0 if vertical else signed, signed if vertical else 0)

    @staticmethod
    def keys(args: Mapping[str, Any]) -> batch.Step:
        """`keys` is one string, `control+c`, as the model writes it (Google's reference agent splits it on +)."""
        where = f"{ARGS}.keys"
        value = Translator.string(args, "keys")
        keysyms: list[int] = []
        for name in value.split("+"):
            name = name.strip()
            keysym = keysym_for_name(name.lower() if len(name) == 1 and name.isalpha() else name) if name else None
            if keysym is None:
                raise invalid_action(f"unknown key {name!r} in {value!r}; use names such as control, shift, alt, "
                                     "enter, escape, pagedown, f5 or a single character, joined by +", where)
            if keysym not in keysyms:
                keysyms.append(keysym)
        return batch.Key((tuple(keysyms),))


def browser_keys(browser: Browser, address_bar: batch.Wait) -> list[batch.Step]:
    """The keys a browser move types into the focused Chromium: the address bar (Ctrl+L; `address_bar` waits for it
    to take the focus), then the URL; Delete drops any completion Chromium appended inline, so Enter opens exactly
    the URL. Back and forward are Alt+arrows."""
    match browser.kind:
        case "navigate":
            assert browser.url is not None
            return [chord(CTRL, KEY_L), address_bar,
                    batch.Type(tuple(text_keysyms(browser.url, f"{ARGS}.url")), TYPE_DELAY_MS),
                    chord(DELETE), chord(RETURN)]
        case "back":
            return [chord(ALT, LEFT)]
        case "forward":
            return [chord(ALT, RIGHT)]
    return []


def parts(name: str, url: str | None, acknowledged: bool, shot: Screenshot,
          effect: str | None = None) -> list[dict[str, Any]]:
    """The `Part`s to send back: the `functionResponse` (the page's URL when a browser is focused; the safety
    acknowledgement Gemini expects after a confirmation; what the action changed, when asked: its response is
    free-form JSON the model reads) and the screenshot as `inlineData`."""
    response: dict[str, Any] = {} if url is None else {"url": url}
    if acknowledged:
        response["safety_acknowledgement"] = "true"
    if effect is not None:
        response["effect"] = effect
    return [{"functionResponse": {"name": name, "response": response}},
            {"inlineData": {"mimeType": shot.media_type, "data": base64.b64encode(shot.data).decode()}}]
