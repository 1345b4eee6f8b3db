"""Accessibility events into the desktop's event bus: focus always, tree changes while someone waits.

Apps send an AT-SPI event only for kinds some client registered (`Registry.RegisterEvent`), and the bus
delivers it only to a connection whose match rules take it (`AddMatch`): both are needed. Focus changes
are few and always wanted (`accessibility.focus_changed`). Tree changes (children added or removed, a
state or a name changing, windows coming and going) can be hundreds a second in a busy app, so they are
registered only while an element wait is pending (`watching`), and published as `accessibility.changed`
for the waits to check again (docs/accessibility.md "Events"). Bounds changes are never registered: GTK's
animations alone send ~190 a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from desktop.accessibility.atspi import ACCESSIBLE, EVENT_PREFIX, PROPERTIES, REGISTRY, REGISTRY_PATH, AtspiBus
from desktop.accessibility.tree import element_id
from desktop.events.bus import EventBus
from desktop.events.event_types import AccessibilityChanged, AccessibilityFocusChanged

logger = logging.getLogger("sandbox_desktop.accessibility")

def _rule(member: str, detail: str | None = None, interface: str = "Object") -> str:
    rule = f"type='signal',interface='{EVENT_PREFIX}{interface}'"
    rule += f",member='{member}'" if member else ""
    return rule + (f",arg0='{detail}'" if detail else "")


FOCUS = "object:state-changed:focused"
PRESENCE = frozenset({"object:children-changed", "object:property-change:accessible-name", "window:",
                      "object:state-changed:showing", "object:state-changed:visible", "object:state-changed:defunct"})
"""What can make an element appear, go or be renamed: every element wait needs these."""
RULES = {
    "object:children-changed": _rule("ChildrenChanged"),
    "object:property-change:accessible-name": _rule("PropertyChange", "accessible-name"),
    "window:": _rule("", interface="Window"),
}
"""Match rules by event kind; a state change's rule is the kind's own (`_rule("StateChanged", state)`)."""
REGISTRY_IFACE = "org.a11y.atspi.Registry"


def state_kind(state: str) -> str:
    return f"object:state-changed:{state}"


def rule_of(kind: str) -> str:
    if kind.startswith("object:state-changed:"):
        return _rule("StateChanged", kind.rsplit(":", 1)[1])
    return RULES[kind]


class Signals:
    """One desktop's accessibility signals, on whatever connection is current. Each event kind is
    registered while some wait needs it (counted), so an app's busy state that no wait asks about (GTK's
    widget factory toggles a check state ~300 times a second) is never even sent."""

    def __init__(self, events: EventBus) -> None:
        self._events = events
        self._needed: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def _watching(self) -> bool:
        return bool(self._needed)

    async def attach(self, bus: AtspiBus) -> None:
        """A new connection: take its signals, and register what is wanted now."""
        bus.on_message(lambda message: self._dispatch(bus, message))
        await self._register(bus, [FOCUS, *(k for k in self._needed if k != FOCUS)])

    @contextlib.asynccontextmanager
    async def watching(self, connect: Callable[[], Awaitable[AtspiBus]], states: frozenset[str] = frozenset()
                       ) -> AsyncIterator[None]:
        """Tree changes that can make an element appear or go, and changes of `states`, are published while
        inside; the first waiter needing a kind registers it, the last one out unregisters it."""
        bus = await connect()
        kinds = PRESENCE | {state_kind(s) for s in states}
        fresh = [k for k in kinds if not self._needed[k] and k != FOCUS]
        self._needed.update(kinds)
        try:
            await self._register(bus, fresh)
            yield
        finally:
            self._needed.subtract(kinds)
            gone = [k for k in kinds if self._needed[k] <= 0 and k != FOCUS]
            for kind in gone:
                del self._needed[kind]
            if gone and bus.connected:
                with contextlib.suppress(Exception):  # the connection went: nothing is registered any more
                    await self._unregister(bus, gone)

    @staticmethod
    async def _register(bus: AtspiBus, kinds: Iterable[str]) -> None:
        kinds = list(kinds)
        for kind in kinds:
            await bus.add_match(rule_of(kind))
        await bus.call_all([(REGISTRY, REGISTRY_PATH, REGISTRY_IFACE, "RegisterEvent", "s", (kind,))
                            for kind in kinds])

    @staticmethod
    async def _unregister(bus: AtspiBus, kinds: Iterable[str]) -> None:
        kinds = list(kinds)
        await bus.call_all([(REGISTRY, REGISTRY_PATH, REGISTRY_IFACE, "DeregisterEvent", "s", (kind,))
                            for kind in kinds])
        for kind in kinds:
            await bus.remove_match(rule_of(kind))

    def _dispatch(self, bus: AtspiBus, message: Any) -> None:
        interface = str(message.interface or "")
        if not interface.startswith(EVENT_PREFIX):
            return
        seen = time.monotonic()
        sender, path, member = str(message.sender or ""), str(message.path or ""), str(message.member or "")
        body = message.body or []
        detail = str(body[0]) if body else ""
        if member == "StateChanged" and detail == "focused":
            if len(body) > 1 and body[1] == 1:  # focus lost: the object gaining it sends its own event
                task = asyncio.ensure_future(self._focused(bus, sender, path, seen))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if not self._watching:
                return
        if self._watching:
            kind = interface.removeprefix(EVENT_PREFIX).lower()
            # What came with children-changed:add: a wait looks at it alone (desktop/accessibility/examine.py).
            child = _reference(body) if member == "ChildrenChanged" and detail.startswith("add") else None
            change = f"{kind}:{_kebab(member)}" + (f":{detail}" if detail else "")
            self._events.publish(AccessibilityChanged(element_id(sender, path), change, child), t=seen)

    async def _focused(self, bus: AtspiBus, sender: str, path: str, seen: float) -> None:
        """Publish a focus change with the element's role and name (asked now, stamped when it happened)."""
        role, name = await bus.call_all([(sender, path, ACCESSIBLE, "GetRoleName", "", ()),
                                         (sender, path, PROPERTIES, "Get", "ss", (ACCESSIBLE, "Name"))])
        self._events.publish(AccessibilityFocusChanged(
            element_id(sender, path), str(role[0]).replace(" ", "-") if isinstance(role, list) else None,
            str(name[0].value) if isinstance(name, list) else None), t=seen)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _reference(body: list[Any]) -> str | None:
    """The object an event's `any_data` names (a `(so)` variant: the child a `children-changed` added)."""
    value = getattr(body[3], "value", None) if len(body) > 3 else None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return element_id(value[0], value[1])
    return None


def _kebab(member: str) -> str:
    """`ChildrenChanged` -> `children-changed`, as AT-SPI names its events."""
    return "".join(f"-{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(member))
