"""The desktop clipboard: X selections owned and read by one dedicated thread per display.

A selection exists only while its owner answers requests for it, so the clipboard thread keeps its
own connection and a hidden window, and sleeps on the X socket plus a wake-up (desktop/x11/wakeup.py; no polling).
The event loop hands it commands and awaits futures: a write answers as soon as the server confirms
our ownership, and no call ever waits on another client's transfer. When the X server goes away
the thread ends; the next call starts a new one (the old value went with the old server). The same
thread, on the same connection, is the drag source of file drops (desktop/x11/xdnd.py), fed every event first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display

from desktop.core.errors import DesktopError, DesktopFailed, DesktopInactive, invalid_action
from desktop.x11.reconnect import CONNECTION_LOST, ReconnectOnce, not_answering
from desktop.x11.selection import (
    PNG,
    Atoms,
    Content,
    ReadFormat,
    SelectionOwner,
    SelectionReader,
    XSelection,
    resolve,
)
from desktop.x11.session import Session
from desktop.x11.wakeup import Wakeup
from desktop.x11.xdnd import DragSource, DropResult
from sandbox_desktop_wire.enums import ClipboardSelection

T = TypeVar("T")
logger = logging.getLogger("sandbox_desktop.clipboard")

SELECTIONS: dict[ClipboardSelection, tuple[XSelection, ...]] = {
    ClipboardSelection.CLIPBOARD: (XSelection.CLIPBOARD,),
    ClipboardSelection.PRIMARY: (XSelection.PRIMARY,),
    ClipboardSelection.BOTH: (XSelection.CLIPBOARD, XSelection.PRIMARY),
}
"""The X selections each of the wire's selections means."""


class ConnectionLost(Exception):
    """The clipboard thread's X connection broke (the X server restarted or went away)."""


def parse_selection(selection: str | None, *, location: str, allow_both: bool) -> ClipboardSelection:
    """The wire's selection (`clipboard` when absent); anything else is a 400 naming `selection`."""
    if selection is None:
        return ClipboardSelection.CLIPBOARD
    allowed = tuple(SELECTIONS) if allow_both else (ClipboardSelection.CLIPBOARD, ClipboardSelection.PRIMARY)
    if selection not in allowed:
        hint = " (`both` is only meaningful when writing)" if selection == ClipboardSelection.BOTH else ""
        message = f"selection must be {' or '.join(f'`{a}`' for a in allowed)}, not `{selection}`{hint}"
        raise invalid_action(message, "selection", location)
    return ClipboardSelection(selection)


class _Connection:
    """The thread's X side: its own Display, the hidden window and both halves of the protocol."""

    def __init__(self, name: str, read_timeout: float, transfer_timeout: float) -> None:
        self.display = Display(name)
        try:
            self.display.set_error_handler(self._on_x_error)
            self.atoms = Atoms.intern(self.display)
            # Unmapped and input-only: it owns selections and receives properties, and is never seen.
            self.window = self.display.screen().root.create_window(
                0, 0, 1, 1, 0, X.CopyFromParent, X.InputOnly, X.CopyFromParent, event_mask=X.PropertyChangeMask)
            self.window.set_wm_name("sandbox-desktop clipboard")
            self.owner = SelectionOwner(self.display, self.window, self.atoms, transfer_timeout)
            self.reader = SelectionReader(self.display, self.window, self.atoms, read_timeout)
            self.drags = DragSource(self.display, self.atoms, transfer_timeout)  # file drops (desktop/x11/xdnd.py)
            self.display.flush()
        except BaseException:
            self.display.close()
            raise
        self._pending_sets: deque[tuple[tuple[int, ...], Content, Future[None]]] = deque()

    def settle(self) -> None:
        """Send every queued request and handle every received event, so sleeping cannot lose one."""
        for _ in range(100_000):  # events keep coming only while transfers progress; bounded anyway
            self.display.flush()
            if not self.display.pending_events():
                return
            while self.display.pending_events():
                self._dispatch(self.display.next_event())

    def expire(self) -> float | None:
        """Time out stalled transfers; returns the next deadline, if any."""
        now = time.monotonic()
        self.owner.expire(now)
        self.reader.expire(now)
        self.drags.expire(now)
        deadlines = [d for d in (self.owner.next_deadline(), self.reader.next_deadline(),
                                 self.drags.next_deadline()) if d is not None]
        return min(deadlines, default=None)

    def begin_set(self, selections: tuple[XSelection, ...], content: Content, future: Future[None]) -> None:
        # ICCCM wants a real server time for SetSelectionOwner: a zero-length append to our own
        # property makes the server stamp a PropertyNotify, which finishes the set (_finish_set).
        atoms = tuple(self.atoms[name] for name in selections)
        self._pending_sets.append((atoms, content, future))
        self.window.change_property(self.atoms.stamp, Xatom.INTEGER, 8, b"", X.PropModeAppend)

    def _finish_set(self, stamp: int) -> None:
        if not self._pending_sets:
            return
        selections, content, future = self._pending_sets.popleft()
        try:
            self.owner.own(selections, content, stamp)
        except DesktopError as exc:
            resolve(future, error=exc)
        else:
            resolve(future)

    def begin_get(self, selection: XSelection, future: Future[str]) -> None:
        atom = self.atoms[selection]
        value = self.owner.value(atom)
        if value is not None:  # ours: no round trip to ourselves
            resolve(future, value.text)
        else:
            self.reader.read(atom, selection, future)

    def begin_get_image(self, selection: XSelection, future: Future[bytes | None]) -> None:
        atom = self.atoms[selection]
        value = self.owner.value(atom)
        if value is not None:
            resolve(future, value.formats.get(self.atoms[PNG]))
        else:
            self.reader.read(atom, selection, future, ReadFormat.PNG)

    def _dispatch(self, ev: Any) -> None:
        try:
            if self.drags.consume(ev):
                return
            if ev.type == X.SelectionRequest:
                self.owner.handle_request(ev)
            elif ev.type == X.SelectionNotify:
                self.reader.handle_notify(ev)
            elif ev.type == X.SelectionClear:
                self.owner.handle_clear(ev)
            elif ev.type == X.PropertyNotify and ev.window.id == self.window.id:
                if ev.atom == self.atoms.stamp:
                    self._finish_set(ev.time)
                else:
                    self.reader.handle_property(ev)
            elif ev.type == X.PropertyNotify:
                self.owner.handle_property(ev)
            elif ev.type == X.DestroyNotify:
                self.owner.handle_destroy(ev)
        except xerror.XError as exc:  # a requestor vanished mid-request: its problem, not ours
            logger.debug("clipboard: X error while handling %s: %s", type(ev).__name__, exc)

    def _on_x_error(self, err: Any, request: Any) -> None:
        logger.debug("clipboard: asynchronous X error %s", err)

    def close(self, failure: BaseException, release: bool) -> None:
        """Fail what is pending; release the selections if the server is still there; disconnect."""
        for _, _, future in self._pending_sets:
            resolve(future, error=failure)
        self.reader.fail_all(failure)
        self.drags.fail_all(failure)
        with contextlib.suppress(Exception):  # the server may be on its way out
            if release:
                self.drags.close()
                self.owner.release()
                self.window.destroy()
            self.display.close()


Command = Callable[[_Connection], None]


class ClipboardThread:
    """The thread that owns one display's selections; commands arrive through a queue and a pipe."""

    def __init__(self, display_name: str, read_timeout: float, transfer_timeout: float) -> None:
        self.display_name = display_name
        self.ready: Future[None] = Future()
        self._timeouts = (read_timeout, transfer_timeout)
        self._commands: deque[tuple[Command, Future[Any]]] = deque()
        self._lock = threading.Lock()  # guards _closed against a submit racing the thread's exit
        self._closed = False
        self._stopping = False
        self._wakeup = Wakeup()
        self._thread = threading.Thread(target=self._run, name=f"clipboard{display_name}", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._closed

    def start(self) -> None:
        self._thread.start()

    def set(self, selections: tuple[XSelection, ...], content: Content) -> Future[None]:
        """Own `selections` with `content`; resolves once the server confirms the ownership."""
        future: Future[None] = Future()
        self._submit(lambda x: x.begin_set(selections, content, future), future)
        return future

    def get_image(self, selection: XSelection) -> Future[bytes | None]:
        """The `image/png` of `selection`, or None when its owner offers none (or nobody owns it)."""
        future: Future[bytes | None] = Future()
        self._submit(lambda x: x.begin_get_image(selection, future), future)
        return future

    def get(self, selection: XSelection) -> Future[str]:
        """The text of `selection`: ours directly, another client's through ConvertSelection."""
        future: Future[str] = Future()
        self._submit(lambda x: x.begin_get(selection, future), future)
        return future

    def drop(self, uris: tuple[str, ...], x: int, y: int) -> Future[DropResult]:
        """Drop `uris` on the window at root (x, y) with XDND; resolves once the target has finished."""
        future: Future[DropResult] = Future()
        self._submit(lambda c: c.drags.drop(uris, x, y, future), future)
        return future

    def stop(self) -> None:
        """Ask the thread to release its selections and end."""
        self._submit(lambda x: self._request_stop(), Future())

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _request_stop(self) -> None:
        self._stopping = True

    def _submit(self, command: Command, future: Future[Any]) -> None:
        with self._lock:
            if self._closed:
                future.set_exception(ConnectionLost(f"clipboard thread for {self.display_name} has ended"))
                return
            self._commands.append((command, future))
            self._wakeup.wake()

    def _run(self) -> None:
        try:
            x = _Connection(self.display_name, *self._timeouts)
        except Exception as exc:
            resolve(self.ready, error=exc)
            self._close(ConnectionLost(str(exc)))
            return
        resolve(self.ready)
        error: BaseException | None = None
        try:
            self._loop(x)
        except CONNECTION_LOST as exc:
            logger.info("clipboard connection to %s lost: %s", self.display_name, exc)
            error = ConnectionLost(str(exc))
        except Exception as exc:  # a bug: fail the callers rather than leave them waiting
            logger.exception("clipboard thread for %s failed", self.display_name)
            error = exc
        failure = error or DesktopInactive("the desktop stopped during the clipboard call")
        x.close(failure, release=error is None)
        self._close(failure)

    def _loop(self, x: _Connection) -> None:
        self._wakeup.watch(x.display.fileno())
        while True:
            self._wakeup.clear()
            self._run_commands(x)
            if self._stopping:
                return
            x.expire()
            x.settle()
            # Again: the events just handled may have set a nearer deadline (a drop's next XdndPosition).
            deadline = x.expire()
            x.display.flush()
            if x.display.pending_events():  # read while expiring waited on a reply: handle them at once
                deadline = time.monotonic()
            self._wakeup.sleep(None if deadline is None else deadline - time.monotonic())

    def _run_commands(self, x: _Connection) -> None:
        while self._commands:
            command, future = self._commands.popleft()
            try:
                command(x)
            except CONNECTION_LOST as exc:
                resolve(future, error=ConnectionLost(str(exc)))
                raise
            except Exception as exc:
                resolve(future, error=exc)

    def _close(self, failure: BaseException) -> None:
        """Fail the commands still queued and free the wake-up; later submits fail at once."""
        with self._lock:
            self._closed = True
            for _, future in self._commands:
                resolve(future, error=failure)
            self._commands.clear()
            self._wakeup.close()


class Clipboard:
    """The clipboard of the running desktop, served from one `ClipboardThread` per display.

    `read_timeout` bounds each step of reading another client's selection (504 `timeout` after it);
    `transfer_timeout` drops an INCR transfer whose requestor stopped taking chunks.
    """

    def __init__(self, read_timeout: float = 2.0, transfer_timeout: float = 5.0) -> None:
        self.read_timeout = read_timeout
        self.transfer_timeout = transfer_timeout
        self._thread: ClipboardThread | None = None
        self._lock = asyncio.Lock()

    async def set(self, session: Session, text: str | None,
                  selection: ClipboardSelection = ClipboardSelection.CLIPBOARD, image: bytes | None = None) -> None:
        """Own `selection` (clipboard, primary or both) with `text` and/or a PNG `image` until replaced or taken."""
        names = SELECTIONS[selection]
        content = Content(text, {PNG: image} if image is not None else {})
        await self._call(session.display, lambda thread: thread.set(names, content))

    async def get_image(self, session: Session,
                        selection: ClipboardSelection = ClipboardSelection.CLIPBOARD) -> bytes | None:
        """The PNG on `selection` (clipboard or primary); None when nothing there offers `image/png`."""
        (name,) = SELECTIONS[selection]
        return await self._call(session.display, lambda thread: thread.get_image(name))

    async def get(self, session: Session, selection: ClipboardSelection = ClipboardSelection.CLIPBOARD) -> str:
        """The text of `selection` (clipboard or primary); "" when nothing owns it."""
        (name,) = SELECTIONS[selection]
        return await self._call(session.display, lambda thread: thread.get(name))

    async def drop(self, session: Session, uris: tuple[str, ...], x: int, y: int) -> DropResult:
        """Drop `uris` (file:// URIs) on the application window at (x, y), as a file manager would."""
        return await self._call(session.display, lambda thread: thread.drop(uris, x, y))

    async def close(self) -> None:
        """Release the selections and end the thread (it starts again on the next call)."""
        async with self._lock:
            await self._retire()

    async def _call(self, display: str, command: Callable[[ClipboardThread], Future[T]]) -> T:
        # No drop: a thread whose connection broke has ended, and `_thread_for` starts a new one.
        policy = ReconnectOnce((ConnectionLost,), not_answering(display))
        return await policy.run_async(self._attempt, display, command)

    async def _attempt(self, display: str, command: Callable[[ClipboardThread], Future[T]]) -> T:
        return await asyncio.wrap_future(command(await self._thread_for(display)))

    async def _thread_for(self, display: str) -> ClipboardThread:
        async with self._lock:
            thread = self._thread
            if thread is not None and thread.alive and thread.display_name == display:
                return thread
            await self._retire()
            thread = ClipboardThread(display, self.read_timeout, self.transfer_timeout)
            thread.start()
            try:
                await asyncio.wrap_future(thread.ready)
            except Exception as exc:
                raise DesktopFailed(
                    f"cannot open X display {display} for the clipboard ({exc}); the desktop may be restarting",
                    retry_after=1,
                ) from exc
            self._thread = thread
            return thread

    async def _retire(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            await asyncio.to_thread(thread.join, 5.0)
