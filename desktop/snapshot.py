"""What `GET /v1/desktop/status` reports, as plain data: the Desktop builds it, api/ renders it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from desktop.supervisor import ChildExit
from desktop.windows import WindowInfo
from sandbox_desktop_wire.enums import DesktopRuntimeState
from sandbox_desktop_wire.problems import ProblemCode


def rfc3339_ns(epoch_ns: int) -> str:
    """`2026-11-29T07:35:48.247140610+00:00`: RFC 3339 in UTC with nanoseconds, as the reference."""
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{nanos:09d}+00:00"


@dataclass(frozen=True)
class ChildStatus:
    name: str
    pid: int | None
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
    pointer_grabbed: bool = False
    """Another X client holds the pointer grabbed: clicks go to it, not to the window under the pointer."""
