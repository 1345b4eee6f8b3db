"""A process of the API by the pid the tests' own process may signal and read in /proc.

A process of a sandboxed desktop has two pids: its `pid` in the desktop's own pid namespace (what the desktop's
windows and terminals show) and its `hostPid` in the server's (docs/security.md); a process outside any sandbox
has only `pid`."""

from __future__ import annotations

from typing import Any


def host_pid(process: dict[str, Any]) -> int:
    """The pid of a process info or a status's process, as this machine's /proc numbers it."""
    return int(process.get("hostPid") or process["pid"])
