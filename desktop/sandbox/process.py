"""A program running in a sandbox, as the server sees it: two pids, a pidfd, and its exit.

Inside its pid namespace the program has a pid of its own (`sandbox_pid`: what it, its windows'
`_NET_WM_PID` and every other program of the desktop see); the server sees it under another
(`pid`, read off the pidfd the init sent). Signals go through the pidfd or, for its whole process
group, to `pid`: the group's id as the server's namespace numbers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable

from desktop.sandbox import linux

logger = logging.getLogger("sandbox_desktop.sandbox")

EXIT_RECORD_WAIT_S = 60.0
"""How long a readable pidfd may go without its exit recorded: its parent in the sandbox always reaps it, but a
desktop held to a small CPU share (limits.cpu) may take a while to."""


class SandboxedProcess:
    def __init__(self, pidfd: int, sandbox_pid: int) -> None:
        self._pidfd: int | None = pidfd
        self.sandbox_pid = sandbox_pid
        pid = linux.pidfd_pid(pidfd)
        if pid is None:  # gone already, before we could look: its exit report is on its way
            pid = -sandbox_pid
        self.pid = pid
        self.returncode: int | None = None
        """The exit code, or minus the signal number, once it exited."""
        self.exited = asyncio.Event()
        self.exited_at_ms: int | None = None
        self.callbacks: list[Callable[[], None]] = []
        self._watched: asyncio.AbstractEventLoop | None = None
        self._check: Callable[[], None] | None = None

    @property
    def pidfd(self) -> int:
        if self._pidfd is None:
            raise ProcessLookupError(self.sandbox_pid)
        return self._pidfd

    def watch_exit(self) -> None:
        """Learn its exit off its pidfd (PIDFD_INFO_EXIT), where no process of the sandbox reports it (an init
        that is a reaper only). The pidfd turns readable at the exit, but the kernel records the exit only once
        its parent has reaped it: at once where that is the init (SIGCHLD ignored), on the next turn of its loop
        where it is the serving process that started it, which the desktop's own CPU limit may hold back."""
        loop = asyncio.get_running_loop()
        fd = self.pidfd
        deadline = time.monotonic() + EXIT_RECORD_WAIT_S
        pause = 0.001

        def readable() -> None:
            nonlocal pause
            if self._pidfd != fd:  # ended another way (the sandbox was closed)
                return
            loop.remove_reader(fd)
            try:
                status = linux.pidfd_exit_status(fd)
            except OSError as exc:  # not on a kernel that passed the zygote's trial
                logger.warning("the exit of process %s cannot be read off its pidfd: %s", self.pid, exc)
                self.ended(9)
                return
            if status is None and time.monotonic() < deadline:
                loop.call_later(pause, readable)
                pause = min(pause * 2, 0.05)
                return
            if status is None:
                logger.warning("process %s exited and was not reaped in %.0f s: counted as killed", self.pid,
                               EXIT_RECORD_WAIT_S)
            self.ended(9 if status is None else status)

        self._watched = loop
        self._check = readable
        loop.add_reader(fd, readable)

    def check_exit(self) -> None:
        """Read the exit off the pidfd now (its parent just said it reaped it), if still watched."""
        if self._check is not None and self.returncode is None:
            self._check()

    def ended(self, status: int) -> None:
        """The init reported the exit (`status` as waitpid(2) gives it)."""
        if self.exited.is_set():
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        self.exited_at_ms = int(time.time() * 1000)
        self.exited.set()
        self._release()
        for callback in self.callbacks:
            try:
                callback()
            except Exception:
                logger.exception("exit callback %r failed", callback)

    def send_signal(self, sig: int) -> bool:
        """Signal the program itself; False once it is gone."""
        if self._pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except ProcessLookupError:
            return False
        return True

    async def gone(self, timeout: float) -> bool:
        """Wait until the program has exited, up to `timeout` seconds (its pidfd turns readable then; for a
        namespace's init, only once the kernel has killed and reaped every other process of it). False on
        timeout."""
        if self._pidfd is None:
            return True
        loop, exited = asyncio.get_running_loop(), asyncio.Event()
        fd = self._pidfd
        loop.add_reader(fd, exited.set)
        try:
            async with asyncio.timeout(timeout):
                await exited.wait()
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(fd)
        return True

    def _release(self) -> None:
        self._check = None
        if self._watched is not None and self._pidfd is not None:
            with contextlib.suppress(ValueError, OSError, RuntimeError):
                self._watched.remove_reader(self._pidfd)
            self._watched = None
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        self._release()
