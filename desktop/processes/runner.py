"""One-shot commands: run to completion with a timeout, capture capped stdout and stderr."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping, MutableSet, Sequence
from dataclasses import dataclass

from desktop.processes.child import Child, Launcher, start_child
from sandbox_desktop_wire.enums import LogStream

DRAIN_GRACE_S = 0.25
"""After the exit, how long output still in the pipes may take to arrive (a grandchild holding
the pipes open must not hold the request)."""


@dataclass(frozen=True)
class RunResult:
    """What a finished (or timed-out) command produced."""

    exit_code: int | None
    """None if a signal ended it (including the kill after a timeout)."""
    exit_signal: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int


class _Capture:
    """The first `limit` bytes of one stream, remembering whether more came."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, data: bytes) -> None:
        room = self.limit - self.size
        if len(data) > room:
            self.truncated = True
            data = data[:room]
        if data:
            self.chunks.append(data)
            self.size += len(data)

    def value(self) -> bytes:
        return b"".join(self.chunks)


async def run_once(
    command: str,
    args: Sequence[str] = (),
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_ms: int,
    max_output_bytes: int,
    active: MutableSet[Child] | None = None,
    launcher: Launcher | None = None,
) -> RunResult:
    """Run `command` with stdin closed; on timeout SIGKILL its whole process group.

    `active` (if given) holds the child while it runs, so a server shutdown can kill it.
    """
    captures = {LogStream.STDOUT: _Capture(max_output_bytes), LogStream.STDERR: _Capture(max_output_bytes)}

    def sink(stream: LogStream, data: bytes) -> None:
        captures[stream].add(data)

    started = time.monotonic()
    child = await start_child(command, args, sink=sink, cwd=cwd, env=env, launcher=launcher)
    if active is not None:
        active.add(child)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await child.wait()
        except TimeoutError:
            timed_out = True
            child.signal_group(signal.SIGKILL)
            await child.wait()
        duration_ms = int((time.monotonic() - started) * 1000)
        await child.drain(DRAIN_GRACE_S)
    finally:
        if child.returncode is None:  # cancelled: do not leave it running
            child.signal_group(signal.SIGKILL)
            with contextlib.suppress(BaseException):
                await asyncio.shield(child.wait())
        child.close()
        if active is not None:
            active.discard(child)
    code = child.returncode
    assert code is not None
    out, err = captures[LogStream.STDOUT], captures[LogStream.STDERR]
    return RunResult(
        exit_code=code if code >= 0 else None,
        exit_signal=-code if code < 0 else None,
        timed_out=timed_out,
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_ms=duration_ms,
    )
