"""What an agent's request would do, told to a person: the steps of an approval (docs/approvals.md).

Batch steps (desktop/actions/batch.py), which the batch and the vendor endpoints plan in screen pixels, and the
single requests (mouse, keyboard, launch, processes) become `ProposedStep`s, each with its kind and a line a
person reads. Element targets are located to show where a click would land when that can be told quickly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from desktop.accessibility.query import ElementQuery, Target
from desktop.accessibility.service import Accessibility
from desktop.actions import batch as steps
from desktop.core.errors import DomainError
from desktop.events.action_log import chord_name, keysym_text
from desktop.x11.session import Session
from sandbox_desktop_wire.approvals import MAX_SHOWN_TEXT_CHARS, ActionKind, ProposedStep

LOCATE_TIMEOUT_S = 1.0
"""How long finding an element's position for the person may take; past it the step names the element only."""
SUMMARY_STEPS = 3
SHOWN_IN_SUMMARY = 60

POINTER, TYPE, KEY = ActionKind.POINTER, ActionKind.TYPE, ActionKind.KEY


def target_text(target: Target) -> str:
    """An element target as the agent named it: `mark 12`, `element 3:1.42`, `button "Save"`."""
    if isinstance(target, int):
        return f"mark {target}"
    if isinstance(target, str):
        return f"element {target}"
    return query_text(target)


def query_text(query: ElementQuery) -> str:
    role = "/".join(sorted(query.roles)) if query.roles else "element"
    if query.name is not None:
        return f"{role} {query.name!r}"
    if query.name_contains is not None:
        return f"{role} containing {query.name_contains!r}"
    if query.name_regex is not None:
        return f"{role} matching /{query.name_regex.pattern}/"
    return role


def typed(text: str, kind: ActionKind = TYPE, type_: str = "type") -> ProposedStep:
    return ProposedStep(kind=kind, type=type_, text=text[:MAX_SHOWN_TEXT_CHARS], text_length=len(text))


def chords_text(chords: Iterable[Iterable[int]]) -> str:
    return " ".join(chord_name(list(chord)) for chord in chords)


async def pointer(type_: str, at: steps.Where | None, session: Session, accessibility: Accessibility,
                  **fields: Any) -> ProposedStep:
    """A pointer step at a point, at an element (located if that is quick), or where the pointer is (no x, y)."""
    if isinstance(at, steps.ElementAt):
        x = y = None
        with contextlib.suppress(DomainError, TimeoutError):
            async with asyncio.timeout(LOCATE_TIMEOUT_S):
                (x, y), _found = await accessibility.locate(session, at.target)
        return ProposedStep(kind=POINTER, type=type_, x=x, y=y, element=target_text(at.target), **fields)
    x, y = at if at is not None else (None, None)
    return ProposedStep(kind=POINTER, type=type_, x=x, y=y, **fields)


async def step_of(step: steps.Step, session: Session, accessibility: Accessibility) -> ProposedStep:
    """One planned batch step as a person reads it."""
    match step:
        case steps.Move(x, y):
            return ProposedStep(kind=POINTER, type="move", x=x, y=y)
        case steps.Hover(element):
            return await pointer("move", element, session, accessibility)
        case steps.Click(at, button, count, modifiers):
            return await pointer("click", at, session, accessibility, button=button, count=count,
                                 keys=chord_name(list(modifiers)) if modifiers else None)
        case steps.Button(at, button, down):
            return await pointer("down" if down else "up", at, session, accessibility, button=button)
        case steps.Drag(path, button, modifiers, _duration):
            return ProposedStep(kind=POINTER, type="drag", x=path[0][0], y=path[0][1], end_x=path[-1][0],
                                end_y=path[-1][1], button=button,
                                keys=chord_name(list(modifiers)) if modifiers else None)
        case steps.Scroll(at, dx, dy, modifiers):
            return await pointer("scroll", at, session, accessibility, delta_x=dx, delta_y=dy,
                                 keys=chord_name(list(modifiers)) if modifiers else None)
        case steps.Type(keysyms, _delay):
            return typed(keysym_text(list(keysyms)))
        case steps.Key(chords):
            return ProposedStep(kind=KEY, type="key", keys=chords_text(chords))
        case steps.HoldKey(keysyms, _duration):
            return ProposedStep(kind=KEY, type="hold_key", keys=chord_name(list(keysyms)))
        case steps.Wait():
            return ProposedStep(type="wait")
        case steps.CursorPosition():
            return ProposedStep(type="cursor_position")
        case steps.Capture(options):
            return ProposedStep(type="zoom" if options.region is not None else "screenshot")
    raise AssertionError(f"unhandled step {step!r}")


async def steps_of(plan: Iterable[steps.Step], session: Session, accessibility: Accessibility) -> list[ProposedStep]:
    return [await step_of(step, session, accessibility) for step in plan]


def _quoted(text: str | None) -> str:
    text = text or ""
    return repr(text if len(text) <= SHOWN_IN_SUMMARY else text[:SHOWN_IN_SUMMARY] + "…")


def step_summary(step: ProposedStep) -> str:
    """`left click at 120,300`, `type 'hello'`, `press ctrl+s`, `launch xterm -e top`."""
    where = ""
    if step.element is not None:
        where = f" on {step.element}"
    elif step.x is not None and step.y is not None:
        where = f" at {step.x},{step.y}"
    held = f" with {step.keys}" if step.keys and step.kind is POINTER else ""
    match step.type:
        case "click":
            times = {1: "", 2: "double ", 3: "triple "}.get(step.count or 1, "")
            return f"{step.button or 'left'} {times}click{where}{held}"
        case "drag":
            return f"drag from {step.x},{step.y} to {step.end_x},{step.end_y}{held}"
        case "scroll":
            return f"scroll {step.delta_x or 0},{step.delta_y or 0}{where}{held}"
        case "move" | "down" | "up" | "invoke" | "select" | "focus":
            return f"{step.type}{where}" if where else f"{step.type} where the pointer is"
        case "type" | "setValue":
            return f"{step.type} {_quoted(step.text)}{where}"
        case "key" | "hold_key" | "key_down" | "key_up":
            return f"{'press' if step.type == 'key' else step.type.replace('_', ' ')} {step.keys}"
        case "drop":
            return f"drop {', '.join(step.args or ())}{where}"
        case "file-dialog":
            return f"choose {step.command} in the file dialog"
    words = [step.type, *(w for w in (step.command, *(step.args or ())) if w)]
    return " ".join(words)


def summary(proposed: list[ProposedStep], held: frozenset[ActionKind]) -> str:
    """One line: the step, or a batch's held steps (the first few)."""
    if len(proposed) == 1:
        return step_summary(proposed[0])
    shown = [step_summary(s) for s in proposed if s.kind in held]
    more = f" and {len(shown) - SUMMARY_STEPS} more" if len(shown) > SUMMARY_STEPS else ""
    return f"{len(proposed)} actions: " + "; ".join(shown[:SUMMARY_STEPS]) + more
