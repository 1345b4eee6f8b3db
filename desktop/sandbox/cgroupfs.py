"""The kernel's cgroup files as desktop/sandbox/cgroups.py uses them: which hierarchies are mounted and where this
process sits in each, reading and writing control files, waiting for the kernel, and removing a tree of cgroups
with every process in it (a closing server's, or one a dead server left).

Waiting is written once, as generators that yield how long to sleep before looking again; `run_sync` and
`run_async` drive the same steps with `time.sleep` (closing, cleaning at start) or `asyncio.sleep` (pause,
reset and delete on the event loop), so no procedure exists twice. Reads and writes go straight to the files:
no process is spawned, a read costs a few microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from desktop.core.errors import Timeout
from desktop.sandbox import linux

logger = logging.getLogger("sandbox_desktop.cgroups")

T = TypeVar("T")
Steps = Generator[float, None, T]
"""A procedure that yields the seconds to sleep before it goes on, and returns its result."""

PREFIX = "sandbox-desktop-"
SERVER_NAME = re.compile(r"^sandbox-desktop-(\d+)-[0-9a-f]{8}$")
"""A server's top cgroup: its pid (to tell a dead server's leftovers) and a token (two roots in one process,
or two servers in different pid namespaces with the same pid, never share a name)."""

FIRST_POLL_S = 0.0002
LAST_POLL_S = 0.002
"""Polls start fast (a v1 freezer is done in a fraction of a millisecond) and back off to 2 ms, so that a wait
ends at most 2 ms after the kernel is done (a look is one read of a few microseconds)."""


# ---- where the hierarchies are ----

@dataclass(frozen=True)
class Mount:
    """One mounted cgroup hierarchy: v1 with the controllers bound to it, or the v2 one."""

    version: int
    path: Path
    root: str
    """The hierarchy's path this mount shows at `path` ("/" unless a container bind-mounted a subtree)."""
    controllers: frozenset[str]
    """v1: the controllers (and `name=` of a named hierarchy) bound to it; v2: empty (see cgroup.controllers)."""


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(mountinfo: str, known: frozenset[str]) -> list[Mount]:
    """The cgroup mounts of /proc/self/mountinfo; `known` are the kernel's v1 controller names (/proc/cgroups)."""
    found = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        if rest[0] == "cgroup2":
            found.append(Mount(2, Path(_unescape(fields[4])), _unescape(fields[3]), frozenset()))
        else:
            options = frozenset(o for o in rest[2].split(",") if o in known or o.startswith("name="))
            found.append(Mount(1, Path(_unescape(fields[4])), _unescape(fields[3]), options))
    return found


def parse_own(proc_cgroup: str) -> dict[frozenset[str], str]:
    """This process's cgroup in each hierarchy (/proc/self/cgroup), keyed by the hierarchy's controllers;
    the v2 hierarchy's key is the empty set."""
    own = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            own[frozenset(c for c in parts[1].split(",") if c)] = parts[2]
    return own


def known_controllers(proc_cgroups: str) -> frozenset[str]:
    """The controller names of /proc/cgroups (its first column)."""
    return frozenset(line.split()[0] for line in proc_cgroups.splitlines() if line and not line.startswith("#"))


def own_dir(mount: Mount, own: dict[frozenset[str], str]) -> Path | None:
    """Where this process's cgroup of `mount`'s hierarchy is on disk, or None where the mount does not show it
    (another hierarchy's mount of the same controllers, or a container's mount of a subtree we are outside)."""
    path = own.get(mount.controllers)
    if path is None:
        return None
    relative = os.path.relpath(path, mount.root)
    if relative.startswith(".."):
        return None
    return mount.path if relative == "." else mount.path / relative


def mounted() -> tuple[list[Mount], dict[frozenset[str], str]]:
    """The cgroup mounts of this machine and where this process sits in each hierarchy."""
    try:
        known = known_controllers(Path("/proc/cgroups").read_text())
    except OSError:
        known = frozenset()
    try:
        return (parse_mounts(Path("/proc/self/mountinfo").read_text(), known),
                parse_own(Path("/proc/self/cgroup").read_text()))
    except OSError:
        return [], {}


# ---- the files ----

def read(path: Path) -> str:
    with open(path) as f:
        return f.read()


def write(path: Path, value: str) -> None:
    """One write(2) of `value`: the kernel applies a control file's value per write."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def keyed(path: Path) -> dict[str, int]:
    """A file of `key value` lines (cgroup.events, cpu.stat, memory.events, memory.oom_control)."""
    out = {}
    for line in read(path).splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value)
    return out


def procs(cgroup: Path) -> list[int]:
    """The processes directly in `cgroup` (cgroup.procs does not list its children's)."""
    try:
        return [int(pid) for pid in read(cgroup / "cgroup.procs").split()]
    except FileNotFoundError:
        return []


def signal_all(pids: Iterable[int]) -> None:
    """SIGKILL to each of `pids` that still exists, never to this process."""
    for pid in pids:
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def rmdir(path: Path) -> bool:
    """Remove one empty cgroup: False while the kernel still counts a process in it (EBUSY)."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise
        return False
    return True


# ---- waiting ----

def until(done: Callable[[], bool], timeout: float, what: str) -> Steps[None]:
    """Sleep-steps until `done()`, at most `timeout` seconds; then `Timeout` naming `what`."""
    deadline = time.monotonic() + timeout
    delay = FIRST_POLL_S
    while not done():
        if time.monotonic() > deadline:
            raise Timeout(f"{what}: not done after {timeout:g} s")
        yield delay
        delay = min(delay * 2, LAST_POLL_S)


def run_sync(steps: Steps[T]) -> T:
    try:
        delay = next(steps)
        while True:
            time.sleep(delay)
            delay = steps.send(None)
    except StopIteration as stop:
        return stop.value


async def run_async(steps: Steps[T]) -> T:
    try:
        delay = next(steps)
        while True:
            await asyncio.sleep(delay)
            delay = steps.send(None)
    except StopIteration as stop:
        return stop.value


# ---- whole trees: a server's own, and what dead servers left ----

def walk_up(top: Path) -> list[Path]:
    """Every cgroup under `top` and `top` itself, children before their parents (the order rmdir needs)."""
    return [Path(d) for d, _, _ in os.walk(top, topdown=False)]


def remove_tree(top: Path, timeout: float) -> Steps[None]:
    """Kill every process in the cgroups under `top` and remove them, bounded by `timeout`.

    A frozen process cannot die in a v1 freezer, so the tree is thawed first; v2's cgroup.kill takes the whole
    tree at once where the kernel has it; otherwise SIGKILL each listed process until none is left (a process
    forking as it is killed is listed again at the next look, and the look is repeated)."""
    cgroups = walk_up(top)

    def empty() -> bool:
        left = [pid for cgroup in cgroups for pid in procs(cgroup) if pid != os.getpid()]
        signal_all(left)
        return not left

    if not empty():  # each write takes the kernel's cgroup mutex, which every cgroup change on the machine shares
        for cgroup in cgroups:
            for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                with contextlib.suppress(FileNotFoundError):
                    write(cgroup / name, value)
        with contextlib.suppress(FileNotFoundError):
            write(top / "cgroup.kill", "1")
        yield from until(empty, timeout, f"emptying {top}")
    yield from removed(cgroups, timeout)


def removed(cgroups: list[Path], timeout: float) -> Steps[None]:
    """Remove empty `cgroups` (children first), waiting while the kernel still counts an exiting process."""
    yield from until(lambda: all(rmdir(cgroup) for cgroup in cgroups), timeout, f"removing {cgroups[-1]}")


def lock(path: Path) -> int:
    """Hold an exclusive flock on the cgroup directory `path` for as long as the returned descriptor is open:
    the mark of a live server that another server can test whatever pid namespace either is in."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def abandoned(path: Path) -> bool:
    """Whether `path` is a server's top cgroup that its server left: its pid is gone and nobody holds its lock.
    Both must hold: a live pid may be a server between mkdir and flock, and a pid not seen here may be a live
    server in another pid namespace (its lock tells)."""
    match = SERVER_NAME.match(path.name)
    if not match or linux.pid_alive(int(match.group(1))):
        return False
    try:
        os.close(lock(path))
    except BlockingIOError:
        return False
    except OSError:
        return False
    return True


def clean_leftovers(own: Path, timeout: float) -> list[Path]:
    """Remove, with their processes, the top cgroups of dead servers under `own`; returns what was removed."""
    removed = []
    try:
        entries = [Path(e.path) for e in os.scandir(own) if e.is_dir() and e.name.startswith(PREFIX)]
    except OSError:
        return []
    for top in entries:
        if not abandoned(top):
            continue
        try:
            run_sync(remove_tree(top, timeout))
            removed.append(top)
        except (OSError, Timeout) as e:
            logger.warning("could not remove the cgroups a dead server left at %s: %s", top, e)
    return removed
