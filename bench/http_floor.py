"""Benchmark the HTTP floor beside the reference server, and the two calls every agent turn makes.

Starts our server (with a token, as it runs by default) and the reference server from npm
(`sandbox-agent server --no-token`, from tests/sdk/node_modules), and times with one httpx client
holding a persistent connection to each: `GET /v1/health` and `GET /v1/processes` on both, in
alternating blocks so background load falls on both alike; then on ours a click on the idle desktop
and a full 1440x900 PNG of the realistic scene (bench/scene.py), with its size in bytes and the
in-process floor of the same grab and encode. Prints medians, p90s and the ours/reference ratios.
Usage: .venv/bin/python bench/http_floor.py [--requests 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed, wait_for_http
from tests.conftest import free_port

REFERENCE = (Path(__file__).resolve().parent.parent / "tests" / "sdk" / "node_modules" / "@sandbox-agent"
             / "cli-linux-x64" / "bin" / "sandbox-agent")


@contextmanager
def reference_server() -> Iterator[str]:
    """The reference server on a free port, its HOME in a temp directory; yields its URL."""
    if not REFERENCE.exists():
        raise SystemExit(f"{REFERENCE} is missing: run `npm ci` in tests/sdk first")
    home = Path(tempfile.mkdtemp(prefix="bench-reference-"))
    port = free_port()
    proc = subprocess.Popen([str(REFERENCE), "server", "--no-token", "--no-telemetry", "--port", str(port)],
                            env=dict(os.environ, HOME=str(home)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/v1/health", proc, "the reference server")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def getter(client: httpx.Client, url: str) -> Callable[[], None]:
    def get() -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"GET {url} -> {response.status_code}: {response.text}")
    return get


def alternating(ours: Callable[[], None], theirs: Callable[[], None], count: int,
                rounds: int) -> tuple[list[float], list[float]]:
    """`count` timings of each, taken in `rounds` alternating blocks."""
    mine: list[float] = []
    reference: list[float] = []
    block = max(1, count // rounds)
    timed(ours, 50)
    timed(theirs, 50)  # warm both connections and code paths
    for _ in range(rounds):
        mine += timed(ours, block)
        reference += timed(theirs, block)
    return mine, reference


def png_floor(display: str, count: int) -> None:
    """The same grab and PNG encoder in this process, without HTTP or the server's threads."""
    import mss
    from PIL import Image

    from desktop.screen.encode import encode
    from desktop.screen.screenshots import keep_image_blocks
    from sandbox_desktop_wire.enums import ScreenshotFormat

    keep_image_blocks()  # as the server does
    with mss.MSS(display=display) as sct:
        def grab() -> Image.Image:
            raw = sct.grab({"left": 0, "top": 0, "width": 1440, "height": 900}).raw
            return Image.frombuffer("RGB", (1440, 900), raw, "raw", "BGRX", 0, 1)

        image = grab()
        summary("floor: grab (XShm, 1440x900)", timed(grab, count))
        png = ScreenshotFormat.PNG
        summary("floor: png encode only", timed(lambda: encode(image, png, 85), count))
        summary("floor: png encode only (CPU time)", timed(lambda: encode(image, png, 85), count,
                                                           clock=time.thread_time))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000, help="timings per figure (default 2000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating blocks for the two servers")
    parser.add_argument("--shots", type=int, default=200, help="full PNG screenshots timed (default 200)")
    parser.add_argument("--display-num", type=int, default=236)
    args = parser.parse_args()

    with bench_desktop("http-floor", args.display_num) as bench, reference_server() as reference:
        api, n = bench.api, args.requests
        # One client for both servers: the same headers (the reference ignores the token) and one kept-alive
        # connection per server.
        client = httpx.Client(headers=api.headers, timeout=30)
        ratios = []
        for path in ("/v1/health", "/v1/processes"):
            mine, theirs = alternating(getter(client, bench.server.url + path), getter(client, reference + path),
                                       n, args.rounds)
            ours_median = summary(f"ours:      GET {path}", mine)
            reference_median = summary(f"reference: GET {path}", theirs)
            ratios.append((path, ours_median, reference_median))
        print()
        click = lambda: api.post("/v1/desktop/mouse/click", json={"x": 1400, "y": 880})  # noqa: E731
        timed(click, 20)
        click_median = summary("ours: POST /v1/desktop/mouse/click (idle desktop)", timed(click, n // 2))
        shoot = lambda: client.get(bench.server.url + "/v1/desktop/screenshot")  # noqa: E731
        timed(shoot, 10)  # warm the capture workers
        png_median = summary("ours: GET /v1/desktop/screenshot (png 1440x900)", timed(shoot, args.shots))
        shot = shoot()
        print(f"{'':<52} {len(shot.content):,} bytes ({shot.headers['content-type']})")
        print()
        png_floor(bench.display, args.shots)
        print()
        for path, mine_s, theirs_s in ratios:
            print(f"GET {path:<14} ours/reference = {mine_s * 1000:.3f} / {theirs_s * 1000:.3f} ms = "
                  f"{mine_s / theirs_s:.2f}x (target <= 1.3x)")
        print(f"click on an idle desktop     {click_median * 1000:.2f} ms (target <= 1.5 ms)")
        print(f"full 1440x900 PNG over HTTP  {png_median * 1000:.2f} ms (target <= 10 ms)")
        client.close()


if __name__ == "__main__":
    main()
