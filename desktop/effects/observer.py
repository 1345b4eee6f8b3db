"""Watching one action: the desktop's events from just before it until the screen is quiet after it.

Nothing here polls or grabs the screen. A watch is one subscription to the desktop's event bus
(desktop/events/bus.py) for drawing, windows, focus and the clipboard, open only for the action's window;
subscribing to screen events is what makes the X watcher create its XDamage object
(desktop/events/xwatch.py), and the last subscription leaving destroys it, so a desktop nobody asks for
effects pays nothing (docs/effects.md).

The window: the action itself, then up to SETTLE_S more, ended early once no event came for QUIET_S after
the last one. An action that settles already (a batch's `settle`, a vendor call) has watched long enough:
what arrived meanwhile is its effect, and no more is waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from desktop.core.geometry import Bounds
from desktop.effects.effect import Effect, ElementChange, FocusSeen, WindowSeen, merge_regions
from desktop.events.bus import Event, Missed, Subscription
from desktop.events.event_types import (
    ClipboardChanged,
    ScreenChanged,
    WindowClosed,
    WindowCreated,
    WindowFocused,
    WindowTitleChanged,
)
from desktop.events.sources import DesktopEvents
from desktop.events.xwatch import CHANGED_EVERY_S
from sandbox_desktop_wire.events import EventType

SETTLE_S = 0.3
"""The longest wait for an effect after the action: longer than a toolkit takes to map a dialog."""
QUIET_S = CHANGED_EVERY_S + 0.03
"""Quiet this long after the last event ends the wait: the X watcher holds a burst's further drawing for up to
CHANGED_EVERY_S before it reports it, so a shorter quiet would end between two reports of one redraw."""
LINGER_S = 5.0
"""Drawing stays reported this long after a watch: an agent's next action then starts at once, where setting up
XDamage again costs a round trip through the X watcher (1-10 ms on a loaded machine, bench/effects.py). A desktop
nobody asks for effects keeps none."""
ARM_TIMEOUT_S = 0.5
"""The longest wait for the X watcher to report drawing (it creates its XDamage object on the first wish)."""
WATCHED = (EventType.SCREEN_CHANGED, EventType.WINDOW_CREATED, EventType.WINDOW_CLOSED, EventType.WINDOW_FOCUSED,
           EventType.WINDOW_TITLE_CHANGED, EventType.CLIPBOARD_CHANGED)


class EffectWatch:
    """The events of one action, gathered into its `Effect` by `finish`."""

    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._started = time.monotonic()
        self._regions: list[Bounds] = []
        self._opened: dict[int, WindowSeen] = {}
        self._closed: dict[int, WindowSeen] = {}
        self._titles: dict[int, str] = {}
        self._focus: tuple[int | None, str | None] | None = None
        self._focus_before: int | None = None
        self._clipboard = False

    async def finish(self, settled: bool = False, element: ElementChange | None = None) -> Effect:
        """The effect once the screen is quiet (or at once when the action `settled` already)."""
        if settled:
            while (item := await self._subscription.next(timeout=0)) is not None:
                self._take(item)
        else:
            await self._settle()
        return self._effect(element)

    async def _settle(self) -> None:
        """Take events until QUIET_S after the last one (by when the X watcher saw it: those of the action
        itself are queued already), at most SETTLE_S from now."""
        deadline = time.monotonic() + SETTLE_S
        last: float | None = None
        for _ in range(10_000):  # bounded: one round per event, and events come at most every few ms
            now = time.monotonic()
            end = deadline if last is None else min(deadline, last + QUIET_S)
            # What is queued is taken whatever the time: its stamps may move the end further.
            item = await self._subscription.next(timeout=max(0.0, end - now))
            if item is None and time.monotonic() >= end:
                return
            if isinstance(item, Event):
                self._take(item)
                last = item.t if last is None else max(last, item.t)

    def _take(self, item: Event | Missed) -> None:
        if isinstance(item, Missed):
            return  # a flood of drawing overflowed the queue; the areas kept still show where
        match item.data:
            case ScreenChanged(x=x, y=y, width=width, height=height):
                self._regions.append(Bounds(x, y, width, height))
            case WindowCreated(window=window):
                self._opened[window.id] = WindowSeen(window.id, window.title)
            case WindowTitleChanged(window=window):
                self._titles[window.id] = window.title
            case WindowClosed(window_id=window_id, title=title):
                if self._opened.pop(window_id, None) is None:  # opened and closed within the action: neither
                    self._closed[window_id] = WindowSeen(window_id, title)
            case WindowFocused(window_id=window_id, title=title, previous_window_id=previous):
                if self._focus is None:
                    self._focus_before = previous
                self._focus = (window_id, title)
            case ClipboardChanged():
                self._clipboard = True

    def _effect(self, element: ElementChange | None) -> Effect:
        opened = tuple(WindowSeen(w.window_id, self._titles.get(w.window_id, w.title))
                       for w in self._opened.values())
        focus = None
        if self._focus is not None and self._focus[0] != self._focus_before:
            window_id, title = self._focus
            if window_id is not None:
                title = self._titles.get(window_id, title or "")
            focus = FocusSeen(window_id, title)
        return Effect(merge_regions(self._regions), opened, tuple(self._closed.values()), focus, element,
                      self._clipboard, round((time.monotonic() - self._started) * 1000))


class EffectObserver:
    """One desktop's observer of what its actions change."""

    def __init__(self, events: DesktopEvents) -> None:
        self._events = events
        self._release: Callable[[], None] | None = None
        self._linger: asyncio.TimerHandle | None = None

    @contextlib.asynccontextmanager
    async def watch(self) -> AsyncIterator[EffectWatch]:
        """Watch from now (once drawing is reported) until the block ends; run the action in the block and
        call `finish` in it."""
        with self._events.bus.subscribe(WATCHED) as subscription:
            try:
                await self._events.windows.screen_armed(ARM_TIMEOUT_S)
                yield EffectWatch(subscription)
            finally:
                self._linger_on()

    def _linger_on(self) -> None:
        if self._release is None:
            self._release = self._events.bus.hold_screen()
        if self._linger is not None:
            self._linger.cancel()
        self._linger = asyncio.get_running_loop().call_later(LINGER_S, self._let_go)

    def _let_go(self) -> None:
        self._linger = None
        if self._release is not None:
            self._release()
            self._release = None
