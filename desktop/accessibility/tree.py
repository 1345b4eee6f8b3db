"""Reading the accessibility tree: every application's objects in one call each, bounds only where seen.

Speed comes from three choices (docs/accessibility.md "Speed"):
- an application's whole subtree arrives in one `Cache.GetItems` call (role, name, states, parent,
  interfaces per object), instead of four calls per object; toolkits without the cache interface
  are walked object by object with many calls in flight (`walk_application`, also the baseline the
  bench compares with);
- bounds are asked only of objects that are SHOWING and VISIBLE (hidden ones carry junk bounds
  anyway), text and values only of objects that hold them, all pipelined on one connection;
- applications are read concurrently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from desktop.accessibility.atspi import (
    ACCESSIBLE,
    ACTION,
    COMPONENT,
    OBJECT_PREFIX,
    PROPERTIES,
    SCREEN_COORDS,
    TEXT,
    VALUE,
    AtspiBus,
    AtspiError,
    Request,
    decode_states,
)
from desktop.core.geometry import Bounds

logger = logging.getLogger("sandbox_desktop.accessibility")

MAX_TEXT_CHARS = 2000
"""Text of an editable object beyond this is cut (a document's text is not what an agent reads here)."""
UNKNOWN_INDEX = 1 << 30
"""Objects whose toolkit gave no index are numbered from here up, in the order they came."""
JUNK_COORDINATE = 1 << 20
"""Bounds further out than this are a toolkit's placeholder for "not laid out" (GTK: -2**31)."""

TOP_LEVEL_ROLES = frozenset({"frame", "window", "dialog", "alert", "file-chooser", "color-chooser",
                             "font-chooser"})
INTERACTIVE_ROLES = frozenset({
    "push-button", "toggle-button", "push-button-menu", "check-box", "radio-button", "combo-box", "entry",
    "password-text", "spin-button", "slider", "link", "menu-item", "check-menu-item", "radio-menu-item",
    "page-tab", "tree-item", "list-item", "table-cell", "scroll-bar", "dial", "autocomplete", "menu",
})


@dataclass
class Element:
    """One accessible object, as read in one snapshot."""

    bus: str
    path: str
    role: str
    name: str
    description: str
    states: frozenset[str]
    interfaces: frozenset[str]
    parent: str | None
    """The parent's id, None for an application's top-level objects."""
    index: int
    child_count: int = 0
    """Children the object says it has (the cache may hold fewer: `reading.complete` reads the rest)."""
    app: str = ""
    pid: int | None = None
    children: list[str] = field(default_factory=list)
    bounds: Bounds | None = None
    value: str | None = None
    window_id: int | None = None
    id: str = field(init=False)

    def __post_init__(self) -> None:
        self.id = element_id(self.bus, self.path)

    @property
    def showing(self) -> bool:
        return "showing" in self.states and "visible" in self.states

    @property
    def actions(self) -> tuple[str, ...]:
        """What `act` can do with it (docs/accessibility.md "Acting on an element")."""
        found = []
        if self.bounds is not None and self.showing:
            found.append("click")
        if "focusable" in self.states:
            found.append("focus")
        if ACTION in self.interfaces:
            found.append("invoke")
        if "editable" in self.states or VALUE in self.interfaces:
            found.append("setValue")
        if "selectable" in self.states:
            found.append("select")
        return tuple(found)

    @property
    def interactive(self) -> bool:
        """Something a person would act on: a control, a link, a field, showing on the screen."""
        if not self.showing or self.bounds is None:
            return False
        return (self.role in INTERACTIVE_ROLES or "editable" in self.states
                or ("focusable" in self.states and ACTION in self.interfaces))


def element_id(bus: str, path: str) -> str:
    """`1.42:318`: the application's bus name and the object's path, both stable for the object's life."""
    return f"{bus.removeprefix(':')}:{path.removeprefix(OBJECT_PREFIX)}"


def parse_element_id(text: str) -> tuple[str, str] | None:
    """(bus name, object path) of an id made by `element_id`, or None if it is not one."""
    bus, sep, tail = text.partition(":")
    if not sep or not bus or not tail or not all(part.isdigit() for part in bus.split(".")) \
            or not all(c.isalnum() or c == "_" for c in tail.replace("/", "_")):
        return None
    return f":{bus}", tail if tail.startswith("/") else OBJECT_PREFIX + tail


@dataclass(frozen=True)
class Application:
    bus: str
    name: str
    pid: int | None
    toolkit: str = ""
    """`ToolkitName`: `GTK`, `Chromium`, `Qt`... (how its objects are read depends on it: reading.py)."""


@dataclass
class Snapshot:
    """Every object of every application, by id; `roots` are the applications' top-level objects."""

    elements: dict[str, Element]
    roots: list[str]
    applications: list[Application]

    def subtree(self, element: Element, depth: int | None) -> Iterable[Element]:
        """The element and its descendants down to `depth` levels below it (None: all), depth first."""
        stack = [(element, 0)]
        while stack:
            node, level = stack.pop()
            yield node
            if depth is None or level < depth:
                stack.extend((self.elements[c], level + 1) for c in reversed(node.children) if c in self.elements)


def prune_hidden(snapshot: Snapshot, roots: list[Element]) -> list[Element]:
    """Keep only what shows: hidden objects (and everything under them) leave their parents' children."""
    for element in snapshot.elements.values():
        element.children = [c for c in element.children if c in snapshot.elements and snapshot.elements[c].showing]
    return [r for r in roots if r.showing or r.window_id is not None]


def order_by_position(snapshot: Snapshot) -> None:
    """Children the toolkit gave no index (GTK's cache) in reading order: top to bottom, then left to
    right, by their bounds (`fill_details` first); those without bounds after, as they came."""
    def key(child: str) -> tuple[int, int, int, int]:
        element = snapshot.elements[child]
        if element.index < UNKNOWN_INDEX:
            return (0, element.index, 0, 0)
        if element.bounds is None:
            return (2, element.index, 0, 0)
        return (1, element.bounds.y + element.bounds.height // 2, element.bounds.x, element.index)

    for element in snapshot.elements.values():
        if len(element.children) > 1 and any(snapshot.elements[c].index >= UNKNOWN_INDEX
                                             for c in element.children if c in snapshot.elements):
            element.children.sort(key=lambda c: key(c) if c in snapshot.elements else (3, 0, 0, 0))


async def refresh(bus: AtspiBus, element: Element) -> None:
    """The element's states and value read again (after an action changed them)."""
    [states] = await bus.call_all([(element.bus, element.path, ACCESSIBLE, "GetState", "", ())])
    if isinstance(states, list):
        element.states = decode_states(states[0])
    element.value = None
    await fill_details(bus, [element])


def usable_bounds(x: int, y: int, width: int, height: int) -> Bounds | None:
    if width <= 0 or height <= 0 or abs(x) > JUNK_COORDINATE or abs(y) > JUNK_COORDINATE:
        return None
    return Bounds(x, y, width, height)


WHOLE_TEXT_TOOLKITS = frozenset({"Qt"})
"""Toolkits that answer `GetText(0, n)` with nothing when the text is shorter than n (Qt 5.15): asked for
all of it (end -1) and cut here."""


def text_request(bus: AtspiBus, element: Element) -> Request:
    """`Text.GetText` of the element's first MAX_TEXT_CHARS characters, as its toolkit takes it (cut the
    answer to MAX_TEXT_CHARS)."""
    app = bus.applications.get(element.bus)
    end = -1 if app is not None and app.toolkit in WHOLE_TEXT_TOOLKITS else MAX_TEXT_CHARS
    return element.bus, element.path, TEXT, "GetText", "ii", (0, end)


async def read_text(bus: AtspiBus, element: Element) -> str:
    """The element's text (its first MAX_TEXT_CHARS characters); raises AtspiError."""
    [text] = await bus.call(*text_request(bus, element))
    return str(text)[:MAX_TEXT_CHARS]


async def fill_details(bus: AtspiBus, elements: Iterable[Element], *, values: bool = True) -> None:
    """Bounds of the showing elements, and the text or value of those that hold one, in one pipeline."""
    requests: list[Request] = []
    targets: list[tuple[Element, str]] = []
    for element in elements:
        if COMPONENT in element.interfaces and element.showing and element.bounds is None:
            requests.append((element.bus, element.path, COMPONENT, "GetExtents", "u", (SCREEN_COORDS,)))
            targets.append((element, "bounds"))
        if values and element.value is None and holds_value(element):
            if TEXT in element.interfaces:
                requests.append(text_request(bus, element))
                targets.append((element, "text"))
            else:
                requests.append((element.bus, element.path, PROPERTIES, "Get", "ss", (VALUE, "CurrentValue")))
                targets.append((element, "value"))
    for (element, kind), result in zip(targets, await bus.call_all(requests), strict=True):
        if isinstance(result, AtspiError):
            continue
        if kind == "bounds":
            element.bounds = usable_bounds(*result[0])
        elif kind == "text":
            element.value = "" if element.role == "password-text" else str(result[0])[:MAX_TEXT_CHARS]
        else:
            element.value = _number(result[0].value)


def holds_value(element: Element) -> bool:
    """Editable text, or a range (slider, spin button, progress): what `value` reports."""
    return (TEXT in element.interfaces and ("editable" in element.states or element.role in ("entry", "spin-button"))) \
        or VALUE in element.interfaces


def _number(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"

