"""Benchmark mouse and window actions over HTTP beside the xdotool way, on a realistic screen.

Usage: .venv/bin/python bench/mouse_windows.py [--count 200]
Prints medians, p90s and the ratio of the xdotool peer to ours, all measured in this run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    with bench_desktop("mouse", 230, terminals=8) as bench:
        api, env, n = bench.api, bench.env, args.count
        listed = len(api.get("/v1/desktop/windows").json()["windows"])

        def xdotool(*words: str) -> None:
            subprocess.run(["xdotool", *words], env=env, check=True, capture_output=True)

        health = bench.health_baseline(n)
        ours = summary("POST /mouse/click", timed(
            lambda: api.post("/v1/desktop/mouse/click", json={"x": 700, "y": 450}), n), health)
        peer = summary("xdotool mousemove 700 450 click 1 (spawn)", timed(
            lambda: xdotool("mousemove", "700", "450", "click", "1"), n))
        print(f"{'':44} click: xdotool / ours = {peer / ours:.1f}x")
        ours = summary("POST /mouse/move", timed(
            lambda: api.post("/v1/desktop/mouse/move", json={"x": 300, "y": 200}), n), health)
        summary("GET /mouse/position", timed(lambda: api.get("/v1/desktop/mouse/position"), n), health)
        ours = summary(f"GET /windows ({listed} windows)", timed(lambda: api.get("/v1/desktop/windows"), n), health)

        def reference_listing() -> None:
            ids = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", ""], env=env,
                                 capture_output=True, text=True).stdout.split()
            for wid in ids:
                xdotool("getwindowname", wid)
                xdotool("getwindowgeometry", wid)

        peer = summary("xdotool search + name + geometry per window", timed(reference_listing, max(5, n // 20)))
        print(f"{'':44} windows: xdotool / ours = {peer / ours:.1f}x")
        window = api.get("/v1/desktop/windows").json()["windows"][0]["id"]
        positions = iter([(100 + i % 50, 80 + i % 40) for i in range(n)])
        summary("POST /windows/{id}/move", timed(
            lambda: api.post(f"/v1/desktop/windows/{window}/move", json=dict(zip("xy", next(positions), strict=True))),
            n), health)
        summary("POST /windows/{id}/focus", timed(lambda: api.post(f"/v1/desktop/windows/{window}/focus"), n), health)


if __name__ == "__main__":
    main()
