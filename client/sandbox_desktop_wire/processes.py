"""Wire models of `/v1/processes` (docs/processes.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.enums import LogStream, LogStreamFilter, ProcessOwner, ProcessStatus
from sandbox_desktop_wire.limits import MAX_PROCESS_WAIT_MS, MAX_TERMINAL_SIZE

Owner = Literal["user", "desktop", "system"]
"""`ProcessOwner`'s values, for type hints that take plain strings (sandbox_desktop_wire/enums.py)."""


def _nonblank(value: str) -> str:
    if not value.strip():
        raise ValueError("command must not be empty")
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL bytes")
    return value


def _variable_name(value: str) -> str:
    if not value or "=" in value:
        raise ValueError("an environment variable's name must be non-empty and must not contain '='")
    return value


Command = Annotated[str, AfterValidator(_nonblank), AfterValidator(_no_nul)]
NulFree = Annotated[str, AfterValidator(_no_nul)]
"""What exec() and chdir() take: a string without NUL bytes (otherwise a 400 naming the field)."""
VariableName = Annotated[str, AfterValidator(_no_nul), AfterValidator(_variable_name)]
"""What execve() takes as a variable's name: no NUL and no '=' (otherwise a 400 naming the field)."""


class ProcessInfo(WireModel):
    """A process in the registry."""

    id: str = Field(description="proc_N, numbered from 1; failed spawns take no number")
    command: str
    args: list[str]
    cwd: str | None = None
    tty: bool
    interactive: bool
    owner: ProcessOwner
    status: ProcessStatus
    pid: int | None = Field(default=None, description="Only while running; in a desktop's sandbox, its pid there "
                            "(what its windows' _NET_WM_PID and a terminal in it show)")
    host_pid: int | None = Field(default=None, description="Only while running, and only where it differs from "
                                 "`pid`: the pid in the server's own namespace (docs/security.md)")
    exit_code: int | None = Field(default=None, description="Omitted while running or if a signal ended it")
    exit_signal: int | None = Field(default=None, description="The signal that ended it, if one did")
    created_at_ms: int
    exited_at_ms: int | None = None


class ProcessListResponse(WireModel):
    processes: list[ProcessInfo]


class ProcessListQuery(QueryModel):
    owner: ProcessOwner | None = Field(default=None, description="Only processes of this owner")


class ProcessCreateRequest(WireModel):
    """Start a long-running process (owner "user")."""

    command: Command = Field(description="Program to run, looked up in PATH")
    args: list[NulFree] | None = Field(default=None, description="Arguments (default none)")
    cwd: NulFree | None = None
    env: dict[VariableName, NulFree] | None = Field(default=None, description="Added to the server's environment "
                                                 "(and the desktop's DISPLAY etc. while it is active)")
    tty: bool | None = Field(default=None, description="Run on a pseudo-terminal (log stream \"pty\"); default false")
    interactive: bool | None = Field(default=None, description="Keep stdin open for POST .../input; default false")


class ProcessRunRequest(WireModel):
    """Run a command to completion and return its output."""

    command: Command = Field(description="Program to run, looked up in PATH")
    args: list[NulFree] | None = Field(default=None, description="Arguments (default none)")
    cwd: NulFree | None = None
    env: dict[VariableName, NulFree] | None = None
    timeout_ms: int | None = Field(default=None, ge=0, description="0 or absent: defaultRunTimeoutMs; "
                                   "clamped to maxRunTimeoutMs")
    max_output_bytes: int | None = Field(default=None, ge=0, description="Per stream; clamped to maxOutputBytes")


class ProcessRunResponse(WireModel):
    exit_code: int | None = Field(default=None, description="Omitted if a signal ended it (e.g. the timeout)")
    exit_signal: int | None = None
    timed_out: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int


class ProcessConfigModel(WireModel):
    """The process API limits; POST replaces them all (a 0 is refused)."""

    max_concurrent_processes: int = Field(gt=0, description="Running user processes at most")
    default_run_timeout_ms: int = Field(gt=0, description="Clamped to maxRunTimeoutMs")
    max_run_timeout_ms: int = Field(gt=0)
    max_output_bytes: int = Field(gt=0)
    max_log_bytes_per_process: int = Field(gt=0, description="For processes started afterwards")
    max_input_bytes_per_request: int = Field(gt=0)
    max_exited_processes: int | None = Field(default=None, gt=0, description="Exited processes kept; the oldest "
                                             "are pruned first (absent on POST: unchanged)")


class StopQuery(QueryModel):
    wait_ms: int = Field(default=2000, ge=0, le=MAX_PROCESS_WAIT_MS, description="Wait for the exit after SIGTERM")


class KillQuery(QueryModel):
    wait_ms: int = Field(default=1000, ge=0, le=MAX_PROCESS_WAIT_MS, description="Wait for the exit after SIGKILL")


class ProcessLogsQuery(QueryModel):
    # Single-word parameters on the wire: no camelCase to apply.
    stream: LogStreamFilter | None = Field(default=None, description="Default: pty for tty processes, else combined")
    tail: int | None = Field(default=None, ge=0, description="Only the last N entries (after filtering)")
    since: int | None = Field(default=None, ge=0, description="Only entries with a greater sequence")
    follow: bool = Field(default=False, description="Server-sent events: the backlog, then live entries")


class ProcessLogEntry(WireModel):
    sequence: int
    stream: LogStream
    timestamp_ms: int
    data: str = Field(description="base64")
    encoding: Literal["base64"] = "base64"


class ProcessLogsResponse(WireModel):
    process_id: str
    stream: LogStreamFilter
    entries: list[ProcessLogEntry]


class ProcessInputRequest(WireModel):
    data: str
    # A plain string, checked against InputEncoding by the server: a wrong name is a 400 naming the field.
    encoding: str | None = Field(default=None, description="base64 (default), utf8 or text")


class ProcessInputResponse(WireModel):
    bytes_written: int


class ProcessTerminalResizeRequest(WireModel):
    cols: int = Field(ge=1, le=MAX_TERMINAL_SIZE)
    rows: int = Field(ge=1, le=MAX_TERMINAL_SIZE)


class ProcessTerminalResizeResponse(WireModel):
    cols: int
    rows: int
