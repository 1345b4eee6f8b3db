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


def kill_marked(marker: str, grace_s: float = 1.0) -> list[int]:
    """SIGTERM every marked process, SIGKILL what is left after `grace_s`; returns the pids found."""
    pids = marked_pids(marker)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    remaining = pids
    while remaining and time.monotonic() < deadline:
        time.sleep(0.02)
        remaining = [p for p in remaining if _alive(p)]
    for pid in remaining:
        _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
