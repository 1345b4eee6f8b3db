"""A raw job run on the event loop, over the X connection of an idle X thread (desktop/x11/thread.py).

Handing a job to the X thread and its answer back costs two wake-ups of a sleeping thread and the GIL passed
between two threads twice: ~110 us of a move's ~250 us in the server, measured (docs/benchmarks.md, "Peers"), and
as much CPU. The jobs of pointer and key actions are short (one write, one reply: desktop/input/pointer.py,
key_events.py), so when the thread has nothing queued and nothing running the loop borrows its connection and runs
the job itself,
without ever blocking: each exchange is written with MSG_DONTWAIT (the rest, if the socket is full, when it is
writable again) and its replies are read by a reader callback as they arrive, parsed by the same code as the
thread's (`raw.Replies`). So a slow or stopped X server holds the job, never the loop, as it held the thread.

The job runs to its end from the callbacks, whether or not anyone still awaits it: an exchange is never left half
read (the connection's next bytes would be its replies). While it runs the thread does not touch the connection
(`release` ends the loan); a job queued for the thread meanwhile waits for it. A lost connection is told to
`retry`, which runs the job again on the thread (reconnecting first), as a job on the thread is retried.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from Xlib.display import Display

from desktop.x11 import raw as xraw

T = TypeVar("T")

LOST = (ConnectionError, OSError)
"""What a lost connection raises here: the X server went away (or its socket failed)."""


def start(display: Display, job: Callable[..., xraw.RawJob[T]], args: tuple[Any, ...], release: Callable[[], None],
          retry: Callable[[], asyncio.Future[T]]) -> asyncio.Future[T]:
    """Run `job(display, *args)` from the event loop on `display`, lent by its idle thread; the future of its result.

    `release` ends the loan (the job's last exchange is answered, or it failed); `retry` runs the job on the
    thread after the connection was lost here."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _Borrowed(loop, display, job(display, *args), future, release, retry).advance(None)
    return future


class _Borrowed(Generic[T]):
    """One job's exchanges on the borrowed connection: written, then answered through reader callbacks."""

    __slots__ = ("fd", "future", "job", "loop", "p", "release", "replies", "retry", "sock", "unsent")

    def __init__(self, loop: asyncio.AbstractEventLoop, display: Display, job: xraw.RawJob[T],
                 future: asyncio.Future[T], release: Callable[[], None],
                 retry: Callable[[], asyncio.Future[T]]) -> None:
        self.loop, self.job, self.future, self.release, self.retry = loop, job, future, release, retry
        self.p = display.display
        self.sock: socket.socket = self.p.socket
        self.fd = self.sock.fileno()
        self.replies: xraw.Replies | None = None
        self.unsent = b""

    def advance(self, answers: list[xraw.Answer] | None) -> None:
        """Give the job the answers of its last exchange; write its next one, or finish with what it returns."""
        while True:
            try:
                step = self.job.send(answers)  # type: ignore[arg-type]  # the first send starts it: None
            except StopIteration as stop:
                self.finish(stop.value, None)
                return
            except BaseException as exc:  # the job's own failure (a bug): the awaiting caller gets it
                self.finish(None, exc)
                return
            data, self.replies = xraw.written(self.p, step.requests, step.answered)
            self.unsent = data
            flushed = self.flush()
            if flushed is None:
                return
            if not flushed:  # the socket is full (the server is behind): the rest once it drains
                self.loop.add_writer(self.fd, self.writable)
                return
            if not self.replies.done:
                self.loop.add_reader(self.fd, self.readable)
                return
            answers = self.replies.finish(self.p)

    def flush(self) -> bool | None:
        """Write what is unsent without blocking: True once all of it is written, False while some is left, None
        when the connection was lost (the job handed to `lost`)."""
        try:
            sent = self.sock.send(self.unsent, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except LOST as exc:
            self.lost(exc)
            return None
        self.unsent = self.unsent[sent:]
        return not self.unsent

    def writable(self) -> None:
        if not self.flush():
            return
        self.loop.remove_writer(self.fd)
        assert self.replies is not None
        if self.replies.done:
            self.advance(self.replies.finish(self.p))
        else:
            self.loop.add_reader(self.fd, self.readable)

    def readable(self) -> None:
        try:
            piece = self.sock.recv(xraw.RECEIVE_BYTES, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except LOST as exc:
            self.lost(exc)
            return
        if not piece:
            self.lost(ConnectionResetError("the X server closed the connection"))
            return
        replies = self.replies
        assert replies is not None
        replies.feed(piece)
        if replies.done:
            self.loop.remove_reader(self.fd)
            self.advance(replies.finish(self.p))

    def lost(self, exc: BaseException) -> None:
        """The connection failed under the job: end the loan, and run the job again on the thread."""
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.job.close()
        self.release()
        again = self.retry()
        again.add_done_callback(self._copy)

    def _copy(self, again: asyncio.Future[T]) -> None:
        if self.future.done():  # nobody awaits it any more; its error, if any, counts as seen
            if not again.cancelled():
                again.exception()
            return
        if again.cancelled():
            self.future.cancel()
        elif (error := again.exception()) is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(again.result())

    def finish(self, result: Any, error: BaseException | None) -> None:
        self.release()
        if self.future.done():  # the caller stopped waiting (cancelled): the job still ran to its end
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)
