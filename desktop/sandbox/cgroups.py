"""The cgroups of each desktop: limits, usage, freeze (pause) and kill (reset, delete), on cgroup v1, v2 or both.

One `CgroupRoot` per server; it makes the server's top cgroup in each hierarchy it uses, under the server's own
cgroup there (`<own>/sandbox-desktop-<pid>-<token>`), and one `DesktopCgroup` per desktop below it:

    <own>/sandbox-desktop-<pid>-<token>/<desktop id>/session   Xvfb, openbox, the buses, PulseAudio, the init
    <own>/sandbox-desktop-<pid>-<token>/<desktop id>/apps      what the agent runs

Memory and pids limits bind `apps` (an app past them is OOM-killed or cannot fork, the session stays up); the
CPU limit binds the whole desktop; freeze and kill take the whole desktop or one kind (reset kills the apps).
Which hierarchy serves which feature is cgroup_layout.py's choice (v2 where it can, but the v1 freezer where
there is one: on a hybrid machine the limits and freeze are v1, kill and CPU usage v2); what no hierarchy serves
is in `missing` with the reason, and a limit of it is reported as not enforced, never an error of the caller
(docs/sandbox-limits.md).

    root = CgroupRoot.open()                     # cleans what dead servers left; root.probe says what works
    cg = root.create("dsk_1", Limits.parse({"memoryMb": 2048, "pids": 512, "cpu": 1.5}))
    cg.procs_files(CgroupKind.APPS)              # the init's child writes "0" to each before exec
    cg.add(pid, CgroupKind.SESSION)              # or the server moves a process itself
    cg.usage()                                   # Usage(memory_bytes, cpu_seconds, pids, oom_kills): file reads
    await cg.freeze(); await cg.thaw()           # pause/resume; freeze returns once the kernel says frozen
    cg.frozen()                                  # what the kernel says; freeze/thaw/frozen take a kind too
    cg.set_limits(Limits(memory_mb=4096))        # at runtime; returns the fields not enforced here, with why
    await cg.kill(CgroupKind.APPS)               # reset; kill() ends everything, double-forked daemons too
    await cg.remove()                            # delete: kill, then remove its cgroups
    await root.aclose()                          # at shutdown (close() off the loop): all processes and cgroups gone

Several servers share a machine: names carry the pid and a random token, a server removes only its own top
cgroups, and at open removes those whose server died (pid gone and no process holding the flock each server
keeps on its top cgroups). Every wait is bounded (`timeout`) and ends in desktop.core.errors.Timeout.
"""

from __future__ import annotations

import errno
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from desktop.core.errors import Timeout, invalid_action
from desktop.sandbox import cgroupfs
from desktop.sandbox.cgroup_layout import SERVER_LEAF, Feature, Hierarchy, Layout, discover
from desktop.sandbox.cgroupfs import Steps, keyed, procs, read, run_async, run_sync, signal_all, until, write
from desktop.sandbox.limits import CPU_PERIOD_US, WIRE, Limits, Usage

__all__ = ["CgroupKind", "CgroupRoot", "DesktopCgroup", "Feature", "FeatureMissing", "Limits", "Probe", "Usage",
           "probe"]

logger = logging.getLogger("sandbox_desktop.cgroups")
DESKTOP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TIMEOUT_S = 2.0
"""Bound of every wait (freeze, kill, removal): far beyond the milliseconds they take, short enough that a stuck
process (uninterruptible sleep on a dead mount) ends in an error and not a hung request."""
LIMIT_FIELDS = {Feature.MEMORY: "memory_mb", Feature.PIDS: "pids", Feature.CPU: "cpu"}


class CgroupKind(StrEnum):
    SESSION = "session"
    APPS = "apps"


class FeatureMissing(RuntimeError):
    """Freeze or kill asked of a machine without them; callers check `CgroupRoot.features` first (a pause
    without a freezer falls back to signals)."""

    def __init__(self, feature: Feature, reason: str) -> None:
        super().__init__(f"cgroup {feature} is not available here: {reason}")
        self.feature = feature


@dataclass(frozen=True)
class Probe:
    """What works on this machine: for each feature how (the hierarchy and file), or why not."""

    how: dict[Feature, str]
    missing: dict[Feature, str]

    @property
    def features(self) -> frozenset[Feature]:
        return frozenset(self.how)


class CgroupRoot:
    """This server's cgroups: its top cgroup in each hierarchy and the desktops below."""

    def __init__(self, layout: Layout, timeout: float) -> None:
        self._layout = layout
        self.timeout = timeout
        self.probe = Probe(dict(layout.how), dict(layout.missing))
        self.desktops: dict[str, DesktopCgroup] = {}
        self.closed = False

    @classmethod
    def open(cls, *, prefer: Mapping[Feature, int] | None = None, timeout: float = TIMEOUT_S) -> CgroupRoot:
        """Find the hierarchies, remove dead servers' leftovers, make this server's top cgroups. Never fails for
        lack of cgroups: what is missing is in `missing`. `prefer`: the cgroup version to serve a feature from
        where both could, over cgroup_layout.PREFERRED (tests and benchmarks run each way with it; for KILL, 1
        is SIGKILL to each process rather than cgroup.kill)."""
        return cls(discover(prefer or {}, timeout), timeout)

    @property
    def features(self) -> frozenset[Feature]:
        return self.probe.features

    @property
    def missing(self) -> dict[Feature, str]:
        return self.probe.missing

    @property
    def name(self) -> str:
        """The name of this server's top cgroups (`sandbox-desktop-<pid>-<token>`)."""
        return self._layout.name

    @property
    def tops(self) -> list[Path]:
        """This server's top cgroup in each hierarchy its desktops' processes join."""
        return [h.top for h in self._layout.joined]

    def unenforced(self, limits: Limits) -> dict[str, str]:
        """The limits given that this machine cannot enforce, by wire field (`limits.memoryMb`), with why."""
        return {f"limits.{WIRE[name]}": self.missing[feature]
                for feature, name in LIMIT_FIELDS.items()
                if getattr(limits, name) is not None and feature in self.missing}

    def create(self, desktop_id: str, limits: Limits | None = None) -> DesktopCgroup:
        """Make a desktop's cgroups in every hierarchy and apply `limits` (~1-2 ms; see bench/sandbox_cgroups.py)."""
        if self.closed:
            raise RuntimeError("the cgroup root is closed")
        if not DESKTOP_ID.match(desktop_id) or desktop_id == SERVER_LEAF or desktop_id in self.desktops:
            raise ValueError(f"desktop id {desktop_id!r} is not a new cgroup name")
        made: list[Path] = []
        try:
            for hierarchy in self._layout.joined:
                desktop = hierarchy.top / desktop_id
                desktop.mkdir()
                made.append(desktop)
                if hierarchy.version == 2 and (down := sorted(hierarchy.controllers & {"memory", "pids"})):
                    write(desktop / "cgroup.subtree_control", " ".join(f"+{c}" for c in down))
                for kind in CgroupKind:
                    (desktop / kind).mkdir()
                    made.append(desktop / kind)
            cgroup = DesktopCgroup(self, self._layout, desktop_id)
            cgroup.set_limits(limits or Limits())
        except BaseException:
            for path in reversed(made):
                cgroupfs.rmdir(path)
            raise
        self.desktops[desktop_id] = cgroup
        return cgroup

    def close(self) -> None:
        """Kill every desktop's processes and remove all this server made (a v2 leaf holding the server itself
        stays, with its top cgroup, until the server exits; the next server's open removes them). Blocks for
        the milliseconds that takes: on the event loop, `aclose`."""
        run_sync(self._close_steps())

    async def aclose(self) -> None:
        await run_async(self._close_steps())

    def _close_steps(self) -> Steps[None]:
        if self.closed:
            return
        self.closed = True
        try:
            steps = [cgroup.remove_steps() for cgroup in list(self.desktops.values())]
            steps += [cgroupfs.remove_tree(h.top, self.timeout) for h in self._layout.joined if not h.holds_server]
            for step in steps:  # one stuck desktop does not keep the others' processes alive
                try:
                    yield from step
                except (OSError, Timeout) as e:
                    logger.warning("cgroups left at close (the next server's start removes them): %s", e)
        finally:
            self._layout.close()

    def __enter__(self) -> CgroupRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def probe() -> Probe:
    """Which of memory, pids, cpu, freeze and kill work on this machine and why not: a root opened and closed."""
    with CgroupRoot.open() as root:
        return root.probe


class DesktopCgroup:
    """One desktop's cgroups: `session` and `apps` below the desktop's own, in each hierarchy. One operation at
    a time (the desktop's lifecycle runs pause, resume, reset and delete one after another)."""

    def __init__(self, root: CgroupRoot, layout: Layout, desktop_id: str) -> None:
        self.root = root
        self._layout = layout
        self.id = desktop_id
        self.limits = Limits()
        self.removed = False

    def _dir(self, hierarchy: Hierarchy, kind: CgroupKind | None = None) -> Path:
        return hierarchy.top / self.id / kind if kind else hierarchy.top / self.id

    def _live(self) -> None:
        if self.removed:
            raise RuntimeError(f"the cgroups of desktop {self.id} are removed")

    def _need(self, feature: Feature, hierarchy: Hierarchy | None) -> Hierarchy:
        self._live()
        if hierarchy is None:
            raise FeatureMissing(feature, self.root.missing.get(feature, "not available"))
        return hierarchy

    # ---- processes ----

    def procs_files(self, kind: CgroupKind) -> tuple[str, ...]:
        """The cgroup.procs file of `kind` in each hierarchy: a process joins by writing "0" (itself) to each, as
        the sandbox's init does in a child before exec. Empty where no hierarchy is usable."""
        return tuple(str(self._dir(h, kind) / "cgroup.procs") for h in self._layout.joined)

    def add(self, pid: int, kind: CgroupKind) -> None:
        """Move process `pid` (all its threads) into `kind`, in every hierarchy."""
        for path in self.procs_files(kind):
            write(Path(path), str(pid))

    def pids(self, kind: CgroupKind | None = None) -> list[int]:
        """The processes of `kind`, or of the whole desktop."""
        track = self._layout.track
        if track is None:
            return []
        return sorted(pid for k in ([kind] if kind else CgroupKind) for pid in procs(self._dir(track, k)))

    # ---- limits and usage ----

    def set_limits(self, limits: Limits) -> dict[str, str]:
        """Apply `limits` (those this machine can enforce); returns the others by wire field, with why."""
        layout = self._layout
        if (memory := layout.limits.get(Feature.MEMORY)) and limits.memory_mb != self.limits.memory_mb:
            _set_memory(memory, self._dir(memory, CgroupKind.APPS), limits.memory_bytes)
        if (pids := layout.limits.get(Feature.PIDS)) and limits.pids != self.limits.pids:
            write(self._dir(pids, CgroupKind.APPS) / "pids.max", "max" if limits.pids is None else str(limits.pids))
        if (cpu := layout.limits.get(Feature.CPU)) and limits.cpu != self.limits.cpu:
            _set_cpu(cpu, self._dir(cpu), limits.cpu_quota_us)
        self.limits = limits
        return self.root.unenforced(limits)

    def usage(self) -> Usage:
        """What the desktop uses now: a few reads of cgroup files, no process spawned (None: not measurable)."""
        self._live()
        layout = self._layout
        memory_bytes = oom_kills = pids = None
        cpu_seconds = None
        if memory := layout.limits.get(Feature.MEMORY):
            v2 = memory.version == 2
            memory_bytes = int(read(self._dir(memory) / ("memory.current" if v2 else "memory.usage_in_bytes")))
            # v1 counts an OOM kill in the cgroup it happened in only, v2 in its ancestors too: sum the leaves
            # a kernel before 4.13 does not count them: None, not 0
            counts = [keyed(self._dir(memory, kind) / ("memory.events" if v2 else "memory.oom_control"))
                      .get("oom_kill") for kind in CgroupKind]
            oom_kills = None if None in counts else sum(c for c in counts if c is not None)
        if usage := layout.cpu_usage:
            cpu_seconds = (keyed(self._dir(usage) / "cpu.stat")["usage_usec"] / 1e6 if usage.version == 2
                           else int(read(self._dir(usage) / "cpuacct.usage")) / 1e9)
        if counted := layout.limits.get(Feature.PIDS):
            pids = int(read(self._dir(counted) / "pids.current"))
        elif layout.track is not None:
            pids = len(self.pids())
        return Usage(memory_bytes, cpu_seconds, pids, oom_kills)

    # ---- freeze ----

    def frozen(self, kind: CgroupKind | None = None) -> bool:
        """Whether the kernel has `kind` (or the whole desktop) frozen: its own freeze or its parent's."""
        hierarchy = self._need(Feature.FREEZE, self._layout.freeze)
        path = self._dir(hierarchy, kind)
        if hierarchy.version == 2:
            return keyed(path / "cgroup.events").get("frozen") == 1
        return read(path / "freezer.state").strip() == "FROZEN"

    def _self_frozen(self, hierarchy: Hierarchy, kind: CgroupKind | None) -> bool:
        name = "cgroup.freeze" if hierarchy.version == 2 else "freezer.self_freezing"
        return read(self._dir(hierarchy, kind) / name).strip() == "1"

    def _set_frozen(self, hierarchy: Hierarchy, kind: CgroupKind | None, on: bool) -> None:
        if hierarchy.version == 2:
            write(self._dir(hierarchy, kind) / "cgroup.freeze", "1" if on else "0")
        else:
            write(self._dir(hierarchy, kind) / "freezer.state", "FROZEN" if on else "THAWED")

    def freeze_steps(self, kind: CgroupKind | None = None) -> Steps[None]:
        hierarchy = self._need(Feature.FREEZE, self._layout.freeze)
        self._set_frozen(hierarchy, kind, True)
        try:
            yield from until(lambda: self.frozen(kind), self.root.timeout, f"freezing desktop {self.id} {kind or ''}")
        except BaseException:
            self._set_frozen(hierarchy, kind, False)  # not half-frozen: as it was, and the caller told
            raise

    async def freeze(self, kind: CgroupKind | None = None) -> None:
        """Freeze the desktop (or one kind): returns once the kernel says every process is frozen (they use no
        CPU until thawed); `Timeout`, thawed again, past the bound."""
        await run_async(self.freeze_steps(kind))

    async def thaw(self, kind: CgroupKind | None = None) -> None:
        """Undo `freeze(kind)` (a kind stays frozen while the whole desktop is). The kernel thaws at the write."""
        self._set_frozen(self._need(Feature.FREEZE, self._layout.freeze), kind, False)

    # ---- kill and remove ----

    def kill_steps(self, kind: CgroupKind | None = None) -> Steps[None]:
        layout = self._layout
        track = self._need(Feature.KILL, layout.track)
        leaves = [self._dir(track, k) for k in ([kind] if kind else CgroupKind)]

        def gone() -> bool:  # SIGKILL again at each look: a process that joined meanwhile is taken too
            left = [pid for leaf in leaves for pid in procs(leaf)]
            signal_all(left)
            return not left

        what = f"killing desktop {self.id} {kind or ''}"
        if not any(procs(leaf) for leaf in leaves):
            return
        freezer = layout.freeze
        if freezer is None or (layout.kill is not None and freezer.version == 2):
            if layout.kill is not None:  # frozen or not: a v2-frozen process dies of SIGKILL
                write(self._dir(layout.kill, kind) / "cgroup.kill", "1")
            yield from until(gone, self.root.timeout, what)  # without a freezer, SIGKILL again until none is left
            return
        yield from self._kill_with_freezer(freezer, layout.kill, kind, gone, what)

    def _kill_with_freezer(self, freezer: Hierarchy, killer: Hierarchy | None, kind: CgroupKind | None,
                           gone: Callable[[], bool], what: str) -> Steps[None]:
        """Kill where a freezer is in the way or must help. With cgroup.kill (`killer`) beside a v1 freezer: kill,
        then thaw what is frozen, since a v1-frozen process dies only once thawed. Without cgroup.kill: freeze
        (nothing forks away meanwhile), SIGKILL every process, thaw. Either way the freeze state of the desktop
        and its kinds is as before."""
        chain = [None, *CgroupKind] if kind is None else [None, kind]
        before = {k: self._self_frozen(freezer, k) for k in chain}
        if killer is not None:
            write(self._dir(killer, kind) / "cgroup.kill", "1")
        else:
            yield from self.freeze_steps(kind)
            gone()
        for k in chain:
            if (killer is None and k == kind and not before[k]) or (freezer.version == 1 and before[k]):
                self._set_frozen(freezer, k, False)
        yield from until(gone, self.root.timeout, what)
        if freezer.version == 1:
            for k in (k for k in chain if before[k]):
                yield from self.freeze_steps(k)

    async def kill(self, kind: CgroupKind | None = None) -> None:
        """SIGKILL every process of `kind`, or of the whole desktop (daemons that double-forked too: they stay in
        the cgroup), and return once none is left. Whether the desktop is frozen is as before."""
        await run_async(self.kill_steps(kind))

    def remove_steps(self) -> Steps[None]:
        if self.removed:
            return
        if self._layout.track is not None:
            yield from self.kill_steps()
        for hierarchy in self._layout.joined:
            yield from cgroupfs.removed([self._dir(hierarchy, kind) for kind in CgroupKind] + [self._dir(hierarchy)],
                                        self.root.timeout)
        self.removed = True
        self.root.desktops.pop(self.id, None)

    async def remove(self) -> None:
        """Kill every process of the desktop and remove its cgroups from every hierarchy."""
        await run_async(self.remove_steps())


def _set_memory(hierarchy: Hierarchy, apps: Path, limit: int | None) -> None:
    """The apps' memory limit, swap included (past it the OOM killer acts, the apps do not swap instead)."""
    if hierarchy.version == 2:
        write(apps / "memory.max", "max" if limit is None else str(limit))
        if (apps / "memory.swap.max").exists():
            write(apps / "memory.swap.max", "max" if limit is None else "0")
        return
    value = "-1" if limit is None else str(limit)
    memsw = apps / "memory.memsw.limit_in_bytes"
    has_memsw = memsw.exists()  # only with swap accounting; it must stay >= the limit, so it opens first
    before = read(memsw).strip() if has_memsw else ""
    if has_memsw:
        write(memsw, "-1")
    try:
        write(apps / "memory.limit_in_bytes", value)
    except OSError as e:
        if has_memsw:
            write(memsw, before)
        if e.errno != errno.EBUSY:
            raise
        used = int(read(apps / "memory.usage_in_bytes")) // (1024 * 1024)
        raise invalid_action(f"limits.memoryMb: the desktop's apps use {used} MiB and cannot be shrunk below it",
                             "limits.memoryMb") from e
    if has_memsw:
        write(memsw, value)


def _set_cpu(hierarchy: Hierarchy, desktop: Path, quota_us: int | None) -> None:
    if hierarchy.version == 2:
        write(desktop / "cpu.max", f"{'max' if quota_us is None else quota_us} {CPU_PERIOD_US}")
    else:
        write(desktop / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        write(desktop / "cpu.cfs_quota_us", "-1" if quota_us is None else str(quota_us))
