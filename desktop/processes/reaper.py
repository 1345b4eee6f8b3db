"""Find and stop every process a desktop started, even ones that left their process group.

Each desktop process carries `SANDBOX_DESKTOP_INSTANCE=<marker>` in its environment, which its
descendants inherit; reading `/proc/*/environ` finds them after any number of forks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass


def marked_pids(marker: str, proc_root: str = "/proc") -> list[int]:
    """Pids of live processes whose environment carries this desktop's marker."""
    return sorted(scan(marker, proc_root, parents=False).starter_bus)


@dataclass(frozen=True)
class ProcessTable:
    """One pass over /proc (`scan`): what a reset needs to tell a desktop's processes apart."""

    parent_of: dict[int, int]
    """Each live process's parent (empty when scanned with `parents=False`)."""
    starter_bus: dict[int, str | None]
    """The marked processes (their environment carries the desktop's marker), each with the bus type a D-Bus
    daemon started it for (DBUS_STARTER_BUS_TYPE: `accessibility`, `session`), None when none did."""

    @property
    def marked(self) -> set[int]:
        return set(self.starter_bus)

    def bus_activated(self, bus_type: str) -> set[int]:
        """The marked processes a D-Bus daemon started on demand for a bus of `bus_type`. The daemon
        double-forks them, so they belong to init, not to it."""
        return {pid for pid, started_for in self.starter_bus.items() if started_for == bus_type}

    def descendants(self, pids: set[int]) -> set[int]:
        """Every descendant of `pids` (not the pids themselves), from the parent links."""
        children: dict[int, list[int]] = {}
        for pid, parent in self.parent_of.items():
            children.setdefault(parent, []).append(pid)
        found: set[int] = set()
        stack = list(pids)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found


def scan(marker: str, proc_root: str = "/proc", *, parents: bool = True) -> ProcessTable:
    """Read /proc once: every process's parent (unless `parents` is false) and which ones carry `marker`
    (none when it is empty). This server's own process is never marked. Plain os calls on bytes: a reset
    scans a few hundred processes, and pathlib and text decoding were most of its cost."""
    needle = f"SANDBOX_DESKTOP_INSTANCE={marker}".encode() if marker else None
    own = os.getpid()
    parent_of: dict[int, int] = {}
    starter_bus: dict[int, str | None] = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        pid = int(name)
        if parents and (stat := _read(f"{proc_root}/{name}/stat")):
            with contextlib.suppress(IndexError, ValueError):
                # The command name in parentheses may hold spaces: the parent pid is the 2nd field after it.
                parent_of[pid] = int(stat.rsplit(b")", 1)[1].split()[1])
        if needle is None or pid == own:
            continue
        environ = _read(f"{proc_root}/{name}/environ")
        if environ and needle in environ:  # a cheap test first; most processes are not the desktop's
            variables = environ.split(b"\0")
            if needle in variables:
                starter_bus[pid] = next((v[len(STARTER_BUS):].decode(errors="replace") for v in variables
                                         if v.startswith(STARTER_BUS)), None)
    return ProcessTable(parent_of, starter_bus)


STARTER_BUS = b"DBUS_STARTER_BUS_TYPE="


def _read(path: str) -> bytes | None:
    """A /proc file's whole content, None when the process is gone or not ours to read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


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


KILL_ROUNDS = 5
"""Rounds of `kill_marked_except` (each ends what the previous one missed)."""


def kill_marked_except(marker: str, keep: set[int], also: set[int], rounds: int = KILL_ROUNDS) -> None:
    """End every marked process and every one of `also`, but those of `keep` (a desktop's reset); scanned again
    until none is left, at most `rounds` times: a browser on its way out starts helpers (crash reporter, zygote
    children)."""
    for _ in range(rounds):
        rest = [pid for pid in {*marked_pids(marker), *also} if pid not in keep and alive(pid)]
        if not rest:
            return
        kill_pids(rest, 0.5)


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


def innermost_pids(pids: set[int], proc_root: str = "/proc") -> set[int]:
    """Each process's pid in its own pid namespace (a sandbox's numbers, what its windows' `_NET_WM_PID`
    says; the same number for a process of the server's namespace), from /proc/<pid>/status's NSpid."""
    found: set[int] = set()
    for pid in pids:
        status = _read(f"{proc_root}/{pid}/status")
        if status is None:
            continue
        for line in status.split(b"\n"):
            if line.startswith(b"NSpid:"):
                with contextlib.suppress(IndexError, ValueError):
                    found.add(int(line.split()[-1]))
                break
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, T, Z...), None when it is gone."""
    try:
        return (_read(f"/proc/{pid}/stat") or b"").rsplit(b")", 1)[1].split()[0].decode()
    except IndexError:
        return None


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie has ended: it only waits for its parent to read its status)."""
    return _state(pid) not in (None, "Z")
