"""Find and stop every process a desktop started, even ones that left their process group.

Each desktop process carries `SANDBOX_DESKTOP_INSTANCE=<marker>` in its environment, which its
descendants inherit; reading `/proc/*/environ` finds them after any number of forks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def marked_pids(marker: str, proc_root: Path = Path("/proc")) -> list[int]:
    """Pids of live processes whose environment carries this desktop's marker."""
    needle = f"SANDBOX_DESKTOP_INSTANCE={marker}".encode()
    own = os.getpid()
    found = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def bus_activated(pids: set[int], bus_type: str, proc_root: Path = Path("/proc")) -> set[int]:
    """Those of `pids` that a D-Bus daemon started on demand for a bus of `bus_type` (`accessibility`,
    `session`: their DBUS_STARTER_BUS_TYPE). The daemon double-forks them, so they belong to init, not to it."""
    needle = f"DBUS_STARTER_BUS_TYPE={bus_type}".encode()
    found = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if needle in (proc_root / str(pid) / "environ").read_bytes().split(b"\0"):
                found.add(pid)
    return found


def descendants(pids: set[int], proc_root: Path = Path("/proc")) -> set[int]:
    """Every live descendant of `pids` (not the pids themselves), from the parent links in /proc/*/stat."""
    parent_of: dict[int, int] = {}
    for entry in proc_root.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # The command name in parentheses may hold spaces: the parent pid is the 2nd field after it.
                parent_of[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = set(pids)
    while frontier:
        frontier = {pid for pid, parent in parent_of.items() if parent in frontier and pid not in found}
        found |= frontier
    return found


def kill_marked(marker: str, grace_s: float = 1.0) -> list[int]:
    """SIGTERM every marked process, SIGKILL what is left after `grace_s`; returns the pids found."""
    pids = marked_pids(marker)
    kill_pids(pids, grace_s)
    return pids


KILL_WAIT_S = 1.0
"""How long `kill_pids` waits for SIGKILLed processes to be gone (a zombie counts as gone)."""


def kill_pids(pids: list[int], grace_s: float = 1.0) -> None:
    """SIGTERM each process, SIGKILL what is left after `grace_s` (a stopped one is continued to see it), and
    wait (at most KILL_WAIT_S) until they are gone."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    remaining = pids
    while remaining and time.monotonic() < deadline:
        time.sleep(0.02)
        remaining = [p for p in remaining if alive(p)]
    for pid in remaining:
        _signal(pid, signal.SIGKILL)
    # Dead before returning: a caller that removes what they wrote (a reset's HOME) must not race their exit.
    deadline = time.monotonic() + KILL_WAIT_S
    while remaining and time.monotonic() < deadline:
        time.sleep(0.01)
        remaining = [p for p in remaining if alive(p)]


def signal_marked(marker: str, sig: int) -> list[int]:
    """Send `sig` to every marked process (SIGSTOP/SIGCONT to pause and resume a whole desktop)."""
    pids = marked_pids(marker) if marker else []
    for pid in pids:
        _signal(pid, sig)
    return pids


def stop_marked(marker: str, timeout_s: float = 5.0) -> list[int]:
    """SIGSTOP every marked process and wait until each one is stopped (delivery is asynchronous: a process
    running on another core stops a moment later); a process forked meanwhile is caught by a second round."""
    deadline = time.monotonic() + timeout_s
    stopped: set[int] = set()
    while True:
        pids = [p for p in marked_pids(marker) if p not in stopped] if marker else []
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        pending = [p for p in pids if _state(p) not in ("T", "t", "Z", None)]
        while pending and time.monotonic() < deadline:
            time.sleep(0.002)
            pending = [p for p in pending if _state(p) not in ("T", "t", "Z", None)]
        stopped.update(pids)
        if not pids or time.monotonic() >= deadline:
            return sorted(stopped)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, T, Z...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie has ended: it only waits for its parent to read its status)."""
    return _state(pid) not in (None, "Z")
