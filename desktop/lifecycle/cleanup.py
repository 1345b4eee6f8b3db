"""Ending a desktop's apps: at its stop (all of them) and at its reset (all but the session's own).

A desktop's processes carry its marker in their environment (desktop/processes/reaper.py); the registry may be
shared with other desktops, so the marker, read off /proc with the server's pids, tells this desktop's apart.
"""

from __future__ import annotations

import asyncio

from desktop.lifecycle.supervisor import Supervisor
from desktop.processes import ProcessManager, reaper
from sandbox_desktop_wire.enums import ProcessOwner

STOP_GRACE_MS = 1000
RESET_GRACE_MS = 500


async def end_apps(processes: ProcessManager, marker: str, keep: Supervisor | None = None) -> None:
    """Stop the desktop's apps, politely, then whatever of them is left. With `keep` (a reset), the session's
    own processes stay: its supervised children, what the accessibility bus started (its daemon, the registry
    it activated), and every process still marked then ends; without (a stop), only the launched apps end here
    and the supervisor stops the rest."""
    if keep is None:
        ours = set(await asyncio.to_thread(reaper.marked_pids, marker))
        apps = [p for p in processes.list(ProcessOwner.DESKTOP) if p.running and not p.protected and p.host_pid in ours]
        await asyncio.gather(*(p.stop(STOP_GRACE_MS) for p in apps), return_exceptions=True)
        return
    table = await asyncio.to_thread(reaper.scan, marker)
    kept = {child.host_pid for child in keep.children.values()}
    kept |= table.descendants(keep.bus_daemons())  # the accessibility bus's
    kept |= table.bus_activated("accessibility")  # its registry
    apps = [p for p in processes.list(ProcessOwner.DESKTOP)
            if p.running and not p.protected and p.host_pid in table.starter_bus]
    # Their children too, marked or not (a browser's zygote may clear its environment), found before the apps end
    # and their children are handed to init.
    children = table.descendants({p.host_pid for p in apps})
    await asyncio.gather(*(p.stop(RESET_GRACE_MS) for p in apps), return_exceptions=True)
    await asyncio.to_thread(reaper.kill_marked_except, marker, kept, children)
