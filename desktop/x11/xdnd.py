"""Dropping files onto an application window, as a file manager does: the source side of XDND (version 5).

The drag source lives in the clipboard thread (desktop/clipboard/owner.py), which owns the connection and feeds
it every event first (`DragSource.consume`). It has a hidden window of its own, the source window the
target answers to, and its own `SelectionOwner` for `XdndSelection`, so a drop never disturbs the
clipboard. A drop is state that events advance, nothing waits:

1. find the target: descend from the root through the windows under the point to the first one with
   `XdndAware` (following a valid `XdndProxy`), version 3 or later, else `NoDropTarget`;
2. take a server timestamp (a zero-length append to our window's property), own `XdndSelection` with
   the `text/uri-list` (and the same list as `text/plain`);
3. send `XdndEnter` (the two types), then `XdndPosition` (root coordinates, `XdndActionCopy`);
4. `XdndStatus` accepting: send `XdndDrop`; refusing: ask again every 50 ms, as a moving pointer would, for
   up to 2 s (Chromium refuses until its page has answered `dragover`), then `XdndLeave` and `DropRefused`;
5. the target converts `XdndSelection` (our owner answers, INCR for a long list) and sends
   `XdndFinished`: the drop is done (`DropRefused` if a version 5 target reports a failure).

No answer within the timeouts (5 s for the status, 10 s for the finish) fails the drop with `Timeout`.
Drops queue: `XdndSelection` is one per source, so one drop runs at a time.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.protocol import event
from Xlib.xobject.drawable import Window

from desktop.core.errors import DesktopError, Timeout, UnusableValue
from desktop.x11.selection import Atoms, Content, SelectionOwner, resolve
from sandbox_desktop_wire.problems import ProblemCode

logger = logging.getLogger("sandbox_desktop.xdnd")

XDND_VERSION = 5
MIN_VERSION = 3
"""The oldest version the spec asks a client to speak; older targets are treated as unaware."""
STATUS_TIMEOUT_S = 5.0
FINISH_TIMEOUT_S = 10.0
REFUSAL_GRACE_S = 2.0
"""How long a target may keep refusing before its answer is final (one XdndStatus answers each XdndPosition)."""
REPOSITION_S = 0.05
"""The gap between XdndPosition messages to a target that refuses for now."""
MAX_DEPTH = 64
"""Window nesting followed when looking for the target; real trees are a few levels deep."""
URI_LIST = "text/uri-list"
TYPES = (URI_LIST, "text/plain")
ACTIONS = {"XdndActionCopy": "copy", "XdndActionMove": "move", "XdndActionLink": "link",
           "XdndActionPrivate": "private", "XdndActionAsk": "ask"}
MESSAGES = ("XdndAware", "XdndProxy", "XdndEnter", "XdndPosition", "XdndStatus", "XdndLeave", "XdndDrop",
            "XdndFinished", "XdndSelection", "SANDBOX_DESKTOP_DRAG_TIME", *TYPES, *ACTIONS)


class PathNotFound(UnusableValue):
    """A path the request names (`paths[i]` of a drop, `path` of a file dialog) does not exist."""

    code = ProblemCode.PATH_NOT_FOUND


class NoDropTarget(DesktopError):
    code = ProblemCode.NO_DROP_TARGET


class DropRefused(DesktopError):
    code = ProblemCode.DROP_REFUSED


class DropPhase(enum.Enum):
    QUEUED = "queued"
    STAMPING = "stamping"
    """Waiting for the server timestamp that XdndSelection is owned with."""
    POSITIONED = "positioned"
    """XdndEnter and XdndPosition sent; waiting for XdndStatus."""
    DROPPED = "dropped"
    """XdndDrop sent; waiting for XdndFinished."""


@dataclass(frozen=True)
class DropTarget:
    window: int
    """The XdndAware window: the `window` of every message."""
    proxy: int
    """Where the messages go: its XdndProxy, or the window itself."""
    version: int


@dataclass(frozen=True)
class DropResult:
    target: DropTarget
    action: str
    """What the target did: `copy` (asked for), or `move`, `link`, `private` if it chose so."""
    uris: tuple[str, ...]


@dataclass
class _Drop:
    uris: tuple[str, ...]
    x: int
    y: int
    future: Future[DropResult]
    phase: DropPhase = DropPhase.QUEUED
    target: DropTarget | None = None
    stamp: int = X.CurrentTime
    deadline: float = float("inf")
    positions: int = 0
    first_position: float = 0.0
    reposition_at: float | None = None
    """When to ask a refusing target again (None: not waiting to)."""
    action: int = X.NONE


class DragSource:
    """Drops files at points, one at a time, on the clipboard thread's connection."""

    def __init__(self, display: Display, atoms: Atoms, transfer_timeout: float) -> None:
        self._display = display
        self._root = display.screen().root
        self._atom = {name: display.intern_atom(name) for name in MESSAGES}
        self._action_names = {self._atom[name]: word for name, word in ACTIONS.items()}
        # Unmapped and input-only, like the clipboard's: the source window targets answer to.
        self.window: Window = self._root.create_window(
            0, 0, 1, 1, 0, X.CopyFromParent, X.InputOnly, X.CopyFromParent, event_mask=X.PropertyChangeMask)
        self.window.set_wm_name("sandbox-desktop drag source")
        self._owner = SelectionOwner(display, self.window, atoms, transfer_timeout)
        self._drops: deque[_Drop] = deque()

    # -- what the clipboard thread calls -------------------------------------------------------------

    def drop(self, uris: tuple[str, ...], x: int, y: int, future: Future[DropResult]) -> None:
        """Queue a drop of `uris` at root (x, y); `future` resolves when the target has finished."""
        self._drops.append(_Drop(uris, x, y, future))
        if len(self._drops) == 1:
            self._start()

    def consume(self, ev: Any) -> bool:
        """Handle `ev` if it is the drag's; True when nobody else should see it."""
        mine = getattr(getattr(ev, "window", None), "id", None) == self.window.id
        if ev.type == X.ClientMessage and mine:
            self._on_message(ev)
        elif ev.type == X.SelectionRequest and ev.owner.id == self.window.id:
            self._owner.handle_request(ev)
        elif ev.type == X.SelectionClear and mine:
            self._owner.handle_clear(ev)
        elif ev.type == X.PropertyNotify and mine:
            if ev.atom == self._atom["SANDBOX_DESKTOP_DRAG_TIME"]:
                self._on_stamp(ev.time)
        elif ev.type == X.PropertyNotify:  # a requestor taking INCR chunks: ours, or the clipboard's
            self._owner.handle_property(ev)
            return False
        elif ev.type == X.DestroyNotify:
            self._owner.handle_destroy(ev)
            return False
        else:
            return False
        return True

    def expire(self, now: float) -> None:
        self._owner.expire(now)
        current = self._drops[0] if self._drops else None
        if current is not None and current.reposition_at is not None and current.reposition_at <= now:
            self._position(current)
        if current is None or current.deadline > now or current.target is None:
            return
        window = f"window 0x{current.target.window:x}"
        match current.phase:
            case DropPhase.POSITIONED:
                self._send(current, "XdndLeave", [])
                self._end(error=Timeout(f"the drop target ({window}) did not answer XdndPosition within "
                                        f"{STATUS_TIMEOUT_S:g} s; the application may be busy or hung"))
            case DropPhase.DROPPED:
                self._end(error=Timeout(f"the drop target ({window}) took the drop but did not send "
                                        f"XdndFinished within {FINISH_TIMEOUT_S:g} s; the application may be busy "
                                        "or hung"))
            case DropPhase.QUEUED | DropPhase.STAMPING:
                self._end(error=Timeout("the X server did not stamp the drop's selection in time"))

    def next_deadline(self) -> float | None:
        current = self._drops[0] if self._drops else None
        ours = (current.deadline, current.reposition_at) if current is not None else ()
        deadlines = [d for d in (self._owner.next_deadline(), *ours) if d is not None and d != float("inf")]
        return min(deadlines, default=None)

    def fail_all(self, error: BaseException) -> None:
        for drop in self._drops:
            resolve(drop.future, error=error)
        self._drops.clear()

    def close(self) -> None:
        self._owner.release()
        self.window.destroy()

    # -- the protocol --------------------------------------------------------------------------------

    def _start(self) -> None:
        """Begin the drop at the head of the queue: find its target, then ask for a timestamp."""
        while self._drops and self._drops[0].future.cancelled():
            self._drops.popleft()
        if not self._drops:
            return
        drop = self._drops[0]
        try:
            drop.target = self.find_target(drop.x, drop.y)
        except DesktopError as exc:
            self._end(error=exc)  # which starts the next one
            return
        self._set_phase(drop, DropPhase.STAMPING, STATUS_TIMEOUT_S)
        self.window.change_property(self._atom["SANDBOX_DESKTOP_DRAG_TIME"], Xatom.INTEGER, 8, b"",
                                    X.PropModeAppend)

    def find_target(self, x: int, y: int) -> DropTarget:
        """The XdndAware window under root (x, y): the first one found descending from the root."""
        parent = self._root
        for _ in range(MAX_DEPTH):
            child = parent.translate_coords(self._root, x, y).child
            if not child:
                break
            target = self._aware(child)
            if target is not None:
                return target
            parent = child
        raise NoDropTarget(f"no window at ({x}, {y}) takes drops: none under the point has XdndAware "
                           f"(version {MIN_VERSION} or later); the point may be on the desktop background or on "
                           "an application that does not accept dropped files")

    def _aware(self, window: Window) -> DropTarget | None:
        proxy = self._window_property(window, "XdndProxy")
        # A proxy counts only if it names itself as its proxy (the spec's guard against a stale property).
        if proxy is not None and self._window_property(self._display.create_resource_object("window", proxy),
                                                       "XdndProxy") != proxy:
            proxy = None
        holder = self._display.create_resource_object("window", proxy) if proxy is not None else window
        reply = holder.get_property(self._atom["XdndAware"], X.AnyPropertyType, 0, 1)
        if reply is None or not reply.value or reply.value[0] < MIN_VERSION:
            return None
        return DropTarget(window.id, holder.id, min(int(reply.value[0]), XDND_VERSION))

    def _window_property(self, window: Window, name: str) -> int | None:
        reply = window.get_property(self._atom[name], Xatom.WINDOW, 0, 1)
        return int(reply.value[0]) if reply is not None and reply.format == 32 and reply.value else None

    def _on_stamp(self, stamp: int) -> None:
        drop = self._drops[0] if self._drops else None
        if drop is None or drop.phase != DropPhase.STAMPING or drop.target is None:
            return
        uri_list = "".join(f"{uri}\r\n" for uri in drop.uris)
        try:
            self._owner.own((self._atom["XdndSelection"],),
                            Content(uri_list, {URI_LIST: uri_list.encode()}), stamp)
        except DesktopError as exc:
            self._end(error=exc)
            return
        drop.stamp = stamp
        types = [self._atom[t] for t in TYPES]
        self._send(drop, "XdndEnter", [drop.target.version << 24, *types, 0][:4])
        self._position(drop)

    def _position(self, drop: _Drop) -> None:
        drop.positions += 1
        drop.first_position = drop.first_position or time.monotonic()
        drop.reposition_at = None
        self._set_phase(drop, DropPhase.POSITIONED, STATUS_TIMEOUT_S)
        self._send(drop, "XdndPosition", [0, (drop.x << 16) | drop.y, drop.stamp, self._atom["XdndActionCopy"]])

    def _on_message(self, ev: Any) -> None:
        drop = self._drops[0] if self._drops else None
        kind = ev.client_type
        data = ev.data[1]
        if drop is None or drop.target is None or data[0] not in (drop.target.window, drop.target.proxy):
            return  # a late answer to a drop that already ended
        if kind == self._atom["XdndStatus"] and drop.phase == DropPhase.POSITIONED:
            if data[1] & 1:
                drop.action = data[4] if drop.target.version >= 2 else self._atom["XdndActionCopy"]
                self._set_phase(drop, DropPhase.DROPPED, FINISH_TIMEOUT_S)
                self._send(drop, "XdndDrop", [0, drop.stamp])
            elif time.monotonic() - drop.first_position < REFUSAL_GRACE_S:
                drop.reposition_at = time.monotonic() + REPOSITION_S
            else:
                self._send(drop, "XdndLeave", [])
                self._end(error=DropRefused(
                    f"the window 0x{drop.target.window:x} at ({drop.x}, {drop.y}) refused the drop (XdndStatus "
                    f"without accept for {REFUSAL_GRACE_S:g} s): the spot under the point does not take files"))
        elif kind == self._atom["XdndFinished"] and drop.phase == DropPhase.DROPPED:
            if drop.target.version >= 5:
                if not data[1] & 1:
                    self._end(error=DropRefused(f"the window 0x{drop.target.window:x} took the drop but "
                                                "reported that it failed (XdndFinished without success)"))
                    return
                drop.action = data[2] or drop.action
            action = self._action_names.get(drop.action, "copy")
            self._end(DropResult(drop.target, action, drop.uris))

    def _set_phase(self, drop: _Drop, phase: DropPhase, timeout: float) -> None:
        """The one place a drop changes phase: each phase has its own deadline for the target's answer."""
        if phase != drop.phase:
            logger.debug("drop at (%d, %d): %s -> %s", drop.x, drop.y, drop.phase.value, phase.value)
        drop.phase = phase
        drop.deadline = time.monotonic() + timeout

    def _send(self, drop: _Drop, message: str, rest: list[int]) -> None:
        """An XDND message to the target (through its proxy): our window first, then `rest`, zero-padded."""
        assert drop.target is not None
        data = [self.window.id, *rest, 0, 0, 0, 0][:5]
        ev = event.ClientMessage(window=drop.target.window, client_type=self._atom[message], data=(32, data))
        self._display.create_resource_object("window", drop.target.proxy).send_event(ev, event_mask=0)

    def _end(self, result: DropResult | None = None, error: BaseException | None = None) -> None:
        """Finish the current drop, give XdndSelection up, and start the next one."""
        drop = self._drops.popleft()
        self._owner.release()
        if error is not None:
            logger.info("drop at (%d, %d) failed: %s", drop.x, drop.y, error)
        resolve(drop.future, result, error)
        self._start()
