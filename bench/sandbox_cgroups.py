"""Benchmark a desktop's cgroups (desktop/sandbox/cgroups.py): create, freeze, thaw, kill, usage read, remove.

Each way of freezing and killing (`--ways`: the default, on a hybrid machine the v1 freezer and v2 cgroup.kill;
v2, cgroup.freeze and cgroup.kill; v1, the freezer and SIGKILL to each process) on a desktop of `--processes`
processes (`--busy` of them busy loops, the rest asleep: a running process is the slow one to freeze) that join as the
sandbox's init makes them join (a preexec_fn writing "0" to the procs files). Kill is timed on a fresh set of
processes each round; their start is not. Times are wall clock through asyncio as the server runs them.
Targets (docs/sandbox-limits.md): create <= 5 ms, freeze and thaw <= 20 ms, kill <= 50 ms, usage no spawn.
Usage (root): .venv/bin/python bench/sandbox_cgroups.py [--rounds 20] [--processes 30] [--busy 2] [--ways v2 v1]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import summary, timed
from desktop.sandbox.cgroups import CgroupKind, CgroupRoot, DesktopCgroup, Feature, Limits

LIMITS = Limits(memory_mb=2048, pids=512, cpu=1)


def start(cgroup: DesktopCgroup, count: int, busy: int) -> list[subprocess.Popen[bytes]]:
    files = cgroup.procs_files(CgroupKind.APPS)

    def join() -> None:
        for path in files:
            with open(path, "w") as f:
                f.write("0")

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"] if i < busy else ["sleep", "600"],
                             preexec_fn=join) for i in range(count)]


def awaited(loop: asyncio.AbstractEventLoop, step: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    return lambda: loop.run_until_complete(step())


WAYS = {"default": {}, "v2": {Feature.FREEZE: 2, Feature.KILL: 2}, "v1": {Feature.FREEZE: 1, Feature.KILL: 1}}


def bench_way(label: str, rounds: int, processes: int, busy: int) -> None:
    loop = asyncio.new_event_loop()
    with CgroupRoot.open(prefer=WAYS[label]) as root:
        print(f"-- {label}: freeze by {root.probe.how.get(Feature.FREEZE)}; kill by {root.probe.how.get(Feature.KILL)}")
        ids = iter(range(10**6))
        made: list[DesktopCgroup] = []
        summary(f"create ({3 * len(root.tops)} cgroups, 3 limits)",
                timed(lambda: made.append(root.create(f"d{next(ids)}", LIMITS)), rounds))
        summary("remove (empty)", timed(awaited(loop, lambda: made.pop().remove()), rounds))
        cgroup = root.create("bench", LIMITS)
        children = start(cgroup, processes, busy)
        time.sleep(0.3)
        summary("usage read", timed(cgroup.usage, rounds * 50))
        freezes, thaws = [], []
        for _ in range(rounds):
            freezes += timed(awaited(loop, cgroup.freeze), 1)
            thaws += timed(awaited(loop, cgroup.thaw), 1)
            time.sleep(0.02)
        summary(f"freeze ({processes} processes, {busy} busy)", freezes)
        summary("thaw", thaws)
        kills = []
        for _ in range(rounds):
            kills += timed(awaited(loop, lambda: cgroup.kill(CgroupKind.APPS)), 1)
            for child in children:
                child.wait(5)
            children = start(cgroup, processes, busy)
            time.sleep(0.05)
        summary(f"kill apps ({processes} processes)", kills)
        for child in children:
            child.kill()
            child.wait(5)
    loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--processes", type=int, default=30)
    parser.add_argument("--busy", type=int, default=2, help="how many of the processes run a busy loop")
    parser.add_argument("--ways", nargs="*", choices=list(WAYS), default=list(WAYS))
    args = parser.parse_args()
    for label in args.ways:
        bench_way(label, args.rounds, args.processes, args.busy)


if __name__ == "__main__":
    main()
