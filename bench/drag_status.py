"""Benchmark how a long drag affects status and screenshot latency on the same desktop.

Requests are issued at a fixed pace (one status and one small PNG every `--interval` seconds, each
on its own connection, not waiting for the previous answer), first on an idle desktop, then while a
`POST /v1/desktop/mouse/drag` of `--seconds` runs. A request's latency is from its issue to its
answer, so one held up behind the drag counts for the whole time it waited. Prints medians and p95s
and the ratio during/idle, all measured in this run; it asserts nothing about timing.

Usage: .venv/bin/python bench/drag_status.py [--seconds 10] [--interval 0.05] [--steps 200]
       [--display-num 440]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop

Params = dict[str, str | int]
STATUS: tuple[str, str, Params] = ("GET /v1/desktop/status", "/v1/desktop/status", {})
SHOT: tuple[str, str, Params] = ("GET /screenshot/region png 320x200", "/v1/desktop/screenshot/region",
        {"x": 200, "y": 150, "width": 320, "height": 200, "format": "png"})


def figures(samples: list[float]) -> tuple[float, float]:
    """(median, p95) in seconds."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def line(name: str, samples: list[float], baseline: float | None = None) -> float:
    median, p95 = figures(samples)
    ratio = f"  ({median / baseline:.2f}x idle)" if baseline else ""
    print(f"{name:<52} median {median * 1000:8.2f} ms   p95 {p95 * 1000:8.2f} ms   n={len(samples)}{ratio}")
    return median


async def one(client: httpx.AsyncClient, path: str, params: Params) -> float:
    began = time.perf_counter()
    response = await client.get(path, params=params)
    elapsed = time.perf_counter() - began
    if response.status_code != 200:
        raise SystemExit(f"{path} answered {response.status_code}: {response.text[:200]}")
    return elapsed


async def paced(client: httpx.AsyncClient, interval: float, going: Callable[[], bool]
                ) -> tuple[list[float], list[float]]:
    """Issue a status and a screenshot every `interval` while `going()`; their latencies."""
    status: list[asyncio.Task[float]] = []
    shots: list[asyncio.Task[float]] = []
    while going():
        status.append(asyncio.create_task(one(client, STATUS[1], STATUS[2])))
        await asyncio.sleep(interval / 2)
        shots.append(asyncio.create_task(one(client, SHOT[1], SHOT[2])))
        await asyncio.sleep(interval / 2)
    return list(await asyncio.gather(*status)), list(await asyncio.gather(*shots))


def for_seconds(seconds: float) -> Callable[[], bool]:
    end = time.perf_counter() + seconds
    return lambda: time.perf_counter() < end


async def measure(url: str, headers: dict[str, str], args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        await paced(client, args.interval, for_seconds(1.0))  # warm up: connections, screenshot workers
        idle_status, idle_shots = await paced(client, args.interval, for_seconds(args.seconds))
        drag_body = {"startX": 100, "startY": 100, "endX": 1300, "endY": 800, "steps": args.steps,
                     "durationMs": int(args.seconds * 1000)}
        began = time.perf_counter()
        drag = asyncio.create_task(client.post("/v1/desktop/mouse/drag", json=drag_body))
        await asyncio.sleep(0.2)  # the drag has pressed the button and is moving
        busy_status, busy_shots = await paced(client, args.interval, lambda: not drag.done())
        answer = await drag
        drag_s = time.perf_counter() - began
        if answer.status_code != 200:
            raise SystemExit(f"drag answered {answer.status_code}: {answer.text[:200]}")

    print(f"drag: {args.steps} steps over {args.seconds:.0f} s answered in {drag_s:.2f} s\n")
    idle = line(f"{STATUS[0]} idle", idle_status)
    during = line(f"{STATUS[0]} during the drag", busy_status, idle)
    shot_idle = line(f"{SHOT[0]} idle", idle_shots)
    shot_during = line(f"{SHOT[0]} during the drag", busy_shots, shot_idle)
    print(f"\nstatus during/idle: median {during / idle:.2f}x, p95 "
          f"{figures(busy_status)[1] / figures(idle_status)[1]:.2f}x")
    print(f"screenshot during/idle: median {shot_during / shot_idle:.2f}x, p95 "
          f"{figures(busy_shots)[1] / figures(idle_shots)[1]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the drag (and of the idle phase)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between issued status requests")
    parser.add_argument("--steps", type=int, default=200, help="motion steps of the drag")
    parser.add_argument("--display-num", type=int, default=440)
    args = parser.parse_args()
    with bench_desktop("drag-status", args.display_num) as bench:
        server = bench.server
        headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
        asyncio.run(measure(server.url, headers, args))


if __name__ == "__main__":
    main()
