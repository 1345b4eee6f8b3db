"""A registered process: what was started, its output log, its exit, and what a client may do to it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from desktop.core.errors import Conflict
from desktop.processes.child import Child
from desktop.processes.logs import LogBuffer
from sandbox_desktop_wire.enums import LogStream, ProcessOwner, ProcessStatus

logger = logging.getLogger("sandbox_desktop.processes")

DRAIN_GRACE_S = 0.5
"""After an exit, how long output still in the pipes may take to arrive before followers are told
the stream ended (a grandchild that keeps the pipe open must not hold them forever)."""


class ProcessOutput:
    """Where a child's output goes: the log buffer, and the log file if one was asked for.

    The file is opened for each write rather than held: the processes with one are a desktop's own (Xvfb,
    openbox, its buses), which write a few lines in their lives, and each descriptor held for every desktop
    lowers how many desktops a server's limit allows (docs/operations.md, "Descriptors")."""

    def __init__(self, logs: LogBuffer, log_path: Path | None) -> None:
        self.logs = logs
        self._path: Path | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._path = log_path
            self._append(b"")  # created now: the log exists from the start, even for a silent process

    def write(self, stream: LogStream, data: bytes) -> None:
        self.logs.append(stream, data)
        if self._path is not None:
            self._append(data)

    def _append(self, data: bytes) -> None:
        assert self._path is not None
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                os.write(fd, data)  # one small append per chunk
            finally:
                os.close(fd)
        except OSError as exc:
            logger.warning("log file %s: %s; no longer writing it", self._path, exc)
            self._path = None

    def close(self) -> None:
        self._path = None


class ManagedProcess:
    """A child in the registry. Its state changes only in `_watch`, which notices the exit."""

    def __init__(
        self,
        process_id: str,
        child: Child,
        output: ProcessOutput,
        *,
        command: str,
        args: Sequence[str],
        cwd: str | None,
        owner: ProcessOwner,
        tty: bool,
        interactive: bool,
        protected: bool,
        log_path: Path | None,
        created_at_ms: int,
        desktop_id: str | None = None,
    ) -> None:
        self.id = process_id
        self.pid = child.visible_pid
        """Its pid where it runs (in a sandbox, the sandbox's): what the wire and the desktop's windows show."""
        self.host_pid = child.pid
        """Its pid in the server's namespace: what /proc and signals use."""
        self.command = command
        self.args = list(args)
        self.cwd = cwd
        self.owner: ProcessOwner = owner
        self.desktop_id = desktop_id
        """The desktop it belongs to (it runs in that desktop's sandbox, if it has one), or None: the server's."""
        self.tty = tty
        self.interactive = interactive
        self.protected = protected
        self.log_path = log_path
        self.created_at_ms = created_at_ms
        self.logs = output.logs
        self._child = child
        self._output = output
        self._exit_callbacks: list[Callable[[ManagedProcess], None]] = []
        self._exit_handled = False
        child.add_exit_callback(self._exited)
        self._watcher = asyncio.create_task(self._watch(), name=f"watch {process_id}")

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.id} {self.command!r} pid={self.pid} {self.status}>"

    # -- state ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._child.returncode is None

    @property
    def status(self) -> ProcessStatus:
        return ProcessStatus.RUNNING if self.running else ProcessStatus.EXITED

    @property
    def returncode(self) -> int | None:
        """None while running; the exit code, or minus the signal that killed it."""
        return self._child.returncode

    @property
    def exit_code(self) -> int | None:
        """The exit code; None while running or if a signal killed it."""
        code = self._child.returncode
        return code if code is not None and code >= 0 else None

    @property
    def exit_signal(self) -> int | None:
        """The signal that killed it, if one did."""
        code = self._child.returncode
        return -code if code is not None and code < 0 else None

    @property
    def exited_at_ms(self) -> int | None:
        return self._child.exited_at_ms

    def info(self) -> dict[str, Any]:
        """ProcessInfo with wire names: `pid` only while running, `exitCode` or `exitSignal` after."""
        info: dict[str, Any] = {
            "id": self.id,
            "command": self.command,
            "args": list(self.args),
            "cwd": self.cwd,
            "tty": self.tty,
            "interactive": self.interactive,
            "owner": self.owner,
            "status": self.status,
            "pid": self.pid if self.running else None,
            "hostPid": self.host_pid if self.running and self.host_pid != self.pid else None,
            "exitCode": self.exit_code,
            "exitSignal": self.exit_signal,
            "createdAtMs": self.created_at_ms,
            "exitedAtMs": self.exited_at_ms,
        }
        return {k: v for k, v in info.items() if v is not None}

    def output_tail(self, max_bytes: int) -> str:
        """The last output (all streams), decoded leniently: for error messages."""
        return self.logs.tail_bytes(max_bytes).decode("utf-8", errors="replace")

    # -- operations ----------------------------------------------------------------------------

    async def wait(self) -> int:
        """The return code (negative: killed by that signal); immediate if already exited."""
        return await self._child.wait()

    async def stop(self, wait_ms: int) -> None:
        """SIGTERM the process group, then wait up to `wait_ms` for the process to exit.

        The group is signalled even after the leader exited: background jobs it left are in it.
        """
        await self._signal_and_wait(signal.SIGTERM, wait_ms)

    async def kill(self, wait_ms: int) -> None:
        """SIGKILL the process group, then wait up to `wait_ms` for the process to exit."""
        await self._signal_and_wait(signal.SIGKILL, wait_ms)

    async def write_input(self, data: bytes) -> int:
        """Write to the process's stdin (interactive) or terminal (tty); the bytes written."""
        if not self.running:
            raise Conflict(f"process {self.id} is not running")
        if not self._child.accepts_input:
            raise Conflict(f"process {self.id} does not accept input; start it with "
                           "\"interactive\": true or \"tty\": true")
        return await self._child.write(data)

    def require_tty(self) -> None:
        """Conflict unless the process runs on a terminal (resize, the terminal WebSocket)."""
        if not self.tty:
            raise Conflict(f"process {self.id} is not running in tty mode")

    def resize(self, cols: int, rows: int) -> None:
        """Resize the terminal of a tty process."""
        self.require_tty()
        if not self.running:
            raise Conflict(f"process {self.id} is not running")
        self._child.resize(cols, rows)

    def refuse_if_protected(self, action: str) -> None:
        """API guard: the desktop supervisor's own processes are not for clients to stop or delete."""
        if self.protected:
            raise Conflict(f"cannot {action} {self.id} ({self.command}): it is managed by the desktop "
                           "supervisor; use POST /v1/desktop/stop")

    def add_exit_callback(self, callback: Callable[[ManagedProcess], None]) -> None:
        """Call `callback(process)` as soon as the process exits (right now, if it has)."""
        if self._exit_handled:
            callback(self)
        else:
            self._exit_callbacks.append(callback)

    async def finished(self) -> None:
        """Wait until the process exited and every fd it had was released."""
        await asyncio.shield(self._watcher)

    def close(self) -> None:
        """Release the output pipes now, even if a grandchild still holds them (delete, shutdown)."""
        if not self.running:
            self._child.close()

    # -- internals -----------------------------------------------------------------------------

    async def _signal_and_wait(self, sig: int, wait_ms: int) -> None:
        self._child.signal_group(sig)  # also reaches what the leader left behind in its group
        if self.running and wait_ms > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_ms / 1000):
                    await self._child.wait()

    def _exited(self) -> None:
        code = self._child.returncode
        self._child.close_input()
        logger.info("%s (%s, pid %d) exited with %s", self.id, self.command, self.pid,
                    f"signal {-code}" if code is not None and code < 0 else f"code {code}")
        self._exit_handled = True
        for callback in self._exit_callbacks:
            try:
                callback(self)
            except Exception:
                logger.exception("exit callback of %s failed", self.id)
        self._exit_callbacks.clear()

    async def _watch(self) -> None:
        try:
            await self._child.wait()
            await self._child.drain(DRAIN_GRACE_S)
            self.logs.finish()
            await self._child.wait_eof()
        finally:
            self.logs.finish()
            self._child.close()
            self._output.close()
