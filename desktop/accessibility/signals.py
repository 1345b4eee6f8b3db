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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from desktop.accessibility.atspi import ACCESSIBLE, EVENT_PREFIX, PROPERTIES, REGISTRY, REGISTRY_PATH, AtspiBus
from desktop.accessibility.tree import element_id
from desktop.events import EventBus
from sandbox_desktop_wire.events import EventType

logger = logging.getLogger("sandbox_desktop.accessibility")

FOCUS = ("object:state-changed:focused", f"type='signal',interface='{EVENT_PREFIX}Object',member='StateChanged',"
         "arg0='focused'")
CHANGES = (
    ("object:children-changed", f"type='signal',interface='{EVENT_PREFIX}Object',member='ChildrenChanged'"),
    ("object:state-changed", f"type='signal',interface='{EVENT_PREFIX}Object',member='StateChanged'"),
    ("object:property-change:accessible-name", f"type='signal',interface='{EVENT_PREFIX}Object',"
     "member='PropertyChange',arg0='accessible-name'"),
    ("window:", f"type='signal',interface='{EVENT_PREFIX}Window'"),
)
REGISTRY_IFACE = "org.a11y.atspi.Registry"


class Signals:
    """One desktop's accessibility signals, on whatever connection is current."""

    def __init__(self, events: EventBus) -> None:
        self._events = events
        self._watchers = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def attach(self, bus: AtspiBus) -> None:
        """A new connection: take its signals, and register what is wanted now."""
        bus.on_message(lambda message: self._dispatch(bus, message))
        await self._register(bus, [FOCUS, *(CHANGES if self._watchers else ())])

    @contextlib.asynccontextmanager
    async def watching(self, connect: Callable[[], Awaitable[AtspiBus]]) -> AsyncIterator[None]:
        """Tree changes are published while inside (counted: the first in registers, the last out unregisters)."""
        bus = await connect()
        self._watchers += 1
        if self._watchers == 1:
            await self._register(bus, CHANGES)
        try:
            yield
        finally:
            self._watchers -= 1
            if self._watchers == 0 and bus.connected:
                with contextlib.suppress(Exception):  # the connection went: nothing is registered any more
                    await self._unregister(bus, CHANGES)

    @staticmethod
    async def _register(bus: AtspiBus, kinds: Any) -> None:
        for _event, rule in kinds:
            await bus.add_match(rule)
        await bus.call_all([(REGISTRY, REGISTRY_PATH, REGISTRY_IFACE, "RegisterEvent", "s", (event,))
                            for event, _rule in kinds])

    @staticmethod
    async def _unregister(bus: AtspiBus, kinds: Any) -> None:
        await bus.call_all([(REGISTRY, REGISTRY_PATH, REGISTRY_IFACE, "DeregisterEvent", "s", (event,))
                            for event, _rule in kinds])
        for _event, rule in kinds:
            await bus.remove_match(rule)

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
            if not self._watchers:
                return
        if self._watchers:
            kind = interface.removeprefix(EVENT_PREFIX).lower()
            self._events.publish(EventType.ACCESSIBILITY_CHANGED, t=seen, element=element_id(sender, path),
                                 change=f"{kind}:{_kebab(member)}" + (f":{detail}" if detail else ""))

    async def _focused(self, bus: AtspiBus, sender: str, path: str, seen: float) -> None:
        """Publish a focus change with the element's role and name (asked now, stamped when it happened)."""
        role, name = await bus.call_all([(sender, path, ACCESSIBLE, "GetRoleName", "", ()),
                                         (sender, path, PROPERTIES, "Get", "ss", (ACCESSIBLE, "Name"))])
        self._events.publish(EventType.ACCESSIBILITY_FOCUS_CHANGED, t=seen, element=element_id(sender, path),
                             role=str(role[0]).replace(" ", "-") if isinstance(role, list) else None,
                             name=str(name[0].value) if isinstance(name, list) else None)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _kebab(member: str) -> str:
    """`ChildrenChanged` -> `children-changed`, as AT-SPI names its events."""
    return "".join(f"-{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(member))
