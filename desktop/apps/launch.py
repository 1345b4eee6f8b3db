"""Launch applications and open files or URLs on the desktop, registered as desktop processes.

An app that exits at once is an error carrying its exit code and output, not a silent 200; with
`wait`, the launch answers with the window the app maps (matched by `_NET_WM_PID`, including the
windows of its child processes).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from desktop.accessibility.browsers import with_accessibility
from desktop.core.errors import (
    AppExited,
    AppNotExecutable,
    AppNotFound,
    ArgumentsTooLong,
    CommandBusy,
    CommandNotFound,
    DesktopError,
    DomainError,
    StreamError,
    TargetNotFound,
    field_errors,
    invalid_action,
)
from desktop.processes import ManagedProcess, ProcessManager, SpawnError, reaper
from desktop.processes.child import Launcher
from desktop.windows.query import list_windows
from desktop.x11.session import Session
from sandbox_desktop_wire.enums import ProcessOwner
from sandbox_desktop_wire.limits import MAX_LAUNCH_WAIT_MS

# How long a launch watches for an immediate failure before answering (without `wait`).
EARLY_EXIT_S = 0.15
# How long `open` waits for xdg-open to hand the target over and exit.
OPEN_TIMEOUT_S = 5.0
DEFAULT_WAIT_MS = 5000
MAX_WAIT_MS = MAX_LAUNCH_WAIT_MS
# xdg-open's exit status for "the file to open does not exist" (docs/apps.md).
XDG_OPEN_FILE_MISSING = 2


@dataclass(frozen=True)
class Launched:
    process: ManagedProcess
    window_id: int | None = None


def find_app(app: str, env: dict[str, str]) -> str:
    """The executable for `app` on the desktop's PATH, or a 404 `app_not_found`."""
    if not app.strip():
        raise invalid_action("app must not be empty", "app")
    if "\x00" in app:
        raise invalid_action("app must not contain NUL bytes", "app")
    if "/" in app and not app.startswith("/"):
        # which() would look from the server's working directory, the spawn from the desktop home.
        raise invalid_action("app must be a program name on PATH or an absolute path", "app")
    found = shutil.which(app, path=env.get("PATH", os.defpath))
    if found is None:
        raise AppNotFound(f"Application '{app}' not found in PATH")
    return found


def exited_error(process: ManagedProcess, what: str) -> DesktopError:
    """An app that ended at once, with its exit status and the end of its output."""
    how = f"signal {process.exit_signal}" if process.exit_signal is not None else f"exit code {process.exit_code}"
    output = process.output_tail(2000).strip()
    return AppExited(f"{what} exited immediately with {how}" + (f": {output}" if output else ""),
                     processId=process.id, exitCode=process.exit_code, exitSignal=process.exit_signal,
                     output=output or None)


def target_missing(process: ManagedProcess, target: str, home: str) -> DesktopError:
    """xdg-open refused a target that does not exist: a 422 naming `target`, with xdg-open's output."""
    relative = "" if target.startswith("/") or ":" in target else f" (a relative path is looked up from {home})"
    output = process.output_tail(2000).strip()
    message = f"target {target!r} does not exist{relative}"
    return TargetNotFound(message, processId=process.id, exitCode=process.exit_code,
                          output=output or None, errors=field_errors("target", message))


def spawn_failure(exc: SpawnError, app: str, app_field: str | None, args_field: str) -> DomainError:
    """A spawn refused by the OS, told in the request's own terms. `app_field` is None when the
    program is the server's choice (xdg-open): then it failing, like the desktop HOME missing as
    the working directory, is the server's fault."""
    if isinstance(exc, ArgumentsTooLong):
        return ArgumentsTooLong(args_field, app, exc.phrase, message=f"{args_field} of {app!r}{exc.phrase}")
    if exc.subject == "cwd":
        return StreamError(f"cannot start {app!r}: the desktop HOME {exc.value!r} {exc.phrase}")
    if app_field is None:
        return StreamError(f"cannot start {app!r}: it {exc.phrase}")
    if isinstance(exc, CommandBusy):
        return CommandBusy(app_field, app, exc.phrase)
    if isinstance(exc, CommandNotFound):
        return AppNotFound(f"Application '{app}' not found in PATH")
    message = f"{app_field} {app!r} {exc.phrase}"
    return AppNotExecutable(message, errors=field_errors(app_field, message))


class Apps:
    """Launch and open, through the process registry (owner `desktop`)."""

    def __init__(self, processes: ProcessManager, launcher: Callable[[], Launcher | None] = lambda: None,
                 desktop_id: str | None = None) -> None:
        self.processes = processes
        self.desktop_id = desktop_id
        self._launcher = launcher
        """Where apps start: the desktop's sandbox while it runs in one (desktop/sandbox/sandbox.py)."""

    async def launch(self, session: Session, app: str, args: list[str], wait: bool = False,
                     wait_ms: int = DEFAULT_WAIT_MS) -> Launched:
        if not 0 < wait_ms <= MAX_WAIT_MS:
            raise invalid_action(f"waitTimeoutMs must be between 1 and {MAX_WAIT_MS}", "waitTimeoutMs")
        executable = find_app(app, session.env)
        # Chromium and Electron fill their page trees only if told at start (docs/accessibility.md).
        process = await self._spawn(session, executable, with_accessibility(executable, args), app, "app", "args")
        if not wait:
            if await self._failed_at_once(process, EARLY_EXIT_S):
                raise exited_error(process, app)
            return Launched(process)
        window = await self._wait_for_window(session, process, wait_ms / 1000, app)
        return Launched(process, window)

    async def _spawn(self, session: Session, executable: str, args: list[str], app: str,
                     app_field: str | None, args_field: str) -> ManagedProcess:
        try:
            return await self.processes.spawn(executable, args, env=session.env, cwd=session.home,
                                              owner=ProcessOwner.DESKTOP, launcher=self._launcher(),
                                              desktop_id=self.desktop_id)
        except SpawnError as exc:
            raise spawn_failure(exc, app, app_field, args_field) from exc

    async def _failed_at_once(self, process: ManagedProcess, seconds: float) -> bool:
        """Whether the process exits unsuccessfully within `seconds`."""
        try:
            await asyncio.wait_for(process.wait(), seconds)
        except TimeoutError:
            return False
        return process.exit_code != 0

    async def _wait_for_window(self, session: Session, process: ManagedProcess, timeout: float,
                               what: str) -> int | None:
        """Poll the managed windows for one owned by the app or its children."""
        deadline = asyncio.get_running_loop().time() + timeout
        others: set[int | None] = set()  # owners of windows seen that are not the app's nor its children's
        while True:
            windows = await session.x.call(list_windows)
            for window in windows:
                if window.pid == process.pid:
                    return window.id
            # A window of a pid not seen before may be a child's (apps often fork their window owner): only
            # then is /proc read, which costs milliseconds a poll on a busy machine.
            new_owners = {window.pid for window in windows} - others
            if new_owners and process.running:
                pids = await asyncio.to_thread(_descendants_as_seen, process)
                for window in windows:
                    if window.pid in pids:
                        return window.id
                others |= new_owners
            if not process.running and process.exit_code != 0:
                raise exited_error(process, what)
            if asyncio.get_running_loop().time() > deadline:
                return None
            await asyncio.sleep(0.05)

    async def open(self, session: Session, target: str) -> ManagedProcess:
        """`xdg-open target`; a failing open (no handler, missing file) is an error with its output."""
        if not target.strip():
            raise invalid_action("target must not be empty", "target")
        if "\x00" in target:
            raise invalid_action("target must not contain NUL bytes", "target")
        executable = find_app("xdg-open", session.env)
        process = await self._spawn(session, executable, [target], "xdg-open", None, "target")
        if await self._failed_at_once(process, OPEN_TIMEOUT_S):
            if process.exit_code == XDG_OPEN_FILE_MISSING:
                raise target_missing(process, target, session.home)
            raise exited_error(process, f"xdg-open {target}")
        return process


def _descendants_as_seen(process: ManagedProcess) -> set[int]:
    """The process's descendants, by the pids they have where they run (a sandbox's numbers are what its
    windows' `_NET_WM_PID` says); one pass over /proc (blocking)."""
    descendants = reaper.scan("").descendants({process.host_pid})
    if process.host_pid == process.pid:
        return descendants
    return reaper.innermost_pids(descendants)
