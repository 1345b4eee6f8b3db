"""A desktop's event bus: what happens on the desktop, fanned out to every subscriber (docs/events.md).

Producers (the X watcher thread of desktop/events/xwatch.py, the process registry, the state machine, the
accessibility bus, approvals, the live view's control) `publish` one of the typed events of
desktop/events/event_types.py, from any thread. The bus stamps it with `t` (`time.monotonic()`, the action
log's clock) and `at` (wall time) where it is published, then hands it to the event loop, which numbers it
(`seq`, so numbers follow delivery order without a lock) and offers it to each subscription. An event
becomes JSON only when a subscriber renders it (`Event.to_wire`).

A subscription's queue is bounded: a subscriber that does not keep up loses its oldest events and is told
how many (`Missed`) before the next one it gets, so a stuck SSE client costs a fixed amount of memory and
never slows the publisher or the other subscribers. The newest events are also kept in a small ring, so a
client that reconnects with `Last-Event-ID` gets what it missed while away, if it is still held.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from desktop.core.loops import call_soon_from_thread
from desktop.events.event_types import EventData, wire_fields
from sandbox_desktop_wire.events import EventType

logger = logging.getLogger("sandbox_desktop.events")

QUEUE_EVENTS = 1024
"""Per subscriber: a burst of ~200 windows opening at once (5 events each) still arrives whole."""
RING_EVENTS = 1024
"""Held for replays (`Last-Event-ID`, `since`): about a minute of a busy desktop."""

SCREEN_TYPES = frozenset({EventType.SCREEN_CHANGED, EventType.SCREEN_SETTLED})


@dataclass(frozen=True, slots=True)
class Event:
    """One published event: numbered, stamped, and what happened."""

    seq: int
    t: float
    at: str
    data: EventData

    @property
    def type(self) -> EventType:
        return self.data.TYPE

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the wire: `seq`, `type`, `t`, `at` and the type's own fields."""
        return {"seq": self.seq, "type": str(self.type), "t": round(self.t, 6), "at": self.at,
                **wire_fields(self.data)}


@dataclass(frozen=True, slots=True)
class Missed:
    """`count` events this subscriber did not get (it fell behind, or they left the ring before a replay)."""

    count: int

    def to_wire(self) -> dict[str, Any]:
        """`events.missed`: not a desktop event, so no `seq`, `t` or `at`."""
        return {"type": str(EventType.EVENTS_MISSED), "count": self.count}


def parse_types(text: str | None) -> frozenset[EventType] | None:
    """`window.created,screen.` as the set of types it names (a subject with its dot: all of its types);
    None for all. Raises ValueError naming the first unknown name."""
    if text is None or not text.strip():
        return None
    found: set[EventType] = set()
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        matching = {t for t in EventType if t == name or (name.endswith(".") and t.startswith(name))}
        if not matching:
            raise ValueError(name)
        found |= matching
    return frozenset(found)


class Subscription:
    """Events of the wanted types, oldest first; iterate with `async for`, or `await next(timeout)`."""

    def __init__(self, bus: EventBus, types: frozenset[EventType] | None, size: int) -> None:
        self.types = types
        self._bus = bus
        self._queue: deque[Event] = deque()
        self._size = size
        self._missed = 0
        self._wake = asyncio.Event()
        self.closed = False

    def wants(self, type_: EventType) -> bool:
        return self.types is None or type_ in self.types

    def offer(self, event: Event) -> None:
        if self.closed or not self.wants(event.type):
            return
        if len(self._queue) >= self._size:
            self._queue.popleft()
            self._missed += 1
        self._queue.append(event)
        self._wake.set()

    def miss(self, count: int) -> None:
        self._missed += count
        self._wake.set()

    async def next(self, timeout: float | None = None) -> Event | Missed | None:
        """The next event (a `Missed` first if some were lost); None at the timeout or once closed."""
        while True:
            if self._missed:
                missed, self._missed = self._missed, 0
                return Missed(missed)
            if self._queue:
                return self._queue.popleft()
            if self.closed:
                return None
            self._wake.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                return None

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event | Missed:
        item = await self.next()
        if item is None:
            raise StopAsyncIteration
        return item

    def close(self) -> None:
        """Stop receiving; a pending `next` returns what is queued, then None."""
        if not self.closed:
            self.closed = True
            self._wake.set()
            self._bus.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


InterestHook = Callable[[bool], None]


class EventBus:
    """One desktop's events. `publish` from any thread; `subscribe` on the event loop."""

    def __init__(self, queue_size: int = QUEUE_EVENTS, ring_size: int = RING_EVENTS) -> None:
        self._subscriptions: list[Subscription] = []
        self._ring: deque[Event] = deque(maxlen=ring_size)
        self._queue_size = queue_size
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._screen_hooks: list[InterestHook] = []
        self._screen_interest = False
        self._screen_holds = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    def bind(self) -> None:
        """Deliver on the running loop (called from it: by `subscribe`, and when the desktop starts)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def publish(self, data: EventData, /, *, t: float | None = None) -> None:
        """Publish an event from any thread; `t` defaults to now (a producer may pass when it saw it)."""
        stamp = time.monotonic() if t is None else t
        at = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        if threading.get_ident() == self._loop_thread:
            self._deliver(data, stamp, at)
            return
        # No loop: nobody has subscribed and the desktop never started, nothing to tell.
        call_soon_from_thread(self._loop, self._deliver, data, stamp, at)

    def _deliver(self, data: EventData, t: float, at: str) -> None:
        self._seq += 1
        event = Event(self._seq, t, at, data)
        self._ring.append(event)
        for subscription in self._subscriptions:
            subscription.offer(event)

    def subscribe(self, types: Collection[EventType] | None = None, since: int | None = None) -> Subscription:
        """A subscription to `types` (None: all); with `since`, the held events after that `seq` come first."""
        self.bind()
        subscription = Subscription(self, frozenset(types) if types is not None else None, self._queue_size)
        if since is not None and since < self._seq:
            held = [e for e in self._ring if e.seq > since]
            first = held[0].seq if held else self._seq + 1
            if first > since + 1:
                subscription.miss(first - since - 1)
            for event in held:
                subscription.offer(event)
        self._subscriptions.append(subscription)
        self._interest_changed()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
            self._interest_changed()

    def end_streams(self) -> None:
        """Close every subscription (the server is shutting down): event streams end at once."""
        for subscription in list(self._subscriptions):
            subscription.close()

    # Screen events cost an XDamage object and a wake-up per drawing burst: the watcher produces them only
    # while someone subscribes to them (docs/events.md).
    def on_screen_interest(self, hook: InterestHook) -> None:
        """Call `hook(True)` when the first subscription to screen events arrives, `hook(False)` when the
        last one leaves (and once now with the current interest)."""
        self._screen_hooks.append(hook)
        hook(self._screen_interest)

    def remove_screen_hook(self, hook: InterestHook) -> None:
        if hook in self._screen_hooks:
            self._screen_hooks.remove(hook)

    def hold_screen(self) -> Callable[[], None]:
        """Keep screen events produced without subscribing to them (an effect observer between actions, so the
        next one needs not wait for XDamage to be set up again); call what this returns to let go, once."""
        self._screen_holds += 1
        self._interest_changed()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._screen_holds -= 1
                self._interest_changed()
        return release

    def _interest_changed(self) -> None:
        wanted = self._screen_holds > 0 or any(s.types is None or s.types & SCREEN_TYPES for s in self._subscriptions)
        if wanted != self._screen_interest:
            self._screen_interest = wanted
            for hook in list(self._screen_hooks):
                try:
                    hook(wanted)
                except Exception:
                    logger.exception("screen interest hook failed")
