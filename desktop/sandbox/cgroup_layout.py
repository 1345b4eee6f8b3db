"""Which cgroup hierarchy serves each feature on this machine, and the server's own top cgroup in each.

Per feature the version PREFERRED names where it works, else the other:
- memory, pids, cpu limits: v2 where the controller can be delegated down to our cgroups (offered in the
  server's cgroup.controllers and enabled in the cgroup.subtree_control of the server's cgroup, of ours and of
  each desktop's), else the v1 hierarchy of that controller;
- freeze: the v1 freezer where one is mounted (it is faster, see PREFERRED), else v2 cgroup.freeze (kernel 5.2);
- kill: v2 cgroup.kill (kernel 5.14; race-free, the kernel also takes what forks meanwhile), else SIGKILL to each
  listed process, frozen first where there is a freezer so that nothing forks away;
- CPU usage: v2 cpu.stat (core, needs no controller), else v1 cpuacct.
On a hybrid machine (v1 controllers, a bare v2 at /sys/fs/cgroup/unified) that is v1 for the limits and freeze
and v2 for kill and CPU usage; on a pure v2 machine all v2. A process joins every hierarchy that serves
something (`Layout.joined`).

v2's no-internal-processes rule: a cgroup that enables controllers for its children holds no process itself.
Enabling them in the server's own cgroup fails (EBUSY) while processes sit in it; where the server is the only
one there (a systemd service with Delegate=yes), the server moves itself into a leaf of its top cgroup,
`<top>/server`, and enables them; otherwise the controller is reported missing with that reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from pathlib import Path

from desktop.sandbox import cgroupfs
from desktop.sandbox.cgroupfs import read, write

SERVER_LEAF = "server"


class Feature(StrEnum):
    MEMORY = "memory"
    PIDS = "pids"
    CPU = "cpu"
    FREEZE = "freeze"
    KILL = "kill"


LIMIT_CONTROLLERS = {Feature.MEMORY: "memory", Feature.PIDS: "pids", Feature.CPU: "cpu"}
FEATURE_OF = {"memory": Feature.MEMORY, "pids": Feature.PIDS, "cpu": Feature.CPU, "freezer": Feature.FREEZE}
"""The feature each v1 controller serves (cpuacct serves only the CPU usage, which is no feature)."""


@dataclass(eq=False)
class Hierarchy:
    """One hierarchy as this server uses it: its top cgroup there, held locked while the server lives."""

    version: int
    top: Path
    controllers: frozenset[str]
    """v1: the controllers bound to the hierarchy; v2: those enabled down to each desktop's cgroups."""
    lock_fd: int
    holds_server: bool = False
    """v2: the server moved itself into `<top>/server` (see the module's docstring)."""

    def __str__(self) -> str:
        return f"cgroup v{self.version} {self.top.parent}"


@dataclass
class Layout:
    """The hierarchies this server made its top cgroup in, and which serves what (None: nothing here does)."""

    name: str
    limits: dict[Feature, Hierarchy] = field(default_factory=dict)
    freeze: Hierarchy | None = None
    kill: Hierarchy | None = None
    """The v2 hierarchy whose cgroup.kill kills; None: SIGKILL to each process (`track` lists them)."""
    cpu_usage: Hierarchy | None = None
    track: Hierarchy | None = None
    """Where the desktop's processes are listed: the v2 hierarchy where it is used, else the freezer's."""
    joined: list[Hierarchy] = field(default_factory=list)
    how: dict[Feature, str] = field(default_factory=dict)
    missing: dict[Feature, str] = field(default_factory=dict)

    def close(self) -> None:
        for hierarchy in self.joined:
            with contextlib.suppress(OSError):
                os.close(hierarchy.lock_fd)


def _make_top(own: Path, name: str, version: int, controllers: frozenset[str],
              timeout: float) -> Hierarchy | str:
    """Clean what dead servers left under `own`, then make and lock our top cgroup there (or say why not)."""
    cgroupfs.clean_leftovers(own, timeout)
    top = own / name
    try:
        os.mkdir(top)
        return Hierarchy(version, top, controllers, cgroupfs.lock(top))
    except OSError as e:
        with contextlib.suppress(OSError):
            os.rmdir(top)
        return f"cannot create {top}: {e.strerror}"


def _enable(cgroup: Path, controller: str) -> None:
    if controller not in read(cgroup / "cgroup.subtree_control").split():
        write(cgroup / "cgroup.subtree_control", f"+{controller}")


def _delegate(own: Path, hierarchy: Hierarchy, wanted: list[str]) -> dict[str, str]:
    """Enable `wanted` controllers from the server's cgroup down through our top; returns why each other failed."""
    try:
        offered = set(read(own / "cgroup.controllers").split())
    except OSError:
        offered = set()
    why = {c: f"cgroup v2 does not offer {c} to {own} (its cgroup.controllers)" for c in wanted if c not in offered}
    enabled = set(hierarchy.controllers)
    for controller in (c for c in wanted if c in offered):
        try:
            try:
                _enable(own, controller)
            except OSError as e:
                if e.errno != errno.EBUSY or not _move_server_out(own, hierarchy):
                    raise
                _enable(own, controller)
            _enable(hierarchy.top, controller)
            enabled.add(controller)
        except OSError as e:
            why[controller] = (f"cannot enable {controller} in {own}/cgroup.subtree_control: {e.strerror}"
                               + (" (other processes sit in the server's cgroup: cgroup v2 lets no cgroup with"
                                  " controllers for its children hold processes; run the server in a cgroup of"
                                  " its own, e.g. a systemd service with Delegate=yes)"
                                  if e.errno == errno.EBUSY else ""))
    hierarchy.controllers = frozenset(enabled)
    return why


def _move_server_out(own: Path, hierarchy: Hierarchy) -> bool:
    """Where this server is the only process of its v2 cgroup, move it into `<top>/server` so that its cgroup
    may enable controllers for children; False where others are there too (they are not ours to move)."""
    if hierarchy.holds_server or cgroupfs.procs(own) != [os.getpid()]:
        return False
    leaf = hierarchy.top / SERVER_LEAF
    os.mkdir(leaf)
    write(leaf / "cgroup.procs", str(os.getpid()))
    hierarchy.holds_server = True
    return True


PREFERRED = {Feature.MEMORY: 2, Feature.PIDS: 2, Feature.CPU: 2, Feature.FREEZE: 1, Feature.KILL: 2}
"""The cgroup version that serves each feature where both could. Freeze prefers v1: its freezer freezes a
sleeping process where it sleeps, where v2 wakes every process to trap it. On the same 10 sleeping processes,
alternating, on the CI machine under load: 0.41 against 0.60 ms median, 0.50 against 11 ms at p90 (running
processes must be scheduled to freeze either way: ~5-7 ms for 2 busy of 30 there)."""


def discover(prefer: Mapping[Feature, int], timeout: float) -> Layout:
    """Find the hierarchies, clean dead servers' leftovers in them, make this server's top cgroups, and decide
    which hierarchy serves each feature: the version `prefer` (over PREFERRED) names where it works, else the
    other (tests and benchmarks run each way on a hybrid machine with it)."""
    finder = _Finder(timeout)
    layout = finder.layout
    versions = {**PREFERRED, **prefer}

    def first(feature: Feature, v2: Callable[[], Hierarchy | None],
              v1: Callable[[], Hierarchy | None]) -> Hierarchy | None:
        ways = (v2, v1) if versions[feature] == 2 else (v1, v2)
        return ways[0]() or ways[1]()

    for feature, controller in LIMIT_CONTROLLERS.items():
        if hierarchy := first(feature, partial(finder.v2_limit, controller), partial(finder.v1, controller)):
            layout.limits[feature] = hierarchy
    layout.freeze = first(Feature.FREEZE, lambda: finder.v2_file(Feature.FREEZE, "cgroup.freeze"),
                          lambda: finder.v1("freezer"))
    if versions[Feature.KILL] == 2:
        layout.kill = finder.v2_file(Feature.KILL, "cgroup.kill")
    layout.cpu_usage = finder.v2_file(None, "cpu.stat") or finder.v1("cpuacct")
    layout.track = finder.v2 or layout.freeze or next(iter(finder.v1s.values()), None)
    _describe(layout, finder.why)
    made = [h for h in (finder.v2, *finder.v1s.values()) if h is not None]
    layout.joined = [h for h in made if h is layout.track or h in (
        *layout.limits.values(), layout.freeze, layout.cpu_usage)]
    for unused in (h for h in made if h not in layout.joined):
        os.close(unused.lock_fd)
        cgroupfs.rmdir(unused.top)
    return layout


class _Finder:
    """The hierarchies of this machine, each opened (our top cgroup made) at the first feature that needs it."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.mounts, self.own = cgroupfs.mounted()
        self.layout = Layout(f"{cgroupfs.PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
        self.why: dict[Feature, list[str]] = defaultdict(list)
        self.v1s: dict[Path, Hierarchy] = {}
        self.v2 = self._open_v2()

    def _open_v2(self) -> Hierarchy | None:
        mount = next((m for m in self.mounts if m.version == 2), None)
        self.v2_own = cgroupfs.own_dir(mount, self.own) if mount else None
        made = "no cgroup v2 hierarchy is mounted" if mount is None else (
            f"cgroup v2 at {mount.path} does not show this server's cgroup" if self.v2_own is None
            else _make_top(self.v2_own, self.layout.name, 2, frozenset(), self.timeout))
        if isinstance(made, str):
            for feature in Feature:
                self.why[feature].append(made)
            return None
        return made

    def v2_limit(self, controller: str) -> Hierarchy | None:
        """The v2 hierarchy, once `controller` is enabled down to our cgroups."""
        if self.v2 is None or self.v2_own is None:
            return None
        for failed, reason in _delegate(self.v2_own, self.v2, [controller]).items():
            self.why[FEATURE_OF[failed]].append(reason)
        return self.v2 if controller in self.v2.controllers else None

    def v2_file(self, feature: Feature | None, filename: str) -> Hierarchy | None:
        """The v2 hierarchy where this kernel's cgroups have `filename` (cgroup.freeze, cgroup.kill, cpu.stat)."""
        if self.v2 is not None and (self.v2.top / filename).exists():
            return self.v2
        if self.v2 is not None and feature is not None:
            self.why[feature].append(f"cgroup v2 has no {filename} (kernel {os.uname().release})")
        return None

    def v1(self, controller: str) -> Hierarchy | None:
        """The v1 hierarchy of `controller`, our top cgroup made there (once for co-mounted controllers)."""
        feature = FEATURE_OF.get(controller)
        mount = next((m for m in self.mounts if m.version == 1 and controller in m.controllers), None)
        where = cgroupfs.own_dir(mount, self.own) if mount else None
        if mount is None or where is None:
            if feature:
                self.why[feature].append(
                    f"no cgroup v1 hierarchy of {controller} {'is mounted' if mount is None else 'shows ours'}")
            return None
        if mount.path not in self.v1s:
            made = _make_top(where, self.layout.name, 1, mount.controllers, self.timeout)
            if isinstance(made, str):
                if feature:
                    self.why[feature].append(made)
                return None
            self.v1s[mount.path] = made
        return self.v1s[mount.path]


def _describe(layout: Layout, why: dict[Feature, list[str]]) -> None:
    for feature, hierarchy in layout.limits.items():
        layout.how[feature] = f"{hierarchy} ({LIMIT_CONTROLLERS[feature]})"
    if layout.freeze is not None:
        layout.how[Feature.FREEZE] = f"{layout.freeze} ({'cgroup.freeze' if layout.freeze.version == 2 else 'freezer'})"
    if layout.kill is not None:
        layout.how[Feature.KILL] = f"{layout.kill} (cgroup.kill)"
    elif layout.track is not None:
        layout.how[Feature.KILL] = (f"SIGKILL to each process of {layout.track}, "
                                    + ("frozen first" if layout.freeze else "repeated (no freezer: not race-free)"))
    for feature in Feature:
        if feature not in layout.how:
            layout.missing[feature] = "; ".join(why[feature]) or "not available"
