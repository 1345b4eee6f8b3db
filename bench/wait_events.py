"""Benchmark `POST /v1/desktop/wait` against the naive way (polling `GET /v1/desktop/windows` every 50 ms).

Prints, in one run on a realistic desktop:
- latency from a window being mapped (a `time.monotonic()` taken by this X client just before XMapWindow; the
  same clock as the server's, on the same machine) to the answer of a wait for it, and to the answer of the
  polling loop, median and p90 over `--runs` windows each;
- CPU time of the server process while `--pending` waits are pending for `--seconds`, beside the same number
  of clients polling the window list every 50 ms, and beside an idle server.
Usage: .venv/bin/python bench/wait_events.py [--runs 30] [--pending 20] [--seconds 10]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from Xlib import X
from Xlib.display import Display

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import BenchDesktop, bench_desktop, cpu_seconds, summary

POLL_S = 0.05


def wait_for_title(api: httpx.Client, title: str) -> float:
    answer = api.post("/v1/desktop/wait", json={"window": {"title": title}, "timeoutMs": 10_000}).json()
    assert answer["matched"], answer
    return time.monotonic()


def poll_for_title(api: httpx.Client, title: str, stop: threading.Event | None = None, limit_s: float = 10) -> float:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        if any(w["title"] == title for w in api.get("/v1/desktop/windows").json()["windows"]):
            return time.monotonic()
        time.sleep(POLL_S)
    return time.monotonic()


def latency(bench: BenchDesktop, runs: int, waiter: Callable[[httpx.Client, str], float], name: str) -> None:
    """Map `runs` windows one at a time, each with `waiter` pending for it; time map → answer."""
    d = Display(bench.display)
    screen = d.screen()
    samples = []
    with bench.server.client() as api:
        for i in range(runs):
            title = f"bench-{name}-{i}"
            answered: list[float] = []
            thread = threading.Thread(target=lambda t=title, out=answered: out.append(waiter(api, t)))
            thread.start()
            time.sleep(0.15)  # the wait is pending (or the poller is polling) before the window exists
            window = screen.root.create_window(50, 50, 200, 100, 0, screen.root_depth, X.InputOutput,
                                               X.CopyFromParent, background_pixel=0x336699)
            window.set_wm_name(title)
            mapped = time.monotonic()
            window.map()
            d.flush()
            thread.join(15)
            samples.append(answered[0] - mapped)
            window.destroy()
            d.sync()
    d.close()
    summary(f"window mapped -> answer ({name})", samples)


def cpu_while(bench: BenchDesktop, pending: int, seconds: float, kind: str) -> float:
    """Server CPU seconds over `seconds` with `pending` waits (or pollers, or nothing) for a window never shown."""
    stop = threading.Event()
    clients = [bench.server.client() for _ in range(pending)]
    timeout_ms = int((seconds + 3) * 1000)

    def one(api: httpx.Client) -> None:
        if kind == "wait":
            api.post("/v1/desktop/wait", json={"window": {"title": "never"}, "timeoutMs": timeout_ms})
        else:
            poll_for_title(api, "never", stop, seconds + 3)

    threads = [threading.Thread(target=one, args=(c,)) for c in clients] if kind != "idle" else []
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every wait is pending, every poller polling
    pid = bench.server.proc.pid
    before = cpu_seconds(pid)
    time.sleep(seconds)
    used = cpu_seconds(pid) - before
    stop.set()
    for thread in threads:
        thread.join(seconds + 10)
    for api in clients:
        api.close()
    print(f"server CPU, {kind:<28} {used:6.2f} s over {seconds:g} s  ({100 * used / seconds:5.1f} % of a core)")
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--pending", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with bench_desktop("wait-events", 371, terminals=2, images=1) as bench:
        bench.health_baseline(100)
        latency(bench, args.runs, wait_for_title, "POST /wait")
        latency(bench, args.runs, poll_for_title, "GET /windows every 50 ms")
        cpu_while(bench, 0, args.seconds, "idle")
        cpu_while(bench, args.pending, args.seconds, "wait")
        cpu_while(bench, args.pending, args.seconds, "poll")


if __name__ == "__main__":
    main()
