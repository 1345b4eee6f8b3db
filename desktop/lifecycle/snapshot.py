"""What `GET /v1/desktop/status` reports: built from a Desktop here (`take_snapshot`), rendered by api/."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from Xlib.display import Display

from desktop.core.dependencies import DependencyChecker
from desktop.core.errors import DesktopError
from desktop.input.mouse import pointer_grabbed
from desktop.lifecycle.options import StartOptions, StateLayout
from desktop.lifecycle.supervisor import ChildExit, Supervisor
from desktop.sandbox.layers import SandboxReport
from desktop.sandbox.limits import Usage
from desktop.windows.query import WindowInfo, list_windows
from desktop.x11.thread import XThread
from sandbox_desktop_wire.enums import DesktopRuntimeState, SupervisedChild
from sandbox_desktop_wire.problems import ProblemCode


class Observed(Protocol):
    """What a status reads of a desktop (`desktop.lifecycle.runtime.Desktop` is one); a Protocol, so that
    this module needs nothing of the Desktop that builds on it."""

    @property
    def dependencies(self) -> DependencyChecker: ...

    @property
    def supervisor(self) -> Supervisor | None: ...

    @property
    def options(self) -> StartOptions | None: ...

    @property
    def x(self) -> XThread | None: ...

    @property
    def layout(self) -> StateLayout: ...

    @property
    def started_ns(self) -> int | None: ...

    def current_state(self) -> DesktopRuntimeState: ...

    def sandbox_report(self) -> SandboxReport: ...

    def usage(self) -> Usage | None: ...

    def last_error(self) -> tuple[ProblemCode, str] | None: ...


def rfc3339_ns(epoch_ns: int) -> str:
    """`2026-11-29T07:35:48.247140610+00:00`: RFC 3339 in UTC with nanoseconds, as the reference."""
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}+00:00"


@dataclass(frozen=True)
class ChildStatus:
    name: SupervisedChild
    pid: int | None
    host_pid: int | None
    running: bool
    log_path: str | None
    process_id: str | None


@dataclass(frozen=True)
class DesktopSnapshot:
    """Everything `GET /v1/desktop/status` reports."""

    state: DesktopRuntimeState
    missing_dependencies: tuple[str, ...]
    runtime_log_path: str
    processes: tuple[ChildStatus, ...] = ()
    display: str | None = None
    width: int | None = None
    height: int | None = None
    dpi: int | None = None
    started_at: str | None = None
    last_error: tuple[ProblemCode, str] | None = None
    install_command: str | None = None
    windows: tuple[WindowInfo, ...] = ()
    restart_count: int = 0
    last_exit: ChildExit | None = None
    state_dir: str | None = None
    missing_optional: tuple[str, ...] = field(default_factory=tuple)
    sandbox: SandboxReport | None = None
    """Its sandbox's layers while it runs (docs/security.md)."""
    usage: Usage | None = None
    """What it uses now, while it runs in a cgroup (docs/sandbox-limits.md)."""
    pointer_grabbed: bool = False
    """Another X client holds the pointer grabbed: clicks go to it, not to the window under the pointer."""


_ERROR_STATES = (DesktopRuntimeState.FAILED, DesktopRuntimeState.INSTALL_REQUIRED)
"""The states whose status names the last error."""


async def take_snapshot(desktop: Observed) -> DesktopSnapshot:
    """The status document of `desktop`; never blocks on a transition."""
    report = desktop.dependencies.report()
    state = desktop.current_state()
    sup = desktop.supervisor
    options = desktop.options
    windows: tuple[WindowInfo, ...] = ()
    grabbed = False
    # Not while paused: a stopped X server never answers.
    if state == DesktopRuntimeState.ACTIVE and desktop.x is not None:
        with contextlib.suppress(DesktopError):
            windows, grabbed = await desktop.x.call(_windows_and_grab)
    started = sup is not None and options is not None and sup.display_num is not None
    return DesktopSnapshot(
        state=state,
        missing_dependencies=report.missing,
        missing_optional=report.missing_optional,
        install_command=report.install_command,
        runtime_log_path=str(desktop.layout.runtime_log),
        processes=child_statuses(desktop),
        display=sup.display if started and sup else None,
        width=options.width if started and options else None,
        height=options.height if started and options else None,
        dpi=options.dpi if started and options else None,
        started_at=rfc3339_ns(desktop.started_ns) if desktop.started_ns else None,
        last_error=desktop.last_error() if state in _ERROR_STATES else None,
        windows=windows,
        restart_count=sup.restart_count if sup else 0,
        last_exit=sup.last_exit if sup else None,
        state_dir=str(desktop.layout.root),
        pointer_grabbed=grabbed,
        sandbox=desktop.sandbox_report() if started else None,
        usage=desktop.usage(),
    )


def child_statuses(desktop: Observed) -> tuple[ChildStatus, ...]:
    if desktop.supervisor is None:
        return ()
    return tuple(
        ChildStatus(name, proc.pid, proc.host_pid, proc.running, str(proc.log_path) if proc.log_path else None, proc.id)
        for name, proc in desktop.supervisor.children.items()
    )


def _windows_and_grab(d: Display) -> tuple[tuple[WindowInfo, ...], bool]:
    """The managed windows and whether another client holds the pointer, in one input-thread call."""
    return tuple(list_windows(d)), pointer_grabbed(d)
