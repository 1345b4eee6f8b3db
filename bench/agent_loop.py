"""A 10-step agent loop: time spent in the service per step, batched with settle vs separate calls.

Each step clicks into a terminal, types a command that makes it redraw, and takes a screenshot.
Ours: one `POST /v1/desktop/actions` per step (actions + settle + screenshot); the settle window
itself (quietMs) is reported apart. Baseline, measured in the same run: the same actions as
separate REST calls followed by the fixed sleep other services use before a screenshot.
Usage: .venv/bin/python bench/agent_loop.py [--steps 10] [--rounds 3] [--quiet-ms 100] [--sleep-s 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary

SCREENSHOT = {"format": "jpeg", "quality": 70, "scale": 0.6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quiet-ms", type=int, default=100)
    parser.add_argument("--sleep-s", type=float, default=2.0, help="the baseline's fixed wait per step")
    args = parser.parse_args()
    with bench_desktop("agent-loop", 360, terminals=4, images=1) as bench:
        api = bench.api
        launched = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-geometry", "100x30+300+200"],
                                                        "wait": True}).json()
        window = next(w for w in api.get("/v1/desktop/windows").json()["windows"]
                      if w["id"] == launched["windowId"])
        target = {"x": window["x"] + 50, "y": window["y"] + 50}
        bench.health_baseline(200)

        def batched_step(i: int) -> tuple[float, float]:
            started = time.perf_counter()
            body = api.post("/v1/desktop/actions", json={
                "actions": [{"type": "click", **target},
                            {"type": "type", "text": f"echo step {i}\n", "delayMs": 0}],
                "settle": {"quietMs": args.quiet_ms, "timeoutMs": 5000},
                "screenshot": SCREENSHOT,
            }).json()
            total = time.perf_counter() - started
            assert body.get("settled") is not None, body
            return total, body["settleMs"] / 1000

        def separate_step(i: int) -> float:
            started = time.perf_counter()
            api.post("/v1/desktop/mouse/click", json=target)
            api.post("/v1/desktop/keyboard/type", json={"text": f"echo step {i}\n", "delayMs": 0})
            time.sleep(args.sleep_s)
            api.get("/v1/desktop/screenshot", params={"format": "jpeg", "quality": 70, "scale": 0.6})
            return time.perf_counter() - started

        service, settle_waits, loops = [], [], []
        for _ in range(args.rounds):
            loop_started = time.perf_counter()
            for i in range(args.steps):
                total, settled_after = batched_step(i)
                # The settle wait includes quietMs of nothing happening by design: report it apart.
                service.append(total - settled_after)
                settle_waits.append(settled_after)
            loops.append(time.perf_counter() - loop_started)
        summary("batched step: service time (settle wait excluded)", service)
        summary("batched step: settle wait (includes quietMs)", settle_waits)
        in_service = sum(service) / args.rounds
        print(f"{args.steps}-step loop: {in_service * 1000:.0f} ms in the service per loop "
              f"(median wall {statistics.median(loops):.2f} s incl. settle)")
        baseline = [separate_step(i) for i in range(args.steps)]
        summary(f"separate calls + fixed {args.sleep_s:.1f} s sleep, per step", baseline)
        print(f"{args.steps}-step loop, separate calls with a fixed sleep: {sum(baseline):.2f} s "
              f"({sum(baseline) / statistics.median(loops):.1f}x the batched loop's wall time)")
        api.post(f"/v1/processes/{launched['processId']}/kill")


if __name__ == "__main__":
    main()
