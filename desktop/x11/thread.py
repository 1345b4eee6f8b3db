"""One thread that owns one X connection; every call runs there, in arrival order, except raw jobs started
while it is idle, which the event loop runs on the lent connection (`XThread.raw`, desktop/x11/on_loop.py).

python-xlib objects are not thread-safe, so each connection lives in exactly one thread and the
event loop hands work to it (docs/architecture.md). A lost connection (the X server restarted) is dropped
and the job tried once more on a new one (desktop/x11/reconnect.py).

Who may touch what, and why:

- An `XThread` runs short jobs on its connection and nothing else. Everything of a desktop's
  control connection shares it: input (mouse, keyboard, window focus/move/resize), the status
  document (`Desktop.snapshot`), window listing, pointer position, readiness. A job therefore
  never sleeps or polls with a sleep: anything queued behind it would wait as long (a 5 s drag
  done as one job held `GET /v1/desktop/status` for 5 s). A job returns as soon as its X requests
  are sent and answered; when an action must wait (a drag's pace, the gap of a double click, the
  window manager applying focus or geometry, the pointer settling) the waiting is an
  `await asyncio.sleep` on the event loop between jobs, so other jobs run in the gaps.
- Once actions yield between their jobs, the single thread no longer keeps one action's events
  from landing in the middle of another's. `XThread.input` (an `InputLock`) restores that: every
  input action (REST mouse, keyboard and window actions, a batch's steps, the live view's events)
  holds it for its whole run, so a click sent during a drag is applied after the drag's release.
  Reads (status, window listing, pointer position) and features with their own connections
  (screenshots, the capture loop, the clipboard) never take it.
- Threads with a connection of their own that serve no queue (the capture loop of
  desktop/screen/frames.py pacing its ticks, the clipboard owner of desktop/clipboard/owner.py waiting in
  select for events or a wake-up) block only themselves while they wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.ext import randr as xrandr
from Xlib.protocol import display as xprotocol

from desktop.core.errors import DesktopError, DesktopInactive
from desktop.x11 import mapping, on_loop
from desktop.x11 import raw as xraw
from desktop.x11.reconnect import ReconnectOnce, not_answering

# python-xlib 0.33 keeps the unparsed rest of its receive buffer in a `bytesview` that has no buffer
# protocol, and `bytes(view)` then copies it one `__getitem__` call per byte: about 0.3 s per MB of a
# large reply received in pieces. Teaching it `__bytes__` makes that copy a memcpy, for every connection.
# Done here, where every connection of the service is opened.
if not hasattr(xprotocol.bytesview, "__bytes__"):
    xprotocol.bytesview.__bytes__ = lambda self: self.view.tobytes()

# python-xlib 0.33 declares RandR's errors (BadRROutput, BadRRCrtc, BadRRMode) as plain Exceptions that
# cannot be built from an error packet: the first such error crashed inside the reader and left the
# connection locked, hanging its thread. As XErrors they are raised to the caller like any other X error.
# Done before any connection is opened: the extension registers them when a display connects.
for _name in ("BadRROutputError", "BadRRCrtcError", "BadRRModeError"):
    if not issubclass(getattr(xrandr, _name), xerror.XError):
        setattr(xrandr, _name, type(_name, (xerror.XError,), {}))

T = TypeVar("T")
logger = logging.getLogger("sandbox_desktop.x")

# Errors that mean the connection itself is gone, not that one request failed.
_CONNECTION_ERRORS = (xerror.ConnectionClosedError, xerror.DisplayConnectionError, BrokenPipeError,
                      ConnectionResetError, OSError)


def open_display(name: str) -> xdisplay.Display:
    """Connect to an X display; raises DisplayConnectionError when it does not answer."""
    display = xdisplay.Display(name)
    for atom in xraw.JOB_ATOMS:
        display.get_atom(atom)
    return display


class InputLock:
    """The lock that orders input on one desktop; the task holding it may take it again.

    Re-entry is what lets a batch hold it for all its steps while each step calls the same mouse
    and keyboard methods a single REST request calls, which take it too. Waiters get it in
    arrival order (asyncio.Lock is FIFO).
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        self._depth = 0

    def held(self) -> bool:
        """Whether the current task holds it."""
        return self._owner is not None and self._owner is asyncio.current_task()

    async def __aenter__(self) -> None:
        if not self.held():
            await self._lock.acquire()
            self._owner = asyncio.current_task()
        self._depth += 1

    async def __aexit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


class _Stop:
    """The last item of a queue: close the connection, then end the thread."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done


class XThread:
    """A thread with its own `Xlib.display.Display` that runs jobs in arrival order, and the desktop's input lock.

    The hop is as light as it can be (a click's whole round trip through it was a tenth of its time with a
    ThreadPoolExecutor): the loop puts a job and the asyncio future it resolves on a `SimpleQueue`; the thread
    runs it and hands the outcome back with one `call_soon_threadsafe`.
    """

    def __init__(self, display_name: str, name: str) -> None:
        self.display_name = display_name
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any]] | _Stop] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._display: xdisplay.Display | None = None
        self._closed = False
        self._reconnect = ReconnectOnce(_CONNECTION_ERRORS, not_answering(display_name), drop=self._drop)
        self._lent = threading.Lock()
        """Held by the thread while it runs a job, and by the event loop while a job of `raw` runs on the loop."""
        self._queued = 0
        """Jobs handed to the thread (counted by the event loop only)..."""
        self._done = 0
        """... and jobs it has finished (counted by the thread only): equal, the thread is idle."""
        self._stale = False
        self.input = InputLock()
        """Held by every input action for its whole run (see the module docstring)."""

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(display, *args)` in the owning thread and return its result."""
        return await self.submit(fn, *args)

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Queue `fn(display, *args)` at once, not when awaited; the future of its result.

        For the clean-up of an action (a drag's release) that must happen although the request was
        cancelled: `await asyncio.shield(x.submit(...))` runs it even if the caller is cancelled
        again while it waits (cancelling the future itself would drop a job not started yet).
        """
        if self._closed:
            raise DesktopInactive("the desktop stopped")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queued += 1
        self._jobs.put((fn, args, future))
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=f"x-{self.name}", daemon=True)
            self._thread.start()
        return future

    async def drain(self, timeout: float) -> None:
        """Until every job given so far (on the thread, or borrowed by the loop) is answered, for at most `timeout`
        seconds."""
        with contextlib.suppress(DesktopError, TimeoutError):  # stopped, or its X server gone: nothing to wait for
            await asyncio.wait_for(self.submit(_nothing), timeout)

    def raw(self, job: Callable[..., xraw.RawJob[T]], *args: Any) -> asyncio.Future[T]:
        """Start the raw job `job(display, *args)` at once; the future of its result.

        On the event loop itself while the thread is idle (nothing queued, nothing running, python-xlib idle on
        the connection): the connection is lent to the loop for the job (desktop/x11/on_loop.py says why and
        how); otherwise on the thread, behind what is queued. Either way it runs even if the caller stops
        waiting, as `submit` does."""
        display = self._display
        if display is not None and not self._closed and self._queued == self._done and xraw.borrowable(display) \
                and self._lent.acquire(blocking=False):
            return on_loop.start(display, job, args, self._lent.release, lambda: self._retry(job, args))
        return self.submit(xraw.run_job, job, *args)

    def _retry(self, job: Callable[..., xraw.RawJob[T]], args: tuple[Any, ...]) -> asyncio.Future[T]:
        """A lent connection was lost under a job: the job again, on the thread, on a new connection."""
        self._stale = True
        return self.submit(xraw.run_job, job, *args)

    def _serve(self) -> None:
        run, attempt = self._reconnect.run, self._attempt  # bound once: nothing allocated per job for them
        while True:
            job = self._jobs.get()
            with self._lent:  # not while the event loop runs a job on the connection
                if isinstance(job, _Stop):
                    self._drop()
                    self._done += 1
                    _resolve(job.done, None, None)
                    return
                fn, args, future = job
                if future.cancelled():  # given up on before it started: dropped, as an executor would
                    result, error = None, None
                else:
                    try:
                        result, error = run(attempt, fn, args), None
                    except BaseException as exc:  # handed to the awaiting task, as an executor would
                        result, error = None, exc
            self._done += 1  # after the loan is free again: equal counts let the loop borrow
            if not future.cancelled():
                _resolve(future, result, error)

    def _attempt(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        if self._stale:  # lost under a job the event loop ran: never reused, however it looks
            self._stale = False
            self._drop()
        display = self._display
        if display is None:
            display = self._display = open_display(self.display_name)
        result = fn(display, *args)
        if not xraw.quiet(display):
            # Nothing on these connections reads events, but the server still sends some (MappingNotify after every
            # keymap change): without this they would pile up in python-xlib's queue forever.
            mapping.drain(display)
        return result

    def _drop(self) -> None:
        if self._display is not None:
            with contextlib.suppress(Exception):  # the socket may already be broken
                self._display.close()
            self._display = None

    async def close(self) -> None:
        """Close the connection in its own thread and stop the thread; later calls are refused."""
        self._closed = True  # before the last job: a call queued after it would reopen the connection
        if self._thread is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued += 1
        self._jobs.put(_Stop(done))
        await done


def _nothing(display: xdisplay.Display) -> None:
    """A job that does nothing: answered once every job before it is (`drain`)."""


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """From the X thread: settle `future` on its own loop (unless that loop is gone)."""
    loop = future.get_loop()
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
