"""What an open model's output amounts to, built action by action by the family parsers (desktop/vendors/qwen.py,
ui_tars.py, pyautogui_lines.py): batch steps to run, each action echoed as the wire's `ModelAction`, a browser move
(Fara) and the final answer.

Pure translation, no X. Every mistake names where in the output it is (a tool call's index, a line and its text):
one the output's shape makes (an unknown action, a missing or mistyped argument) is a 422, a value that cannot be
acted on (a point outside the model's space) a 400, as docs/errors.md separates them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from desktop.actions import batch
from desktop.core.errors import FieldError, field_errors, invalid_action
from desktop.input.keys import keysym_for_name, text_keysyms
from desktop.vendors.gemini import Browser
from desktop.vendors.model_space import ModelSpace
from sandbox_desktop_wire.enums import MouseButton
from sandbox_desktop_wire.limits import MAX_WHEEL_CLICKS
from sandbox_desktop_wire.open_models import FinalAnswer, ModelAction, ModelActionKind

OUTPUT = "text"
"""The request field holding what the model printed: the field every mistake of the output names."""
TYPE_DELAY_MS = 10
MAX_WAIT_MS = 60_000
"""The longest wait a model may ask for in one output."""

Point = tuple[int, int]


def malformed(where: str, message: str) -> FieldError:
    """A 422 naming the place in the output that could not be parsed."""
    return FieldError(field_errors(OUTPUT, message if where == OUTPUT else f"{where}: {message}"), wrong_shape=True)


def number(value: Any, where: str) -> float:
    try:
        finite = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise malformed(where, f"expected a number, got {str(value)[:40]}")
    return float(value)


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise malformed(where, f"expected a string, got {value!r}")
    return value


@dataclass
class ModelPlan:
    steps: list[batch.Step] = field(default_factory=list)
    actions: list[ModelAction] = field(default_factory=list)
    browser: Browser | None = None
    """A browser move (Fara's visit_url, web_search, history_back): then the output's only action."""
    final: FinalAnswer | None = None
    thought: str | None = None


class PlanBuilder:
    """Appends each parsed action's steps and echo to a ModelPlan over `space`."""

    def __init__(self, space: ModelSpace) -> None:
        self.space = space
        self.plan = ModelPlan()
        self.held: list[int] = []
        """Keysyms of keys pressed by `key_down` and not yet released: held through the clicks after them."""

    # -- points ----------------------------------------------------------------------------------------------

    def point(self, x: Any, y: Any, where: str) -> tuple[Point, tuple[float, float]]:
        """A model point as a screen pixel, with the point as printed."""
        mx, my = number(x, where), number(y, where)
        if not self.space.contains(mx, my):
            raise invalid_action(f"{where}: ({x}, {y}) is outside the model's {self.space.width}x"
                                 f"{self.space.height} {self.space.convention} space", OUTPUT)
        return self.space.to_screen(mx, my), (mx, my)

    def pair(self, value: Any, where: str) -> tuple[Point, tuple[float, float]]:
        """`[x, y]` as the model writes a coordinate."""
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise malformed(where, f"expected [x, y], got {value!r}")
        return self.point(value[0], value[1], where)

    def echo(self, kind: ModelActionKind, source: str, at: tuple[Point, tuple[float, float]] | None = None,
             **fields: Any) -> None:
        if at is not None:
            (x, y), (mx, my) = at
            fields.update(x=x, y=y, model_x=mx, model_y=my)
        self.plan.actions.append(ModelAction(kind=kind, source=source, **fields))

    # -- actions ---------------------------------------------------------------------------------------------

    def move(self, source: str, at: tuple[Point, tuple[float, float]]) -> None:
        self.plan.steps.append(batch.Move(*at[0]))
        self.echo(ModelActionKind.MOVE, source, at)

    def click(self, source: str, at: tuple[Point, tuple[float, float]] | None, button: MouseButton = MouseButton.LEFT,
              count: int = 1) -> None:
        self.plan.steps.append(batch.Click(at[0] if at else None, button, count, tuple(self.held)))
        self.echo(ModelActionKind.CLICK, source, at, button=button, count=count)

    def drag(self, source: str, start: tuple[Point, tuple[float, float]] | None,
             end: tuple[Point, tuple[float, float]], button: MouseButton = MouseButton.LEFT) -> None:
        """From `start`, or from wherever the pointer is (the model's `dragTo`, `left_click_drag`)."""
        if start is not None:
            self.plan.steps.append(batch.Drag((start[0], end[0]), button, tuple(self.held)))
        else:
            self.plan.steps += [batch.Button(None, button, True), batch.Move(*end[0]),
                                batch.Button(end[0], button, False)]
        self.echo(ModelActionKind.DRAG, source, start, to_x=end[0][0], to_y=end[0][1], button=button)

    def button(self, source: str, at: tuple[Point, tuple[float, float]] | None, button: MouseButton,
               down: bool) -> None:
        self.plan.steps.append(batch.Button(at[0] if at else None, button, down))
        self.echo(ModelActionKind.BUTTON, source, at, button=button, down=down)

    def scroll(self, source: str, at: tuple[Point, tuple[float, float]] | None, clicks_x: int, clicks_y: int,
               where: str) -> None:
        """Wheel clicks, right and down positive."""
        if max(abs(clicks_x), abs(clicks_y)) > MAX_WHEEL_CLICKS:
            raise invalid_action(f"{where}: at most {MAX_WHEEL_CLICKS} wheel clicks at once", OUTPUT)
        if clicks_x or clicks_y:
            self.plan.steps.append(batch.Scroll(at[0] if at else None, clicks_x, clicks_y, tuple(self.held)))
        elif at is not None:
            self.plan.steps.append(batch.Move(*at[0]))
        self.echo(ModelActionKind.SCROLL, source, at, scroll_x=clicks_x, scroll_y=clicks_y)

    def type(self, source: str, text: str, where: str) -> None:
        if self.held:
            raise malformed(where, "typing while keys are held down (keyDown) is not supported; press them with "
                            "the text's keys instead")
        self.plan.steps.append(batch.Type(tuple(text_keysyms(text, OUTPUT)), TYPE_DELAY_MS))
        self.echo(ModelActionKind.TYPE, source, text=text)

    def keysym(self, name: Any, where: str) -> int:
        name = string(name, where).strip()
        keysym = keysym_for_name(name.lower() if len(name) == 1 and name.isalpha() else name) if name else None
        if keysym is None:
            raise malformed(where, f"unknown key {name!r}; use names such as ctrl, shift, alt, enter, esc, tab, "
                            "left, pagedown, f5 or a single character")
        return keysym

    def keys(self, source: str, names: list[Any], where: str) -> None:
        """Keys pressed together, in order, released in reverse (a hotkey)."""
        if not names:
            raise malformed(where, "no keys")
        chord: list[int] = list(self.held)
        for name in names:
            keysym = self.keysym(name, where)
            if keysym not in chord:
                chord.append(keysym)
        self.plan.steps.append(batch.Key((tuple(chord),)))
        self.echo(ModelActionKind.KEY, source, keys=[str(n) for n in names])

    def key_hold(self, source: str, name: Any, down: bool, where: str) -> None:
        """A key held for the actions after it in the same output (released at its end if not before)."""
        keysym = self.keysym(name, where)
        if down and keysym not in self.held:
            self.held.append(keysym)
        elif not down:
            if keysym not in self.held:
                raise malformed(where, f"{name!r} is released without being held down")
            self.held.remove(keysym)
        self.echo(ModelActionKind.KEY_DOWN if down else ModelActionKind.KEY_UP, source, keys=[str(name)])

    def wait(self, source: str, seconds: float, where: str) -> None:
        if not 0 <= seconds <= MAX_WAIT_MS / 1000:
            raise invalid_action(f"{where}: wait {seconds} s is out of range (0 to {MAX_WAIT_MS // 1000} s)", OUTPUT)
        ms = round(seconds * 1000)
        self.plan.steps.append(batch.Wait(ms))
        self.echo(ModelActionKind.WAIT, source, duration_ms=ms)

    def browse(self, source: str, browser: Browser, where: str) -> None:
        if self.plan.browser is not None:
            raise malformed(where, "one browser move per output")
        self.plan.browser = browser
        kind = ModelActionKind.BACK if browser.kind == "back" else ModelActionKind.NAVIGATE
        self.echo(kind, source, url=browser.url)

    def note(self, source: str, text: str) -> None:
        self.echo(ModelActionKind.NOTE, source, text=text)

    def final(self, source: str, status: str, content: str | None, where: str) -> None:
        if self.plan.final is not None:
            raise malformed(where, "a second final answer")
        self.plan.final = FinalAnswer(status=status, content=content)
        self.echo(ModelActionKind.FINAL, source, text=content)

    def done(self) -> ModelPlan:
        """The plan; a browser move must be alone (it runs before any step), and nothing may follow the final."""
        if self.plan.browser is not None and self.plan.steps:
            raise malformed(OUTPUT, "a browser move (visit_url, web_search, history_back) must be the output's only "
                            "action")
        if self.plan.final is not None and self.plan.actions[-1].kind is not ModelActionKind.FINAL:
            raise malformed(OUTPUT, f"actions after the final answer ({self.plan.actions[-1].source})")
        if not self.plan.actions:
            raise malformed(OUTPUT, "no action found")
        return self.plan
