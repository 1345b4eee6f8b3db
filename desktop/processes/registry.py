"""The process registry behind /v1/processes: ids, limits, pruning, one-shot runs and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop.core.errors import Conflict, InvalidRequest, NotFound, StreamError
from desktop.processes.child import Child, Launcher, start_child
from desktop.processes.logs import LogBuffer, now_ms
from desktop.processes.managed import ManagedProcess, ProcessOutput
from desktop.processes.runner import RunResult, run_once
from desktop.processes.spawn_errors import SpawnError
from sandbox_desktop_wire.enums import ProcessOwner

logger = logging.getLogger("sandbox_desktop.processes")

DEFAULT_TERM = "xterm-256color"
"""TERM of a tty process whose environment has none."""

SHUTDOWN_GRACE_S = 2.0
"""How long children get to exit after SIGTERM at shutdown before SIGKILL."""


@dataclass
class ProcessConfig:
    """Limits of the process API (wire names are the camelCase of each field)."""

    max_concurrent_processes: int = 64
    """Running processes with owner "user" at most; desktop and system ones do not count."""
    default_run_timeout_ms: int = 30_000
    """Timeout of a run that asks for none (clamped to `max_run_timeout_ms`)."""
    max_run_timeout_ms: int = 300_000
    """Largest timeout a run may ask for; larger requests are clamped."""
    max_output_bytes: int = 1_048_576
    """Per stream, the most a run captures; larger requests are clamped."""
    max_log_bytes_per_process: int = 10_485_760
    """Log buffer of each process (oldest output dropped first); applies to processes started later."""
    max_input_bytes_per_request: int = 65_536
    """Largest decoded input one request may write."""
    max_exited_processes: int = 100
    """Exited processes kept in the registry; the oldest exits are pruned first."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{f.name} must be an integer greater than 0, got {value!r}")
        self.default_run_timeout_ms = min(self.default_run_timeout_ms, self.max_run_timeout_ms)


class ProcessManager:
    """Every process the server started: user ones from the API, and the desktop's own."""

    def __init__(self, config: ProcessConfig | None = None) -> None:
        self._config = config or ProcessConfig()
        self._processes: dict[str, ManagedProcess] = {}
        self._exited: dict[str, None] = {}  # ids in exit order (an ordered set)
        self._runs: set[Child] = set()
        self._last_id = 0
        self._starting_user = 0
        self._exit_listeners: list[Callable[[ManagedProcess], None]] = []
        self._end_listeners: list[Callable[[], None]] = []

    @property
    def config(self) -> ProcessConfig:
        return dataclasses.replace(self._config)

    def configure(self, config: ProcessConfig) -> ProcessConfig:
        """Replace the limits; returns them as applied (the default timeout clamped)."""
        self._config = dataclasses.replace(config)
        self._prune()
        return self.config

    # -- registry ------------------------------------------------------------------------------

    async def spawn(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        owner: ProcessOwner = ProcessOwner.USER,
        tty: bool = False,
        interactive: bool = False,
        log_path: Path | None = None,
        protected: bool = False,
        pass_fds: Sequence[int] = (),
        launcher: Launcher | None = None,
        desktop_id: str | None = None,
    ) -> ManagedProcess:
        """Start a process in its own session and register it.

        `env` is the complete environment (None: the server's); `launcher`, a desktop's sandbox to start it in
        (None: here, as the server's user), `desktop_id` the desktop it belongs to (its per-desktop API lists
        it). Raises Conflict at the
        concurrency limit, SpawnError (a 4xx naming the field) if the command or `cwd` cannot be
        used, and StreamError if the machine cannot start it (or a `protected` one, the desktop's own).
        """
        if not command.strip():
            raise InvalidRequest("command must not be empty")
        if owner is ProcessOwner.USER:
            self._check_capacity()
        if tty:
            base = os.environ if env is None else env
            if "TERM" not in base:
                env = {**base, "TERM": DEFAULT_TERM}
        output = ProcessOutput(LogBuffer(self._config.max_log_bytes_per_process), log_path)
        created_at_ms = now_ms()
        self._starting_user += owner is ProcessOwner.USER
        try:
            child = await start_child(command, args, sink=output.write, cwd=cwd, env=env, tty=tty,
                                      stdin=interactive, pass_fds=pass_fds, launcher=launcher)
        except SpawnError as exc:
            output.close()
            if protected:
                # The desktop's own programs (Xvfb, openbox) are the server's choice: failing to start
                # them is this machine's fault, not a caller's mistake (docs/errors.md).
                raise StreamError(f"failed to start {command!r}: {exc.message}") from exc
            raise
        except BaseException:
            output.close()
            raise
        finally:
            self._starting_user -= owner is ProcessOwner.USER
        # The id is taken only now, so a failed spawn leaves no gap in the numbering.
        self._last_id += 1
        process = ManagedProcess(
            f"proc_{self._last_id}", child, output, command=command, args=args, cwd=cwd, owner=owner,
            tty=tty, interactive=interactive, protected=protected, log_path=log_path,
            created_at_ms=created_at_ms, desktop_id=desktop_id,
        )
        self._processes[process.id] = process
        process.add_exit_callback(self._on_exit)
        logger.info("%s started: %s %s (pid %d, owner %s)", process.id, command, list(args), child.pid, owner)
        return process

    def get(self, process_id: str) -> ManagedProcess:
        """The process with this id; NotFound if unknown (or pruned)."""
        try:
            return self._processes[process_id]
        except KeyError:
            raise NotFound("process", process_id) from None

    def list(self, owner: ProcessOwner | None = None) -> list[ManagedProcess]:
        """Processes in numeric id order (`proc_2` before `proc_10`), optionally of one owner."""
        found = [p for p in self._processes.values() if owner is None or p.owner == owner]
        return sorted(found, key=lambda p: int(p.id.removeprefix("proc_")))

    def delete(self, process_id: str) -> None:
        """Forget an exited process and release its output pipes."""
        process = self.get(process_id)
        if process.running:
            raise Conflict("process is still running; stop or kill it before delete")
        self._forget(process)

    def listen(self, on_exit: Callable[[ManagedProcess], None], on_end: Callable[[], None]) -> Callable[[], None]:
        """Call `on_exit(process)` after every exit and `on_end()` with `end_follows` (a desktop's event bus
        publishes them, desktop/events/sources.py); returns the function that stops it."""
        self._exit_listeners.append(on_exit)
        self._end_listeners.append(on_end)

        def stop() -> None:
            self._exit_listeners.remove(on_exit)
            self._end_listeners.remove(on_end)
        return stop

    # -- one-shot runs -------------------------------------------------------------------------

    async def run(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        max_output_bytes: int | None = None,
        launcher: Launcher | None = None,
    ) -> RunResult:
        """Run to completion. A missing or 0 timeout means the default; both limits are clamped."""
        if not command.strip():
            raise InvalidRequest("command must not be empty")
        config = self._config
        timeout = min(timeout_ms or config.default_run_timeout_ms, config.max_run_timeout_ms)
        cap = min(config.max_output_bytes if max_output_bytes is None else max_output_bytes,
                  config.max_output_bytes)
        return await run_once(command, args, cwd=cwd, env=env, timeout_ms=timeout,
                              max_output_bytes=cap, active=self._runs, launcher=launcher)

    # -- shutdown ------------------------------------------------------------------------------

    def end_follows(self) -> None:
        """Finish every log stream so open `follow` requests end (the server is shutting down)."""
        for process in self._processes.values():
            process.logs.finish()
        for on_end in list(self._end_listeners):
            on_end()

    async def shutdown(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """SIGTERM every process group, SIGKILL what is left after `grace_s`, release everything.

        Groups of exited processes are signalled too, for the background jobs they left.
        """
        processes = list(self._processes.values())
        running = [p for p in processes if p.running]
        for process in processes:
            await process.stop(0)
        for child in self._runs:
            child.signal_group(signal.SIGKILL)
        await _wait_exits(running, grace_s)
        for process in processes:
            if process.running:
                logger.warning("%s (%s) ignored SIGTERM; killing it", process.id, process.command)
            await process.kill(0)
        await _wait_exits(running, 1.0)
        for process in processes:
            process.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await asyncio.gather(*(p.finished() for p in processes))

    # -- internals -----------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        limit = self._config.max_concurrent_processes
        running = sum(1 for p in self._processes.values() if p.owner is ProcessOwner.USER and p.running)
        if running + self._starting_user >= limit:
            raise Conflict(f"max concurrent process limit reached ({limit}); stop or kill a running "
                           "process, or raise maxConcurrentProcesses with POST /v1/processes/config")

    def _on_exit(self, process: ManagedProcess) -> None:
        for on_exit in list(self._exit_listeners):
            on_exit(process)
        if process.id in self._processes:
            self._exited[process.id] = None
            self._prune()

    def _prune(self) -> None:
        """Keep the newest `max_exited_processes` exited processes; running ones are never pruned."""
        excess = len(self._exited) - self._config.max_exited_processes
        for process_id in list(self._exited)[:max(0, excess)]:
            self._forget(self._processes[process_id])

    def _forget(self, process: ManagedProcess) -> None:
        self._processes.pop(process.id, None)
        self._exited.pop(process.id, None)
        process.close()


async def _wait_exits(processes: Sequence[ManagedProcess], timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*(p.wait() for p in processes))
