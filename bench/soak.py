"""Soak: 10,000 screenshots as agents take them; the server's memory, fds, threads and children must not grow.

A few concurrent clients cycle through mixed formats, scales and regions on a realistic 1440x900 screen.
Prints the server's RSS after a warm-up, every 1,000 screenshots and at the end, its fds, threads and
children before and after, and the throughput beside GET /v1/health at the same concurrency (measured
in this run). Exits 1 if RSS grows by the target or more, anything leaks, a request fails, or the time
limit ends the run early.
Usage: .venv/bin/python bench/soak.py [--shots 10000] [--clients 4] [--time-limit 900] [--max-rss-growth-mb 20]
       [--warm-up 200] [--rest-s 35] [--every 1000] [--display-num 401]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop
from desktop.screen.screenshots import IDLE_RELEASE_S
from tests.conftest import ServerProcess

Params = dict[str, str | int | float]
MAGIC = {"image/png": b"\x89PNG", "image/jpeg": b"\xff\xd8\xff", "image/webp": b"RIFF"}
WARM_UP = 200
SETTLE_S = 5.0  # how long fds and threads get to return to the baseline once the clients close


@dataclass(frozen=True)
class ProcessStats:
    """What a leak would show in a process: memory, file descriptors, threads and child processes."""

    rss_mb: float
    fds: int
    threads: int
    children: frozenset[int]

    def row(self) -> str:
        return f"RSS {self.rss_mb:7.1f} MB  fds {self.fds:4d}  threads {self.threads:3d}  children {len(self.children)}"

    def same_handles(self, other: ProcessStats) -> bool:
        """No more fds or threads than `other`, and the same children."""
        return self.fds <= other.fds and self.threads <= other.threads and self.children == other.children


def process_stats(pid: int) -> ProcessStats:
    """Read a process's RSS, open fds, threads and direct children from /proc (no psutil)."""
    proc = Path(f"/proc/{pid}")
    status = (proc / "status").read_text().splitlines()
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    tasks = list((proc / "task").iterdir())
    children: set[int] = set()
    for task in tasks:
        with contextlib.suppress(OSError):  # a thread that ended since the listing
            children.update(int(p) for p in (task / "children").read_text().split())
    return ProcessStats(rss_kb / 1024, len(os.listdir(proc / "fd")), len(tasks), frozenset(children))


def child_names(children: frozenset[int]) -> str:
    names = []
    for pid in sorted(children):
        with contextlib.suppress(OSError):
            names.append(f"{Path(f'/proc/{pid}/comm').read_text().strip()}({pid})")
    return " ".join(names) or "none"


def settled_stats(pid: int, baseline: ProcessStats | None = None, timeout: float = SETTLE_S,
                  rest: float = 0) -> ProcessStats:
    """Stats once closed connections and finished threads are gone: back at `baseline`, or stable."""
    time.sleep(rest)
    deadline = time.monotonic() + timeout
    last = process_stats(pid)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = process_stats(pid)
        if (baseline is not None and now.same_handles(baseline)) or (baseline is None and now == last):
            return now
        last = now
    return last


def shot_request(rng: random.Random, width: int, height: int) -> tuple[str, Params]:
    """One screenshot as an agent asks for it: mostly small previews and regions, some full frames."""
    kind = rng.choices(["jpeg", "png", "webp", "region", "small"], weights=[35, 15, 10, 25, 15])[0]
    if kind == "jpeg":
        return "/v1/desktop/screenshot", {"format": "jpeg", "quality": rng.choice([60, 70, 85]),
                                          "scale": rng.choice([0.5, 0.6, 0.75])}
    if kind == "png":
        return "/v1/desktop/screenshot", {"scale": rng.choice([1.0, 0.6]), "showCursor": rng.choice(["true", "false"])}
    if kind == "webp":
        return "/v1/desktop/screenshot", {"format": "webp", "quality": 80, "scale": rng.choice([1.0, 0.5])}
    if kind == "small":
        return "/v1/desktop/screenshot", {"format": "jpeg", "quality": 50, "scale": 0.25}
    w, h = rng.choice([(400, 300), (200, 150), (800, 500)])
    return "/v1/desktop/screenshot/region", {"x": rng.randrange(width - w), "y": rng.randrange(height - h),
                                             "width": w, "height": h, "format": rng.choice(["png", "jpeg"])}


def check_image(response: httpx.Response, params: Params) -> str | None:
    """None for a good image answer, otherwise what is wrong with it."""
    kind = response.headers.get("content-type", "")
    expected = f"image/{params.get('format', 'png')}"
    if response.status_code != 200 or kind != expected or not response.content.startswith(MAGIC[expected]):
        return f"{response.status_code} {kind} {params}: {response.content[:200]!r}"
    return None


class Soak:
    """Concurrent clients taking screenshots, sampling the server every `every` screenshots."""

    def __init__(self, server: ServerProcess, size: tuple[int, int], clients: int, deadline: float) -> None:
        self.server, self.size, self.clients, self.deadline = server, size, clients, deadline
        self.issued = self.done = 0
        self.errors: list[str] = []

    async def run(self, count: int, seed: int, every: int = 0,
                  on_sample: Callable[[int, float], None] | None = None) -> float:
        """Take `count` screenshots (or stop at the deadline); returns the seconds it took."""
        self.issued = self.done = 0
        started = time.perf_counter()
        headers = {"Authorization": f"Bearer {self.server.token}"}
        limits = httpx.Limits(max_connections=1)

        async def client(index: int) -> None:
            rng = random.Random(seed * 1000 + index)
            async with httpx.AsyncClient(base_url=self.server.url, headers=headers, limits=limits,
                                         timeout=30) as http:
                while self.issued < count and time.monotonic() < self.deadline and len(self.errors) < 20:
                    self.issued += 1
                    path, params = shot_request(rng, *self.size)
                    try:
                        problem = check_image(await http.get(path, params=params), params)
                    except httpx.HTTPError as exc:
                        problem = f"{type(exc).__name__}: {exc} {params}"
                    if problem:
                        self.errors.append(problem)
                    self.done += 1
                    if on_sample and every and self.done % every == 0:
                        on_sample(self.done, time.perf_counter() - started)

        await asyncio.gather(*(client(i) for i in range(self.clients)))
        return time.perf_counter() - started


async def health_rate(server: ServerProcess, clients: int, count: int) -> float:
    """GET /v1/health per second at the same concurrency: the HTTP floor of this machine, this run."""
    async def client() -> None:
        async with httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=1)) as http:
            for _ in range(count // clients):
                (await http.get("/v1/health")).raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return count // clients * clients / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shots", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--every", type=int, default=1000, help="sample the server every N screenshots")
    parser.add_argument("--time-limit", type=float, default=900, help="seconds; the run stops there")
    parser.add_argument("--warm-up", type=int, default=WARM_UP, help="screenshots before the first sample")
    parser.add_argument("--rest-s", type=float, default=IDLE_RELEASE_S + 5,
                        help="seconds the idle server rests before the first and last samples (default: past the "
                             "screen's idle release, so what is compared is what an idle server keeps)")
    parser.add_argument("--max-rss-growth-mb", type=float, default=20)
    parser.add_argument("--display-num", type=int, default=401)
    args = parser.parse_args()
    failures: list[str] = []
    with bench_desktop("soak", args.display_num) as bench:
        pid = bench.server.proc.pid
        deadline = time.monotonic() + args.time_limit
        soak = Soak(bench.server, (1440, 900), args.clients, deadline)
        health = asyncio.run(health_rate(bench.server, args.clients, 1000))
        asyncio.run(soak.run(args.warm_up, seed=0))  # grows the worker pools and caches to their working size
        before = settled_stats(pid, rest=args.rest_s)
        print(f"after {args.warm_up} warm-up screenshots: {before.row()}\n  children: {child_names(before.children)}")

        peak = before.rss_mb

        def sample(done: int, elapsed: float) -> None:
            nonlocal peak
            now = process_stats(pid)
            peak = max(peak, now.rss_mb)
            print(f"{done:6d} shots  {elapsed:7.1f} s  {done / elapsed:6.1f}/s  {now.row()}  "
                  f"(RSS {now.rss_mb - before.rss_mb:+.1f} MB)")

        elapsed = asyncio.run(soak.run(args.shots, seed=1, every=args.every, on_sample=sample))
        done = soak.done
        after = settled_stats(pid, before, rest=args.rest_s)
        growth = after.rss_mb - before.rss_mb
        rate = done / elapsed
        print(f"\nend: {after.row()}\n  children: {child_names(after.children)}")
        print(f"RSS under load peaked at {peak:.1f} MB ({peak - before.rss_mb:+.1f} MB: the screen's working set, "
              f"given back after {IDLE_RELEASE_S:.0f} s idle)")
        print(f"{done} screenshots in {elapsed:.1f} s with {args.clients} clients: {rate:.1f}/s "
              f"({rate / health:.3f}x GET /v1/health at {health:.0f}/s)")
        print(f"RSS growth {growth:+.1f} MB (target < {args.max_rss_growth_mb:.0f} MB); fds {before.fds} -> "
              f"{after.fds}, threads {before.threads} -> {after.threads}, children {len(before.children)} -> "
              f"{len(after.children)}")
        if soak.errors:
            failures.append(f"{len(soak.errors)} failed requests, first: {soak.errors[0]}")
        if done < args.shots:
            failures.append(f"stopped early: {done} of {args.shots} screenshots (time limit {args.time_limit:.0f} s)")
        if growth >= args.max_rss_growth_mb:
            failures.append(f"RSS grew {growth:.1f} MB")
        if not after.same_handles(before):
            failures.append(f"leaked handles: before {before.row()}, after {after.row()}")
    for failure in failures:
        print(f"MISSED: {failure}")
    print("all targets met" if not failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
