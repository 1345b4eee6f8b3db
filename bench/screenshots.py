"""Benchmark screenshots over HTTP on a realistic 1440x900 screen, beside the peers in the same run.

Ours: full PNG, JPEG q70 at scale 0.5, a 400x300 PNG region, WebP q80 (HTTP round trips, medians and
p90s). Peers on the same screen: ImageMagick `import -window root png:-` and `scrot` (if installed).
The in-process floor (the same grab and encoder, no HTTP) shows what the service adds.
Usage: .venv/bin/python bench/screenshots.py [--requests 100] [--peer-runs 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed

# (label, path, query, target median in seconds or None)
CASES: list[tuple[str, str, dict[str, str | int | float], float | None]] = [
    ("png full 1440x900", "/v1/desktop/screenshot", {}, 0.025),
    ("jpeg q70 scale 0.5", "/v1/desktop/screenshot", {"format": "jpeg", "quality": 70, "scale": 0.5}, 0.008),
    ("png region 400x300", "/v1/desktop/screenshot/region", {"x": 200, "y": 150, "width": 400, "height": 300}, 0.008),
    ("webp q80 full", "/v1/desktop/screenshot", {"format": "webp", "quality": 80}, None),
    ("jpeg q85 full", "/v1/desktop/screenshot", {"format": "jpeg"}, None),
    ("png full, showCursor", "/v1/desktop/screenshot", {"showCursor": "true"}, None),
]


def fetcher(api: httpx.Client, path: str, params: dict[str, str | int | float]) -> Callable[[], None]:
    def fetch() -> None:
        response = api.get(path, params=params, headers={"Accept": "image/*"})
        if response.status_code != 200:
            raise SystemExit(f"{path} {params} -> {response.status_code}: {response.text}")
    return fetch


def peer(argv: list[str], display: str) -> Callable[[], None]:
    env = dict(os.environ, DISPLAY=display)

    def run() -> None:
        done = subprocess.run(argv, env=env, capture_output=True, timeout=30)
        if done.returncode != 0 or not done.stdout.startswith(b"\x89PNG"):
            raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return run


def floor(display: str, count: int) -> None:
    """The same grab and encoders in this process: the cost without HTTP, threads or the server."""
    import mss
    from PIL import Image

    from desktop.screen.encode import encode, scale_image
    from desktop.screen.screenshots import keep_image_blocks

    keep_image_blocks()  # as the server does
    with mss.MSS(display=display) as sct:
        def shot(fmt: str, quality: int, scale: float) -> None:
            raw = sct.grab({"left": 0, "top": 0, "width": 1440, "height": 900}).raw
            image = Image.frombuffer("RGB", (1440, 900), raw, "raw", "BGRX", 0, 1)
            encode(scale_image(image, (int(1440 * scale), int(900 * scale))), fmt, quality)

        for label, fn in (("grab only (XShm, 1440x900)", lambda: sct.grab({"left": 0, "top": 0, "width": 1440,
                                                                           "height": 900})),
                          ("png full", lambda: shot("png", 85, 1.0)),
                          ("jpeg q70 scale 0.5", lambda: shot("jpeg", 70, 0.5)),
                          ("webp q80 full", lambda: shot("webp", 80, 1.0))):
            summary(f"floor: {label}", timed(fn, count))
            # CPU time of this thread: what the work costs when other processes compete for the cores.
            summary(f"floor: {label} (CPU time)", timed(fn, count, clock=time.thread_time))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--peer-runs", type=int, default=15)
    parser.add_argument("--display-num", type=int, default=190)
    args = parser.parse_args()

    with bench_desktop("screenshots", args.display_num) as bench:
        api, display = bench.api, bench.display
        health = bench.health_baseline(args.requests)
        medians: dict[str, float] = {}
        for label, path, params, _ in CASES:
            fetch = fetcher(api, path, params)
            timed(fetch, 5)  # warm the worker threads and their connections
            medians[label] = summary(label, timed(fetch, args.requests), health)

        print()
        ours = medians["png full 1440x900"]
        peers = [("peer: import -window root png:-", ["import", "-window", "root", "png:-"])]
        if shutil.which("scrot"):
            peers.append(("peer: scrot -o - (png)", ["scrot", "-o", "-"]))
        for label, argv in peers:
            median = summary(label, timed(peer(argv, display), args.peer_runs))
            print(f"{'':<44} {median / ours:.1f}x slower than our full png")

        print()
        floor(display, args.requests)

        print()
        for label, _, _, target in CASES:
            if target is not None:
                verdict = "ok" if medians[label] <= target else "MISSED"
                print(f"target {label:<30} <= {target * 1000:.0f} ms: {medians[label] * 1000:.2f} ms  {verdict}")


if __name__ == "__main__":
    main()
