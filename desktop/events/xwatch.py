"""The X watcher: one thread per desktop that turns X events into bus events (docs/events.md).

The thread owns its own python-xlib connection and sleeps on the X socket and a wake-up (desktop/x11/wakeup.py,
as desktop/clipboard/owner.py does): an idle desktop costs nothing, and an event is published within
one wake-up of its arrival. It selects

- SubstructureNotify and PropertyChange on the root: `_NET_CLIENT_LIST` (windows managed or gone),
  `_NET_ACTIVE_WINDOW` (focus), and the window manager's frames being mapped, moved and resized;
- PropertyChange and StructureNotify on each managed window: its title, its own moves and resizes;
- XFixes selection notifications for CLIPBOARD: another owner, or the owner gone;
- XDamage on the root, only while someone wants screen events (`set_screen`): an XDamage object makes the
  X server report every drawing, so it exists only while a subscriber or a pending wait needs it.

A window is "present" exactly when `GET /v1/desktop/windows` lists it (managed, viewable, not a dock),
so a wait's answer and the window list never disagree. The loop-side `XWatch` (desktop/events/sources.py)
keeps the model the events describe (windows by id, the active one), updated in the same loop callback
that publishes each event, so a waiter that subscribes and then reads the model cannot miss a change.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import damage, xfixes

from desktop.events.event_types import (
    ClipboardChanged,
    EventData,
    ScreenChanged,
    ScreenSettled,
    WindowClosed,
    WindowCreated,
    WindowFocused,
    WindowMoved,
    WindowState,
    WindowTitleChanged,
)
from desktop.windows.query import active_window_id, client_window_ids, describe_windows
from desktop.x11.reconnect import CONNECTION_LOST
from desktop.x11.thread import open_display
from desktop.x11.wakeup import Wakeup
from sandbox_desktop_wire.enums import ClipboardSelection

logger = logging.getLogger("sandbox_desktop.xwatch")

SETTLE_QUIET_S = 0.15
"""`screen.settled` after this long without drawing: longer than the gap between the frames of a toolkit's
redraw (16-33 ms) or an xterm's output bursts, short enough that an agent does not wait on it."""
CHANGED_EVERY_S = 0.05
"""At most one `screen.changed` per this period while drawing goes on (the first of a burst at once)."""
_GONE = (xerror.BadWindow, xerror.BadDrawable, xerror.BadMatch, xerror.BadValue)
_TITLE_ATOMS = ("WM_NAME", "_NET_WM_NAME")
DRAIN_ROUNDS = 1000
"""Bound on handle-and-describe rounds of one wake-up (each round's replies may bring more events)."""


Rect = tuple[int, int, int, int]  # x0, y0, x1, y1
Emit = Callable[[EventData, float], None]
"""Hands an event, and when it was seen, to the loop side."""


def union(a: Rect | None, b: Rect) -> Rect:
    return b if a is None else (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def box(r: Rect) -> tuple[int, int, int, int]:
    """x, y, width, height."""
    return r[0], r[1], r[2] - r[0], r[3] - r[1]


class _Screen:
    """Damage bursts: `screen.changed` at the start and every CHANGED_EVERY_S, `screen.settled` after quiet."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.burst: Rect | None = None
        self.pending: Rect | None = None
        self.started = self.last_damage = self.last_changed = 0.0

    def damaged(self, area: Rect, now: float) -> None:
        if self.burst is None:
            self.started = now
            self.last_changed = -CHANGED_EVERY_S
        self.burst, self.pending, self.last_damage = union(self.burst, area), union(self.pending, area), now
        self.due(now)

    def due(self, now: float) -> float | None:
        """Emit what is due; the next deadline, if any."""
        if self.pending is not None and now - self.last_changed >= CHANGED_EVERY_S:
            self._emit(ScreenChanged(*box(self.pending)), now)
            self.pending, self.last_changed = None, now
        if self.burst is not None and now - self.last_damage >= SETTLE_QUIET_S:
            self._emit(ScreenSettled(*box(self.burst), round(SETTLE_QUIET_S * 1000),
                                     round((self.last_damage - self.started) * 1000)), now)
            self.burst = None
        deadlines = [self.last_changed + CHANGED_EVERY_S] if self.pending is not None else []
        if self.burst is not None:
            deadlines.append(self.last_damage + SETTLE_QUIET_S)
        return min(deadlines, default=None)


class _Watch:
    """The thread's X side: the windows it tracks, the clipboard's owner, damage when asked."""

    def __init__(self, d: Display, emit: Emit) -> None:
        self.d = d
        self.emit = emit
        self.root = d.screen().root
        self.atoms = {name: d.get_atom(name) for name in ("_NET_CLIENT_LIST", "_NET_ACTIVE_WINDOW", *_TITLE_ATOMS)}
        self.clipboard = d.get_atom("CLIPBOARD")
        self.windows: dict[int, WindowState | None] = {}  # every managed id; None while not listed
        self.frames: dict[int, int] = {}  # top-level ancestor (the WM's frame) -> managed window
        self.active: int | None = None
        self.damage: int | None = None
        self.initial_report = False
        """The damage object was just made: its first report is the X server's, of the whole screen."""
        self.screen = _Screen(emit)
        self.dirty: set[int] = set()
        self.rearm = self.pending_active = False
        d.set_error_handler(lambda err, request: None)  # a window gone before our request reached it
        self.root.change_attributes(event_mask=X.SubstructureNotifyMask | X.PropertyChangeMask)
        if d.has_extension("XFIXES"):
            d.xfixes_query_version()
            mask = (xfixes.XFixesSetSelectionOwnerNotifyMask | xfixes.XFixesSelectionWindowDestroyNotifyMask
                    | xfixes.XFixesSelectionClientCloseNotifyMask)
            d.xfixes_select_selection_input(self.root, self.clipboard, mask)
        self.damage_event = d.extension_event.DamageNotify if d.has_extension("DAMAGE") else None
        if self.damage_event is not None:
            d.damage_query_version()  # the protocol requires it before any other DAMAGE request
        self.sync_clients()
        self.sync_active()
        self.flush_dirty()

    # -- windows -------------------------------------------------------------------------------------

    def sync_clients(self) -> None:
        ids = client_window_ids(self.d)
        for wid in [w for w in self.windows if w not in ids]:
            self.forget(wid)
        for wid in ids:
            if wid not in self.windows:
                self.windows[wid] = None
                with contextlib.suppress(*_GONE):
                    self.d.create_resource_object("window", wid).change_attributes(
                        event_mask=X.PropertyChangeMask | X.StructureNotifyMask)
                    self.track_frame(wid)
                self.dirty.add(wid)

    def track_frame(self, wid: int) -> None:
        for frame, owner in list(self.frames.items()):
            if owner == wid:
                del self.frames[frame]
        window = self.d.create_resource_object("window", wid)
        for _ in range(16):  # the WM's frame is a child of the root; nesting deeper than this is not a frame
            parent = window.query_tree().parent
            if parent is None or parent.id in (X.NONE, self.root.id):
                break
            window = parent
        self.frames[window.id] = wid

    def forget(self, wid: int) -> None:
        state = self.windows.pop(wid, None)
        self.frames = {f: w for f, w in self.frames.items() if w != wid}
        self.dirty.discard(wid)
        if state is not None:
            self.emit(WindowClosed(wid, state.title), time.monotonic())

    def sync_active(self) -> None:
        active = active_window_id(self.d)
        if active != self.active:
            previous, self.active = self.active, active
            state = self.windows.get(active) if active is not None else None
            self.emit(WindowFocused(active, state.title if state else None, previous), time.monotonic())

    def flush_dirty(self) -> None:
        """Describe every window something happened to (pipelined), and publish what changed."""
        wids = sorted(w for w in self.dirty if w in self.windows)
        self.dirty.clear()
        if not wids:
            return
        infos = {w.id: w for w in describe_windows(self.d, wids)}
        for wid in wids:
            old, info = self.windows.get(wid), infos.get(wid)
            new = None
            if info is not None:
                try:
                    instance, class_ = self.d.create_resource_object("window", wid).get_wm_class() or ("", "")
                except _GONE:
                    continue
                new = WindowState(wid, info.title, instance, class_, info.pid, info.client.x, info.client.y,
                                  info.client.width, info.client.height)
            self.windows[wid] = new
            now = time.monotonic()
            if old is None and new is not None:
                self.emit(WindowCreated(new), now)
            elif old is not None and new is None:
                self.emit(WindowClosed(wid, old.title), now)
            elif old is not None and new is not None:
                if new.title != old.title:
                    self.emit(WindowTitleChanged(new, old.title), now)
                if (new.x, new.y, new.width, new.height) != (old.x, old.y, old.width, old.height):
                    self.emit(WindowMoved(new), now)
                elif new != old:
                    self.emit(WindowTitleChanged(new, old.title), now)

    # -- screen --------------------------------------------------------------------------------------

    def set_screen(self, on: bool) -> None:
        if on and self.damage is None and self.damage_event is not None:
            self.damage = self.root.damage_create(damage.DamageReportBoundingBox)
            # The X server reports a new Damage object's whole drawable as damaged at once (damageext.c,
            # DamageExtRegister): not a drawing, so it is taken away unseen. Taken as one, it made every
            # `screen` wait that created the object answer "changed" at once, and the one after it too.
            self.initial_report = True
        elif not on and self.damage is not None:
            self.d.damage_destroy(self.damage)
            self.damage = None
            self.screen = _Screen(self.emit)

    @property
    def screen_armed(self) -> bool:
        """Damage is reported from now on: the object exists and its initial report was taken away (drawing
        done before that is inside the initial report's area, which BoundingBox does not report again)."""
        return self.damage is not None and not self.initial_report

    # -- events --------------------------------------------------------------------------------------

    def handle(self, ev: Any) -> None:
        if self.damage_event is not None and ev.type == self.damage_event:
            a = ev.area
            if ev.damage == self.damage and self.initial_report:
                self.initial_report = False  # the first report of a new object (set_screen): nothing drawn
                self.rearm = True
            elif ev.damage == self.damage and a.width and a.height:
                self.screen.damaged((a.x, a.y, a.x + a.width, a.y + a.height), time.monotonic())
                self.rearm = True
            return
        if isinstance(ev, xfixes.SelectionNotify):
            owner = None if ev.sub_code != xfixes.XFixesSetSelectionOwnerNotify or not ev.owner else ev.owner.id
            self.emit(ClipboardChanged(ClipboardSelection.CLIPBOARD, owner), time.monotonic())
            return
        window = getattr(ev, "window", None)
        if window is None:
            return
        wid = window.id
        if ev.type == X.PropertyNotify:
            if wid == self.root.id:
                if ev.atom == self.atoms["_NET_CLIENT_LIST"]:
                    self.sync_clients()
                elif ev.atom == self.atoms["_NET_ACTIVE_WINDOW"]:
                    self.pending_active = True
            elif wid in self.windows and ev.atom in (self.atoms["_NET_WM_NAME"], Xatom.WM_NAME):
                self.dirty.add(wid)
        elif ev.type == X.ReparentNotify and wid in self.windows:
            with contextlib.suppress(*_GONE):
                self.track_frame(wid)
            self.dirty.add(wid)
        elif ev.type in (X.ConfigureNotify, X.MapNotify, X.UnmapNotify):
            owner = wid if wid in self.windows else self.frames.get(wid)
            if owner is not None:
                self.dirty.add(owner)

    def drain(self) -> None:
        """Handle everything received; then describe what changed, once per window; again while events came.

        Describing waits for replies, and python-xlib queues the events it reads meanwhile: they are in its
        queue, no longer on the socket, so the thread's select() would not wake for them (a title set while
        a new window was being described stayed unseen until the next X event, and waits for it timed out).
        So this returns only once the queue is empty after the last round trip."""
        for _ in range(DRAIN_ROUNDS):
            self.rearm = self.pending_active = False
            for _ in range(100_000):  # bounded: a client flooding us cannot keep this thread here forever
                self.d.flush()
                if not self.d.pending_events():
                    break
                while self.d.pending_events():
                    self.handle(self.d.next_event())
            self.flush_dirty()
            if self.pending_active:
                self.sync_active()
            if self.rearm and self.damage is not None:
                self.d.damage_subtract(self.damage, X.NONE, X.NONE)  # BoundingBox reports again once emptied
            self.d.flush()
            if not self.d.pending_events():
                return


class WatchThread(threading.Thread):
    """Runs a `_Watch` until stopped or until the X server goes away."""

    def __init__(self, display_name: str, emit: Emit, on_exit: Callable[[WatchThread], None],
                 on_armed: Callable[[bool], None] = lambda armed: None) -> None:
        super().__init__(name=f"xwatch{display_name}", daemon=True)
        self.display_name = display_name
        self._emit = emit
        self._on_exit = on_exit
        self._on_armed = on_armed
        """Told when damage starts (and stops) being reported, so an observer starts its action only then."""
        self._armed: bool | None = None
        """As last told (None: to be told again, after each `set_screen`)."""
        self._screen = False
        self._stopping = False
        self._wakeup = Wakeup()
        self.error: Exception | None = None

    def set_screen(self, on: bool) -> None:
        self._screen = on
        self._armed = None
        self._wake()

    def stop(self) -> None:
        self._stopping = True
        self._wake()

    def _wake(self) -> None:
        self._wakeup.wake()

    def run(self) -> None:
        try:
            d = open_display(self.display_name)
            try:
                self._loop(_Watch(d, self._emit))
            finally:
                with contextlib.suppress(Exception):
                    d.close()
        except CONNECTION_LOST as exc:
            if not self._stopping:
                logger.info("event watcher on %s lost its connection: %s", self.display_name, exc)
                self.error = exc
        except Exception as exc:  # a bug: logged, and the owner restarts the watcher
            logger.exception("event watcher on %s failed", self.display_name)
            self.error = exc
        finally:
            self._wakeup.close()
            self._on_exit(self)

    def _loop(self, watch: _Watch) -> None:
        self._wakeup.watch(watch.d.fileno())
        while not self._stopping:
            self._wakeup.clear()
            if self._screen != (watch.damage is not None):
                watch.set_screen(self._screen)
            watch.drain()
            if watch.screen_armed != self._armed:
                self._armed = watch.screen_armed
                self._on_armed(self._armed)
            deadline = watch.screen.due(time.monotonic())
            self._wakeup.sleep(None if deadline is None else deadline - time.monotonic())
