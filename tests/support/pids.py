"""A process of the API by the pid the tests' own process may signal and read in /proc.

A process of a sandboxed desktop has two pids: its `pid` in the desktop's own pid namespace (what the desktop's
windows and terminals show) and its `hostPid` in the server's (docs/security.md); a process outside any sandbox
has only `pid`. Everything a test does from outside with a pid (a signal, /proc) takes the host pid; everything
here reads /proc and /sys itself, never the server's word."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def host_pid(process: dict[str, Any]) -> int:
    """The pid of a process info or a status's process, as this machine's /proc numbers it."""
    return int(process.get("hostPid") or process["pid"])


def child(status: dict[str, Any], name: str) -> dict[str, Any]:
    """The desktop status's supervised child `name` (Xvfb, openbox, dbus, pulse...), which must be running."""
    entry = next(p for p in status["processes"] if p["name"] == name)
    assert entry["running"], status
    return dict(entry)


def child_host_pid(status: dict[str, Any], name: str) -> int:
    """The host pid of the status's running supervised child `name`: the one to signal."""
    return host_pid(child(status, name))


def restarted_child(status: dict[str, Any], name: str, old_host_pid: int) -> bool:
    """The desktop is active again with a running `name` that is another process than `old_host_pid`."""
    entry = next((p for p in status["processes"] if p["name"] == name), None)
    return bool(status["state"] == "active" and entry and entry["running"] and host_pid(entry) != old_host_pid)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first, then the parent's pid)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_state(pid: int) -> str:
    """The state letter of a host pid in /proc (R, S, D, T, Z...), or "gone"."""
    try:
        return _stat(pid)[0]
    except OSError:
        return "gone"


def pid_alive(pid: int) -> bool:
    """A host pid that names a process which has not ended (a zombie has)."""
    return process_state(pid) not in ("gone", "Z")


def parent_pid(pid: int) -> int:
    """The host pid of a process's parent (a sandboxed desktop's programs: its init's)."""
    return int(_stat(pid)[1])


def frozen(pid: int) -> bool:
    """The process gets no CPU because a pause holds it: stopped by a signal (state T), or in a frozen cgroup (a
    v1 freezer's `freezer.state` FROZEN, its processes then in state D; v2's `cgroup.events` "frozen 1")."""
    state = process_state(pid)
    if state == "T":
        return True
    if state in ("gone", "Z"):
        return False
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "freezer" in controllers.split(","):
            state_file = Path("/sys/fs/cgroup/freezer", relative, "freezer.state")
            if _read(state_file) == "FROZEN":
                return True
        elif controllers == "":
            for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                if "frozen 1" in _read(root / relative / "cgroup.events").splitlines():
                    return True
    return False


def cgroup_dir(pid: int, controller: str) -> Path:
    """The cgroup of host pid `pid` that `controller` (`cpu`, `memory`, `pids`) governs: in the cgroup v1 hierarchy
    that has it, else in the v2 one where that controller is enabled."""
    entries = [line.split(":", 2) for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
    for _, controllers, path in entries:
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup", controller, path.lstrip("/"))
    for _, controllers, path in entries:
        for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
            if controllers == "" and controller in _read(root / "cgroup.controllers").split():
                return root / path.lstrip("/")
    raise AssertionError(f"no {controller} cgroup for process {pid}: {entries}")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def in_namespace_of(member: int, inner_pid: int) -> int | None:
    """The host pid of the process numbered `inner_pid` in the pid namespace of host pid `member` (what `$$`
    says inside a desktop), found through /proc; None if there is none."""
    namespace = os.readlink(f"/proc/{member}/ns/pid")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != namespace:
                continue
            nspids = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(nspids.split()[-1]) == inner_pid:
            return int(entry.name)
    return None
