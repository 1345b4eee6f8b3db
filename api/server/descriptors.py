"""The server's descriptor limit, raised at start: each desktop holds a few tens of descriptors in the server
(its X connections, its sandbox's channel, its event pipes: docs/operations.md, "Descriptors"), and a soft
limit of 1024, the usual default, would end a server at about 30 desktops with "Too many open files"."""

from __future__ import annotations

import logging
import resource
from pathlib import Path

log = logging.getLogger("sandbox_desktop.descriptors")


def _ceiling(hard: int) -> int:
    """The most a soft limit may be: the hard limit, or the kernel's per-process maximum when that is unlimited."""
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return 1 << 20  # the kernel's default nr_open


def raise_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force (logged)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _ceiling(hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, wanted, exc)
            return soft
        log.info("descriptor limit raised from %d to %d (the hard limit)", soft, wanted)
        return wanted
    log.info("descriptor limit %s (the hard limit already)", "unlimited" if soft == resource.RLIM_INFINITY else soft)
    return soft
