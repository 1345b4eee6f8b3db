"""A desktop's resource limits as the caller gives them (`limits: {memoryMb, pids, cpu}`) and its usage as the
status and metrics show it. Checked here, so that a caller's mistake is a 400 naming the field
(desktop/core/errors.py) before any cgroup is touched (docs/sandbox-limits.md)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from desktop.core.errors import invalid_action

MIN_MEMORY_MB = 64
"""Below this a desktop's apps cannot start (a terminal alone takes ~20 MiB, a browser's first tab ~150)."""
MIN_PIDS = 16
"""Below this a shell cannot run a pipeline; an app with a few threads could not start at all."""
MAX_PIDS = 4_194_304
"""The kernel's PID_MAX_LIMIT: pids.max takes nothing larger."""
MIN_CPU = 0.01
"""The kernel's smallest CFS quota is 1 ms of each 100 ms period."""
CPU_PERIOD_US = 100_000
FIELD = "limits"
WIRE = {"memory_mb": "memoryMb", "pids": "pids", "cpu": "cpu"}


def _cores() -> int:
    """The cores this server may run on (its affinity, which a container's cpuset narrows)."""
    return len(os.sched_getaffinity(0))


def _memory_mb() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)


@dataclass(frozen=True)
class Limits:
    """What a desktop's processes may use; None is "no limit". Memory and pids bind the desktop's apps (an app
    past them dies or cannot fork while the session stays up); cpu binds the whole desktop, in cores."""

    memory_mb: int | None = None
    pids: int | None = None
    """Tasks, as the kernel's pids controller counts them: processes and their threads."""
    cpu: float | None = None

    def __post_init__(self) -> None:
        if self.memory_mb is not None and not MIN_MEMORY_MB <= self.memory_mb <= _memory_mb():
            _refuse("memory_mb", f"must be between {MIN_MEMORY_MB} and this machine's {_memory_mb()} (MiB),"
                                 f" not {self.memory_mb}")
        if self.pids is not None and not MIN_PIDS <= self.pids <= MAX_PIDS:
            _refuse("pids", f"must be between {MIN_PIDS} and {MAX_PIDS}, not {self.pids}")
        if self.cpu is not None and not MIN_CPU <= self.cpu <= _cores():
            _refuse("cpu", f"must be between {MIN_CPU} and this machine's {_cores()} cores, not {self.cpu}")

    @classmethod
    def parse(cls, data: Mapping[str, object] | None) -> Limits:
        """Limits from the wire's `limits` object (camelCase; null or absent is no limit; unknown members are
        ignored, as everywhere on the wire). A wrong type or a value out of range names the field."""
        data = data or {}
        memory, pids, cpu = (data.get(WIRE[name]) for name in ("memory_mb", "pids", "cpu"))
        for name, value in (("memory_mb", memory), ("pids", pids)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                _refuse(name, f"must be an integer, not {value!r}")
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int | float) or not math.isfinite(cpu)):
            _refuse("cpu", f"must be a number of cores, not {cpu!r}")
        return cls(memory, pids, None if cpu is None else float(cpu))  # type: ignore[arg-type]  # checked above

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory_mb is None else self.memory_mb * 1024 * 1024

    @property
    def cpu_quota_us(self) -> int | None:
        """Microseconds of CPU the desktop may use in each CFS period of CPU_PERIOD_US."""
        return None if self.cpu is None else round(self.cpu * CPU_PERIOD_US)

    def wire(self) -> dict[str, int | float | None]:
        return {WIRE[name]: getattr(self, name) for name in WIRE}


def _refuse(name: str, why: str) -> None:
    field = f"{FIELD}.{WIRE[name]}"
    raise invalid_action(f"{field} {why}", field)


@dataclass(frozen=True)
class Usage:
    """What a desktop uses now, read from its cgroups (no process spawned). None where this machine cannot
    measure it (no such controller), which is not zero."""

    memory_bytes: int | None
    """The desktop's memory as its memory cgroup is charged: anonymous, page cache, kernel memory."""
    cpu_seconds: float | None
    """CPU time its processes used since the desktop was created, dead ones included."""
    pids: int | None
    """Tasks (processes and threads) as the pids limit counts them; processes only without a pids controller."""
    oom_kills: int | None
    """Processes the OOM killer ended inside the desktop since it was created."""

    def wire(self) -> dict[str, int | float | None]:
        return {"memoryBytes": self.memory_bytes, "cpuSeconds": self.cpu_seconds, "pids": self.pids,
                "oomKills": self.oom_kills}
