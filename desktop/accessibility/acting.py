"""Acting on one element: a real click at its visible centre, or a call on its AT-SPI interfaces.

A click goes through `Mouse.click`, so it takes the input lock, lands in the action log and moves the
pointer a viewer sees, exactly as a click by coordinates does. Text goes into native fields through
`EditableText` (exact for any character) and into web pages as real key events, since a page's
`input` listeners hear nothing of text set from outside (docs/accessibility.md "Acting on an element").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from dbus_fast import Variant
from Xlib import XK

from desktop.accessibility.atspi import (
    ACCESSIBLE,
    ACTION,
    COMPONENT,
    EDITABLE_TEXT,
    PROPERTIES,
    SCREEN_COORDS,
    SELECTION,
    TEXT,
    VALUE,
    AtspiBus,
    AtspiError,
)
from desktop.accessibility.errors import ElementActionUnsupported, ElementNotFound
from desktop.accessibility.tree import Element, read_text, usable_bounds
from desktop.accessibility.view import WEB_DOCUMENT_ROLES, clickable_point, unsupported
from desktop.input.keyboard import Keyboard
from desktop.input.mouse import Mouse
from desktop.x11.session import Session
from sandbox_desktop_wire.accessibility import ActedThrough, ElementAction

SELECT_ALL = [XK.XK_Control_L, XK.XK_a]
TYPE_ATTEMPTS = 2
READ_BACK_S = 1.0
READ_BACK_POLL_S = 0.02
"""Reading the text back after typing: a field has no event this connection registers for, and this
runs once per setValue, on the event loop (no X connection waits)."""


@dataclass(frozen=True)
class ActOutcome:
    element: Element
    action: ElementAction
    through: ActedThrough
    point: tuple[int, int] | None = None
    """Where a click landed, in screen pixels."""
    states_before: frozenset[str] = frozenset()
    """The element's states and value before the action (`element` has them after it), for its effect."""
    value_before: str | None = None


@dataclass(frozen=True)
class Actor:
    """What acting needs: the bus for interface calls, the desktop's input for clicks and keys."""

    bus: AtspiBus
    session: Session
    mouse: Mouse
    keyboard: Keyboard
    scroll_into_view: bool = True
    """A click (and typing into a page's field) first scrolls an element that is out of view into it."""

    async def point(self, element: Element, ancestors: list[Element]) -> tuple[int, int]:
        return await clickable_point(self.bus, self.session, self.mouse, element, ancestors, self.scroll_into_view)


async def perform(actor: Actor, element: Element, ancestors: list[Element], action: ElementAction,
                  value: str | None) -> ActOutcome:
    match action:
        case ElementAction.CLICK:
            point = await actor.point(element, ancestors)
            await actor.mouse.click(actor.session, *point)
            return ActOutcome(element, action, ActedThrough.POINTER, point)
        case ElementAction.FOCUS:
            await call_required(actor.bus, element, COMPONENT, "GrabFocus", "focus")
            return ActOutcome(element, action, ActedThrough.ACCESSIBILITY)
        case ElementAction.INVOKE:
            await call_required(actor.bus, element, ACTION, "DoAction", "invoke", "i", (0,))
            return ActOutcome(element, action, ActedThrough.ACCESSIBILITY)
        case ElementAction.SET_VALUE:
            return await set_value(actor, element, ancestors, value or "")
        case ElementAction.SELECT:
            await select(actor.bus, element, ancestors[0] if ancestors else None)
            return ActOutcome(element, action, ActedThrough.ACCESSIBILITY)


async def call_required(bus: AtspiBus, element: Element, interface: str, member: str, action: str,
                        signature: str = "", body: tuple[object, ...] = ()) -> None:
    """Call an interface method that answers whether it did it; its absence or a refusal is a 409."""
    if interface not in element.interfaces:
        raise unsupported(element, f"cannot {action}: it has no {interface.rsplit('.', 1)[-1]} interface")
    try:
        [done] = await bus.call(element.bus, element.path, interface, member, signature, body)
    except AtspiError as exc:
        if exc.gone:
            raise ElementNotFound(f"element {element.id} no longer exists", element=element.id) from exc
        raise unsupported(element, f"refused to {action}: {exc}") from exc
    if done is False:
        raise unsupported(element, f"refused to {action}")


async def set_value(actor: Actor, element: Element, ancestors: list[Element], value: str) -> ActOutcome:
    if VALUE in element.interfaces and EDITABLE_TEXT not in element.interfaces:
        try:
            number = float(value)
        except ValueError:
            raise ElementActionUnsupported(f"{element.role} {element.name!r} takes a number, not {value!r}",
                                           element=element.id, field="value") from None
        try:
            await actor.bus.call(element.bus, element.path, PROPERTIES, "Set", "ssv",
                                 (VALUE, "CurrentValue", Variant("d", number)))
        except AtspiError as exc:
            raise unsupported(element, f"refused the value: {exc}") from exc
        return ActOutcome(element, ElementAction.SET_VALUE, ActedThrough.ACCESSIBILITY)
    if "editable" not in element.states:
        raise unsupported(element, "holds no editable text")
    in_page = any(a.role in WEB_DOCUMENT_ROLES for a in ancestors)
    if not in_page and EDITABLE_TEXT in element.interfaces and await _set_text(actor.bus, element, value):
        return ActOutcome(element, ElementAction.SET_VALUE, ActedThrough.ACCESSIBILITY)
    await _type_over(actor, element, ancestors, value)
    return ActOutcome(element, ElementAction.SET_VALUE, ActedThrough.KEYBOARD)


async def _set_text(bus: AtspiBus, element: Element, value: str) -> bool:
    """Set the text and read it back: a toolkit may accept the call and keep its old text."""
    try:
        [done] = await bus.call(element.bus, element.path, EDITABLE_TEXT, "SetTextContents", "s", (value,))
        text = await read_text(bus, element)
    except AtspiError:
        return False
    return bool(done) and text == value


async def _type_over(actor: Actor, element: Element, ancestors: list[Element], value: str) -> None:
    """Click into the field (which also makes its window the one keys go to; the toolkit's own focus
    call would not), select what it holds, and type over it; then read it back, and once more from fresh
    bounds if the text is not there (a page that moved between reading the bounds and the click: an
    infobar sliding in, a late stylesheet). A field that keeps other text (an input mask, a length
    limit) is left with it: the answer's `value` shows what it holds."""
    for attempt in range(TYPE_ATTEMPTS):
        if attempt:
            await _refresh_bounds(actor.bus, element)
        await actor.mouse.click(actor.session, *await actor.point(element, ancestors))
        await actor.keyboard.press_chords(actor.session, [SELECT_ALL])
        if value:
            await actor.keyboard.type_text(actor.session, value)
        else:
            await actor.keyboard.press_chords(actor.session, [[XK.XK_BackSpace]])
        if TEXT not in element.interfaces or element.role == "password-text" or await _reads(actor.bus, element, value):
            return


async def _refresh_bounds(bus: AtspiBus, element: Element) -> None:
    with contextlib.suppress(AtspiError):
        [(x, y, width, height)] = await bus.call(element.bus, element.path, COMPONENT, "GetExtents", "u",
                                                 (SCREEN_COORDS,))
        element.bounds = usable_bounds(x, y, width, height)


async def _reads(bus: AtspiBus, element: Element, value: str) -> bool:
    """Whether the field's text becomes `value` within a moment (the app takes the keys in its own time)."""
    deadline = time.monotonic() + READ_BACK_S
    while True:
        try:
            text = await read_text(bus, element)
        except AtspiError:
            return True  # it cannot be read back: trust the keys
        element.value = str(text)
        if text == value:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(READ_BACK_POLL_S)


async def select(bus: AtspiBus, element: Element, parent: Element | None) -> None:
    """Select the element in its container (a list, a tab strip, a combo box's menu)."""
    if parent is None or SELECTION not in parent.interfaces:
        raise unsupported(element, "is not in a selectable container")
    try:
        [index] = await bus.call(element.bus, element.path, ACCESSIBLE, "GetIndexInParent")
    except AtspiError as exc:
        raise ElementNotFound(f"element {element.id} no longer exists", element=element.id) from exc
    await call_required(bus, parent, SELECTION, "SelectChild", "select", "i", (index,))
