"""Waiting for a condition on the desktop, driven by its events (docs/events.md).

A wait subscribes to the event types its condition depends on, checks the condition once, then checks again
only when one of those events arrives (or when a quiet period it counts ends): nothing polls, and a pending
wait costs no CPU. The window model it reads is updated in the same loop callback that publishes each window
event (desktop/events/xwatch.py), so subscribing first and checking second cannot miss a change in between.

Adding a kind of condition is: a frozen dataclass below, a `Tracker` (the event types that matter and an
async "check now"), and one arm in `tracker()`. An element condition also registers for the accessibility
bus's tree changes while it is pending (they are costly to send when nobody waits).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from desktop.accessibility.examine import Verdict
from desktop.accessibility.query import ElementQuery
from desktop.accessibility.service import Accessibility
from desktop.accessibility.tree import Element
from desktop.events.bus import Event
from desktop.events.event_types import (
    AccessibilityChanged,
    AccessibilityFocusChanged,
    ClipboardChanged,
    ScreenChanged,
    WindowClosed,
    WindowState,
    wire_fields,
)
from desktop.events.sources import DesktopEvents, XWatch
from desktop.x11.session import Session
from sandbox_desktop_wire.events import EventType as E
from sandbox_desktop_wire.waits import ClipboardUntil, ScreenUntil, WindowUntil

Box = tuple[int, int, int, int]
"""x, y, width, height in screen pixels."""


@dataclass(frozen=True)
class WindowCondition:
    """Windows matching every selector given (none given: any window)."""

    title: str | None = None
    title_regex: re.Pattern[str] | None = None
    class_: str | None = None
    """WM_CLASS: its instance or its class name."""
    pid: int | None = None
    until: WindowUntil = WindowUntil.PRESENT

    def matches(self, w: WindowState) -> bool:
        return ((self.title is None or w.title == self.title)
                and (self.title_regex is None or self.title_regex.search(w.title) is not None)
                and (self.class_ is None or self.class_ in (w.class_, w.instance))
                and (self.pid is None or w.pid == self.pid))


@dataclass(frozen=True)
class ScreenCondition:
    until: ScreenUntil = ScreenUntil.SETTLED
    quiet_ms: int = 300
    region: Box | None = None
    """Only drawing that touches this rectangle counts."""


@dataclass(frozen=True)
class ClipboardCondition:
    until: ClipboardUntil = ClipboardUntil.CHANGED


@dataclass(frozen=True)
class ElementCondition:
    """Elements matching `query`: `until` is `present`, `gone` or a state some matching element must have.
    `find` reads them (Accessibility.find on the request's session); `watching` has tree changes published
    as `accessibility.changed` while the wait is pending (desktop/accessibility/signals.py); `examine` looks
    at the one object a change names (desktop/accessibility/examine.py)."""

    query: ElementQuery
    until: str
    find: Callable[[ElementQuery], Awaitable[list[Element]]]
    watching: Callable[[], contextlib.AbstractAsyncContextManager[None]]
    examine: Callable[[str, ElementQuery], Awaitable[Element | Verdict]]
    """Accessibility.examine on the request's session: one changed object, and what lies below it, against
    the query."""


Condition = WindowCondition | ScreenCondition | ClipboardCondition | ElementCondition


def element_condition(accessibility: Accessibility, session: Session, query: ElementQuery,
                      until: str) -> ElementCondition:
    """Elements matching `query` until `until`, read from `accessibility` on `session`."""
    states = query.states | ({until} if until not in ("present", "gone") else set())
    return ElementCondition(query, until, lambda q: accessibility.find(session, q),
                            lambda: accessibility.watching(session, frozenset(states)),
                            lambda ref, q: accessibility.examine(session, ref, q))


@dataclass(frozen=True)
class Check:
    matched: bool
    state: dict[str, Any]
    """What matched when `matched`; otherwise what was observed."""
    recheck_at: float | None = None
    """A `time.monotonic()` at which to check again without an event (the end of a quiet period)."""


class Tracker(Protocol):
    types: frozenset[E]
    """The event types after which the condition may have changed."""

    async def check(self, event: Event | None) -> Check:
        """The condition now; `event` is the one that woke the wait (None: the first check, or events lost)."""
        ...


@dataclass(frozen=True)
class WaitResult:
    matched: bool
    matched_what: dict[str, Any] | None
    elapsed_ms: int
    last_state: dict[str, Any] | None


class WindowTracker:
    types = frozenset({E.WINDOW_CREATED, E.WINDOW_CLOSED, E.WINDOW_FOCUSED, E.WINDOW_TITLE_CHANGED})

    def __init__(self, condition: WindowCondition, model: XWatch) -> None:
        self.condition = condition
        self.model = model
        self._gone: dict[str, Any] | None = None

    async def check(self, event: Event | None) -> Check:
        found = sorted((w for w in self.model.windows.values() if self.condition.matches(w)), key=lambda w: w.id)
        active = [w for w in found if w.id == self.model.active]
        state = {"windows": [w.to_wire() for w in found],
                 "focusedWindowId": str(self.model.active) if self.model.active else None}
        match self.condition.until:
            case WindowUntil.PRESENT:
                return Check(bool(found), {"window": found[0].to_wire()} if found else state)
            case WindowUntil.FOCUSED:
                return Check(bool(active), {"window": active[0].to_wire()} if active else state)
            case WindowUntil.GONE:
                if event is not None and isinstance(event.data, WindowClosed):
                    self._gone = wire_fields(event.data)  # the window as its `window.closed` says it
                return Check(not found, {"window": self._gone} if not found else state)
        raise AssertionError(self.condition.until)


def intersects(box: Box, drawn: ScreenChanged) -> bool:
    x, y, w, h = box
    return drawn.x < x + w and x < drawn.x + drawn.width and drawn.y < y + h and y < drawn.y + drawn.height


class ScreenTracker:
    """`changed`: something was drawn (in the region) after the wait began. `settled`: nothing was drawn (in
    the region) for `quiet_ms`, counting from the wait's start (a still screen settles after one quiet period)."""

    types = frozenset({E.SCREEN_CHANGED})

    def __init__(self, condition: ScreenCondition) -> None:
        self.condition = condition
        self.started = self.last_change = time.monotonic()
        self.changes = 0
        self.changed: dict[str, Any] | None = None

    async def check(self, event: Event | None) -> Check:
        now = time.monotonic()
        region = self.condition.region
        drawn = event.data if event is not None and isinstance(event.data, ScreenChanged) else None
        if event is not None and drawn is not None and (region is None or intersects(region, drawn)):
            self.changes += 1
            self.last_change = max(self.last_change, event.t)
            box = wire_fields(drawn)  # x, y, width, height
            self.changed = box if self.changed is None else _union(self.changed, box)
        quiet_s = self.condition.quiet_ms / 1000
        state = {"changes": self.changes, "changedRegion": self.changed,
                 "quietForMs": round((now - self.last_change) * 1000)}
        if self.condition.until == ScreenUntil.CHANGED:
            return Check(self.changes > 0, {"changedRegion": self.changed} if self.changes else state)
        settled = now - self.last_change >= quiet_s
        return Check(settled, state, None if settled else self.last_change + quiet_s)


def _union(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    x, y = min(a["x"], b["x"]), min(a["y"], b["y"])
    right, bottom = max(a["x"] + a["width"], b["x"] + b["width"]), max(a["y"] + a["height"], b["y"] + b["height"])
    return {"x": x, "y": y, "width": right - x, "height": bottom - y}


PRESENCE_STATES = frozenset({"showing", "visible", "defunct"})
MIN_CHECK_INTERVAL_S = 0.02
"""Whole checks start at most this often: each reads the tree (milliseconds of CPU), and an app may
announce hundreds of changes a second; a change in between is seen by the check at the interval's end."""
HIDDEN_RECHECK_S = 1.0
"""After a change showed an element that would match but does not show, a whole check runs within this:
a toolkit may show it later without announcing it (the changes of what does show are all announced)."""
OBJECT_CHANGES = ("object:property-change:accessible-name", "object:state-changed:")
"""Changes about the object they name: only it, or what lies below it, can have started to match."""


class ElementTracker:
    """Checks the query again after anything that can change the tree: an accessibility change, a focus
    change, a window coming, going or retitled. A change that names its object (a child added, a rename, a
    state) is first judged by that object (and what lies below it) alone (desktop/accessibility/examine.py):
    a match is answered at once, and a change that cannot make one appear costs a few calls instead of a
    whole find. The rest, and what the object cannot decide, run the whole check; a check that began after
    an event already saw its effect, so events that queued up during a check cost nothing more. A wait
    until `gone` always runs the whole check (a removal says nothing about what is left)."""

    types = frozenset({E.ACCESSIBILITY_CHANGED, E.ACCESSIBILITY_FOCUS_CHANGED, E.WINDOW_CREATED, E.WINDOW_CLOSED,
                       E.WINDOW_FOCUSED, E.WINDOW_TITLE_CHANGED})

    def __init__(self, condition: ElementCondition) -> None:
        self.condition = condition
        self._checked_at = 0.0
        self._last: Check | None = None
        self._hidden_due: float | None = None
        """When a whole check is due because a change brought an element that would match but does not show."""
        until = {condition.until} if condition.until not in ("present", "gone") else set()
        self._states = condition.query.states | until | PRESENCE_STATES
        self._target = dataclasses.replace(condition.query, states=condition.query.states | until)
        """What a match must be: the query, with the state waited for."""

    def watching(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.condition.watching()

    def _matters(self, event: Event) -> bool:
        """A state change matters only for a state the query or `until` names, or that makes elements show
        or go (other waits may have registered other states: their changes arrive here too); a removal
        only to a wait until `gone` (it cannot make an element appear)."""
        match event.data:
            case AccessibilityChanged(change=change) if change.startswith("object:state-changed:"):
                return change.split(":")[2] in self._states
            case AccessibilityChanged(change=change) if change.startswith("object:children-changed:remove"):
                return self.condition.until == "gone"
        return True

    def _changed_object(self, event: Event) -> str | None:
        """The one object whose change this is, when only that object (or what lies below it) can have
        started to match: the child added, an object renamed, changing state or focused. None: a whole
        check."""
        if self.condition.until == "gone":
            return None
        match event.data:
            case AccessibilityFocusChanged(element=element):
                return element or None
            case AccessibilityChanged(change=change, child=child) if change.startswith("object:children-changed:add"):
                return child or None
            case AccessibilityChanged(element=element, change=change) if change.startswith(OBJECT_CHANGES):
                return element or None
        return None

    async def check(self, event: Event | None) -> Check:
        if event is not None and self._last is not None:
            if event.t < self._checked_at or not self._matters(event):
                return self._as_before()
            changed = self._changed_object(event)
            if changed is not None:
                seen = await self._examine(changed)
                if seen is not None:
                    return seen
        now = time.monotonic()
        if self._last is not None and now - self._checked_at < MIN_CHECK_INTERVAL_S:
            # A burst of changes: one check at the end of the interval covers them all.
            return Check(False, self._last.state, self._checked_at + MIN_CHECK_INTERVAL_S)
        self._checked_at = now
        self._hidden_due = None
        found = await self.condition.find(self.condition.query)
        until = self.condition.until
        if until == "present":
            matched = bool(found)
        elif until == "gone":
            matched = not found
        else:
            found = [e for e in found if until in e.states]
            matched = bool(found)
        state = {"elements": [summary(e) for e in found[:10]], "count": len(found)}
        self._last = Check(matched, {"element": summary(found[0])} if matched and found else state)
        return self._last

    async def _examine(self, changed: str) -> Check | None:
        """The changed object alone: a match, or nothing new (a hidden match: a whole check scheduled); None
        when the whole check must tell."""
        verdict = await self.condition.examine(changed, self._target)
        if isinstance(verdict, Element):
            self._last = Check(True, {"element": summary(verdict)})
            return self._last
        if verdict is Verdict.RECHECK:
            return None
        if verdict is Verdict.HIDDEN and self._hidden_due is None:
            self._hidden_due = time.monotonic() + HIDDEN_RECHECK_S
        return self._as_before()

    def _as_before(self) -> Check:
        """Nothing new: the last check's answer, with a whole check due if a change brought a hidden match."""
        assert self._last is not None
        if self._hidden_due is None:
            return self._last
        return Check(self._last.matched, self._last.state, self._hidden_due)


def summary(element: Element) -> dict[str, Any]:
    """An element as a wait reports it: enough to act on it next (its id) and to see why it matched."""
    described: dict[str, Any] = {"id": element.id, "role": element.role, "name": element.name,
                                 "states": sorted(element.states)}
    if element.bounds is not None:
        b = element.bounds
        described["bounds"] = {"x": b.x, "y": b.y, "width": b.width, "height": b.height}
    if element.window_id is not None:
        described["windowId"] = str(element.window_id)
    return described


class ClipboardTracker:
    types = frozenset({E.CLIPBOARD_CHANGED})

    async def check(self, event: Event | None) -> Check:
        if event is not None and isinstance(event.data, ClipboardChanged):
            return Check(True, wire_fields(event.data))  # selection, owner
        return Check(False, {"changed": False})


def tracker(condition: Condition, events: DesktopEvents) -> Tracker:
    match condition:
        case WindowCondition():
            return WindowTracker(condition, events.windows)
        case ScreenCondition():
            return ScreenTracker(condition)
        case ClipboardCondition():
            return ClipboardTracker()
        case ElementCondition():
            return ElementTracker(condition)
    raise AssertionError(f"unhandled condition {condition!r}")


async def wait_for(events: DesktopEvents, condition: Condition, timeout_s: float) -> WaitResult:
    """Wait until `condition` holds, for at most `timeout_s`; never raises for a timeout."""
    start = time.monotonic()
    deadline = start + timeout_s
    track = tracker(condition, events)
    watching = track.watching() if isinstance(track, ElementTracker) else contextlib.nullcontext()
    with events.bus.subscribe(track.types) as subscription:
        async with watching:  # after subscribing: a change between the two is not missed
            check = await track.check(None)
            while not check.matched:
                now = time.monotonic()
                if now >= deadline:
                    break
                item = await subscription.next(timeout=min(deadline, check.recheck_at or deadline) - now)
                timed_out = check.recheck_at is None and time.monotonic() >= deadline
                if item is None and (subscription.closed or timed_out):
                    break  # the server is shutting down, or the time is up with nothing new since the last check
                check = await track.check(item if isinstance(item, Event) else None)
    elapsed_ms = round((time.monotonic() - start) * 1000)
    if check.matched:
        return WaitResult(True, check.state, elapsed_ms, None)
    return WaitResult(False, None, elapsed_ms, check.state)
