"""Many sandboxed desktops at once, each driven by an agent loop: step latency at 4, 8 and 16 desktops.

Each desktop runs an xterm; its agent takes one step per second, as a model's turn would: one
`POST /v1/desktops/{id}/actions` that clicks into the terminal, types a command that makes it redraw,
waits for the screen to settle (quietMs 100) and answers with a JPEG screenshot. The step latency is the
whole request (settle wait included, since an agent waits for it too). The agents start staggered over the
first second so their steps do not all fall on the same instant.

Baseline, in the same run: the same loops on a server with `--isolation off` (the design before sandboxes).
Also printed: how long creating the desktops (and opening their xterms, one after another) took, the server's
CPU over the stepping window (% of one core: the server's process alone, and its whole tree, every desktop's
Xvfb, window manager, buses and xterm included; bench/footprint.py counts the same tree), and the descriptors
the server held with all the desktops open.
Targets (issue "Every desktop a sandbox"): 16 isolated desktops on 2 cores, p95 step latency <= 250 ms, 0 errors;
(issue "Ahead of every peer"): 64 desktops created and stepping with 0 errors, 32 at p95 <= 300 ms.
Every loop is bounded in steps and in time; only loopback is used.
Usage: .venv/bin/python bench/sandbox_density.py [--counts 4,8,16] [--steps 20] [--modes auto,off]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds, percentile
from bench.footprint import process_table, tree_of
from tests.conftest import ServerProcess, launch_server

SIZE = {"width": 1024, "height": 768}
STEP_PERIOD_S = 1.0
STEP_TIMEOUT_S = 10.0
SCREENSHOT = {"format": "jpeg", "quality": 70, "scale": 0.6}


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    create_s: float = 0.0
    server_cpu: float = 0.0
    """% of one core over the stepping window: the server's process."""
    tree_cpu: float = 0.0
    """The same for its whole tree (the desktops' processes too)."""
    descriptors: int = 0


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root`'s tree so far, reaped children included."""
    table = process_table()
    return sum(table[pid][2] + table[pid][3] for pid in tree_of(root, table))


async def prepare(api: httpx.AsyncClient, count: int) -> list[tuple[str, dict[str, int]]]:
    """`count` desktops, each with an xterm open: (desktop id, a point inside the terminal)."""
    made = []
    for _ in range(count):  # one at a time, as agents arrive; creation is not what is measured here
        created = await api.post("/v1/desktops", json=SIZE)
        created.raise_for_status()
        made.append(created.json()["id"])
    targets = []
    for desktop in made:
        launched = await api.post(f"/v1/desktops/{desktop}/launch", json={
            "app": "xterm", "args": ["-geometry", "80x24+100+100"], "wait": True, "waitTimeoutMs": 20000})
        launched.raise_for_status()
        targets.append((desktop, {"x": 200, "y": 200}))
    return targets


async def agent(api: httpx.AsyncClient, desktop: str, target: dict[str, int], steps: int, delay: float,
                run: Run) -> None:
    await asyncio.sleep(delay)
    next_step = time.monotonic()
    for i in range(steps):
        began = time.perf_counter()
        try:
            answer = await api.post(f"/v1/desktops/{desktop}/actions", json={
                "actions": [{"type": "click", **target}, {"type": "type", "text": f"echo {i}\n", "delayMs": 0}],
                "settle": {"quietMs": 100, "timeoutMs": 3000}, "screenshot": SCREENSHOT},
                timeout=STEP_TIMEOUT_S)
            if answer.status_code != 200 or answer.json().get("error"):
                run.errors.append(f"{desktop} step {i}: {answer.status_code} {answer.text[:200]}")
        except httpx.HTTPError as exc:
            run.errors.append(f"{desktop} step {i}: {exc!r}")
        run.latencies.append(time.perf_counter() - began)
        next_step += STEP_PERIOD_S
        await asyncio.sleep(max(0.0, next_step - time.monotonic()))


async def measure(server: ServerProcess, count: int, steps: int) -> Run:
    run = Run()
    pid = server.proc.pid
    limits = httpx.Limits(max_connections=count + 4, max_keepalive_connections=count + 4)
    headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, limits=limits, timeout=60) as api:
        began = time.perf_counter()
        targets = await prepare(api, count)
        run.create_s = time.perf_counter() - began
        run.descriptors = len(os.listdir(f"/proc/{pid}/fd"))
        try:
            began, own, tree = time.perf_counter(), cpu_seconds(pid), tree_cpu_seconds(pid)
            try:
                # Each step is bounded by STEP_TIMEOUT_S: a saturated server slows the loops, it does not end them.
                await asyncio.wait_for(asyncio.gather(*(
                    agent(api, desktop, target, steps, i / count, run)
                    for i, (desktop, target) in enumerate(targets))), timeout=steps * (STEP_PERIOD_S + STEP_TIMEOUT_S))
            except TimeoutError:
                run.errors.append(f"the loops did not finish: {len(run.latencies)} of {count * steps} steps taken")
            wall = time.perf_counter() - began
            run.server_cpu = (cpu_seconds(pid) - own) / wall * 100
            run.tree_cpu = (tree_cpu_seconds(pid) - tree) / wall * 100
        finally:
            for desktop, _ in targets:
                await api.delete(f"/v1/desktops/{desktop}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counts", default="4,8,16", help="how many desktops at once, comma-separated")
    parser.add_argument("--steps", type=int, default=20, help="steps of each agent (one per second)")
    parser.add_argument("--modes", default="auto,off", help="--isolation of the servers compared")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    modes = args.modes.split(",")
    print(f"agent loops at {1 / STEP_PERIOD_S:.0f} step/s per desktop, {args.steps} steps each, "
          f"{SIZE['width']}x{SIZE['height']}; step = click + type + settle (quietMs 100) + JPEG screenshot")
    print(f"{'desktops':>8} {'isolation':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'errors':>6} "
          f"{'create s':>8} {'server %':>8} {'tree %':>7} {'fds':>5}")
    with tempfile.TemporaryDirectory(prefix="bench-density-") as tmp:
        servers = {mode: launch_server(Path(tmp) / mode, "--isolation", mode, "--max-desktops", str(max(counts) + 1))
                   for mode in modes}
        try:
            for count in counts:
                for mode in modes:
                    server = servers[mode]
                    run = asyncio.run(measure(server, count, args.steps))
                    ms = [s * 1000 for s in run.latencies]
                    print(f"{count:>8} {mode:>9} {percentile(ms, 0.5):8.1f} {percentile(ms, 0.95):8.1f} "
                          f"{max(ms):8.1f} {len(run.errors):>6} {run.create_s:8.1f} {run.server_cpu:8.0f} "
                          f"{run.tree_cpu:7.0f} {run.descriptors:>5}", flush=True)
                    for error in run.errors[:3]:
                        print(f"         {error}")
        finally:
            for server in servers.values():
                server.stop()


if __name__ == "__main__":
    main()
