"""A thread asleep on its X connection until X sends something, its deadline comes, or another thread
wakes it: the clipboard thread (desktop/clipboard/owner.py) and the X watcher (desktop/events/xwatch.py).

One eventfd is the wake-up, and the sleep is a poll() object, which holds no descriptor: one descriptor
per thread, where a pipe's two ends and an epoll selector held three. Every desktop has both threads, and
each descriptor a desktop holds is one fewer desktops a server's limit allows (docs/operations.md,
"Descriptors"); poll() also takes any descriptor number, as select() would not."""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading


class Wakeup:
    def __init__(self) -> None:
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._closing = threading.Lock()
        """`wake` comes from other threads, also after the owner closed it (a watcher whose connection was lost is
        still told to stop): the number, once closed, may be another file's, into which a write would go."""
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)

    def watch(self, fd: int) -> None:
        """Also end a sleep when `fd` (the thread's X socket) has something to read."""
        self._poller.register(fd, select.POLLIN)

    def wake(self) -> None:
        """From any thread: end the current sleep, or the next one at once."""
        with self._closing, contextlib.suppress(BlockingIOError):  # a full counter already means "wake up"
            if self._fd >= 0:  # closed: the thread has ended
                os.eventfd_write(self._fd, 1)

    def clear(self) -> None:
        """Forget the wake-ups so far (the thread is about to look at everything anyway)."""
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._fd)

    def sleep(self, timeout: float | None) -> None:
        """Until a wake-up, something to read on a watched descriptor, or `timeout` seconds (None: no limit)."""
        # Rounded up: a deadline 0.4 ms away must not become a busy loop of zero-timeout polls.
        self._poller.poll(None if timeout is None else math.ceil(max(0.0, timeout) * 1000))

    def close(self) -> None:
        with self._closing:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
