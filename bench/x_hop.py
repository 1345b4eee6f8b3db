"""Benchmark the hop to a desktop's X thread: what a move's X job costs called on this thread (blocking), against the
same job through `XThread.raw` (which runs it on the event loop over the idle thread's connection, as every pointer
action now runs it: desktop/x11/on_loop.py), handed to the X thread (as it ran before, and still runs when the
thread is busy), and an empty job's hop alone.

On an Xvfb of its own (640x480, no window manager), in alternating blocks so load from elsewhere falls on all alike;
wall-clock medians and this process's CPU per call (all its threads: the X thread's too). The hop is what a
command socket's `mouse.move` spends beyond its X round trip (docs/benchmarks.md, "Peers").
Usage: .venv/bin/python bench/x_hop.py [--calls 3000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds
from desktop.input.mouse import _move_job
from desktop.x11.raw import run_job
from desktop.x11.thread import XThread, open_display
from tests.support.xvfb import free_display

Call = Callable[[int], Awaitable[object]]


async def measure(calls: dict[str, Call], count: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Median seconds and CPU seconds per call of each, over `rounds` alternating blocks (after a warm-up)."""
    for call in calls.values():
        for i in range(50):
            await call(i)
    samples: dict[str, list[float]] = {name: [] for name in calls}
    cpu = dict.fromkeys(calls, 0.0)
    block = max(1, count // rounds)
    for _ in range(rounds):
        for name, call in calls.items():
            before = cpu_seconds()
            for i in range(block):
                start = time.perf_counter()
                await call(i)
                samples[name].append(time.perf_counter() - start)
            cpu[name] += cpu_seconds() - before
    return {name: (statistics.median(s), cpu[name] / len(s)) for name, s in samples.items()}


async def run(display: str, count: int, rounds: int) -> None:
    direct = open_display(display)
    thread = XThread(display, "bench")

    async def on_this_thread(i: int) -> object:  # blocks the loop for the round trip: only for the comparison
        return run_job(direct, _move_job, 100 + i % 2 * 40, 100)

    async def on_the_loop(i: int) -> object:
        return await thread.raw(_move_job, 100 + i % 2 * 40, 100)

    async def through_the_thread(i: int) -> object:
        return await thread.submit(run_job, _move_job, 100 + i % 2 * 40, 100)

    async def empty_hop(i: int) -> object:
        return await thread.call(lambda d: None)

    try:
        await thread.call(lambda d: None)  # the connection opened: from here on `raw` may borrow it
        found = await measure({"move job, called on the event loop's thread": on_this_thread,
                               "move job, XThread.raw (on the loop)": on_the_loop,
                               "move job, on the X thread": through_the_thread,
                               "empty job, XThread.call": empty_hop}, count, rounds)
    finally:
        await thread.close()
        direct.close()
    baseline = next(iter(found.values()))[0]
    for name, (median, cpu) in found.items():
        print(f"{name:<48} median {median * 1e6:7.1f} us ({median / baseline:.2f}x)   CPU {cpu * 1e6:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="timed calls of each (default 3000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating blocks (default 10)")
    args = parser.parse_args()
    with free_display() as display:
        asyncio.run(run(display, args.calls, args.rounds))


if __name__ == "__main__":
    main()
