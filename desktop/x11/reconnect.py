"""Reconnect once: the one policy of every X connection the service keeps open.

A connection is lost when its X server goes away; the supervisor brings a crashed Xvfb back on the same display
(docs/architecture.md), so a new connection usually works at once. Every owner of a connection therefore does
the same with a call that found its connection lost: drop it (closing what is left), try once more on a new one,
and if that is lost too, drop it again and answer the owner's error, which tells the caller to retry shortly
(`Retry-After: 1`). Each owner says what a lost connection looks like to it, how it drops one, what it logs
before its second try and what it answers: `desktop/x11/thread.py` (the desktop's X thread),
`desktop/clipboard/owner.py`, `desktop/screen/screenshots.py` and `desktop/windows/capture.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from Xlib import error as xerror

from desktop.core.errors import DesktopFailed

T = TypeVar("T")

Errors = tuple[type[BaseException], ...]

CONNECTION_LOST = (xerror.ConnectionClosedError, xerror.DisplayError, OSError)
"""What python-xlib raises when a connection is gone or cannot be made: the server closed it, the display does not
answer, the socket failed."""


def not_answering(display: str) -> Callable[[BaseException], DesktopFailed]:
    """The answer of a connection whose display did not answer twice (the X thread's and the clipboard's)."""
    def failed(exc: BaseException) -> DesktopFailed:
        return DesktopFailed(f"X display {display} is not answering ({exc}); the desktop may be restarting",
                             retry_after=1)
    return failed


class ReconnectOnce:
    """Run a call; on a lost connection drop it and run the call once more; lost again, drop and fail.

    `lost`: the errors that mean the connection is gone; `kept`: errors among them that are the caller's
    (a window that does not exist), raised as they are. `drop` forgets the connection so that the next
    attempt opens a new one (None when the attempt finds a dead one by itself); `retrying` is told of the
    loss before the second attempt (a log line); `failed` builds the error raised after the second loss.
    Built once per connection owner where it can be: `run` allocates nothing of its own on the way of a
    call that succeeds (the X thread's jobs go through it; desktop/x11/thread.py).
    """

    __slots__ = ("drop", "failed", "kept", "lost", "retrying")

    def __init__(self, lost: Errors, failed: Callable[[BaseException], BaseException], *,
                 drop: Callable[[], object] | None = None, retrying: Callable[[BaseException], object] | None = None,
                 kept: Errors = ()) -> None:
        self.lost = lost
        self.kept = kept
        self.drop = drop
        self.retrying = retrying
        self.failed = failed

    def run(self, attempt: Callable[..., T], *args: Any) -> T:
        """`attempt(*args)`, reconnecting once."""
        try:
            return attempt(*args)
        except self.kept:
            raise
        except self.lost as exc:
            self._lost_first(exc)
        try:
            return attempt(*args)
        except self.kept:
            raise
        except self.lost as exc:
            raise self._lost_again(exc) from exc

    async def run_async(self, attempt: Callable[..., Awaitable[T]], *args: Any) -> T:
        """`await attempt(*args)`, reconnecting once (`run` on the event loop)."""
        try:
            return await attempt(*args)
        except self.kept:
            raise
        except self.lost as exc:
            self._lost_first(exc)
        try:
            return await attempt(*args)
        except self.kept:
            raise
        except self.lost as exc:
            raise self._lost_again(exc) from exc

    def _lost_first(self, exc: BaseException) -> None:
        if self.drop is not None:
            self.drop()
        if self.retrying is not None:
            self.retrying(exc)

    def _lost_again(self, exc: BaseException) -> BaseException:
        if self.drop is not None:
            self.drop()
        return self.failed(exc)
