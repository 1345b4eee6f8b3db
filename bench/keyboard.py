"""Benchmark the keyboard over HTTP on the realistic screen, beside `xdotool` spawns in the same run.

Prints medians and p90s of: type 20 ASCII characters (delayMs 0), type 20 non-ASCII characters
(bindings reused, and fresh characters each request), press ctrl+a; and the peer way for each.
Usage: /tmp/venv/bin/python bench/keyboard.py [--requests 200] [--spawns 100]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed

ASCII_20 = "The quick brown fox\n"
UNICODE_20 = "héllo wörld ✓ 日本語 🙂\n"
DISPLAY_NUM = 191


def fresh_texts(count: int, size: int) -> list[str]:
    """`count` texts of `size` CJK characters never typed before in this run."""
    return ["".join(chr(0x4E00 + i * size + j) for j in range(size)) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--spawns", type=int, default=100)
    args = parser.parse_args()

    with bench_desktop("keyboard", DISPLAY_NUM) as bench:
        api, scene = bench.api, bench.scene
        env = dict(bench.env, LC_ALL="C.UTF-8")
        # The typing target: a terminal that discards its input, focused like a user would.
        scene.append(subprocess.Popen(["xterm", "-T", "bench-target", "-geometry", "80x10+400+300", "-e", "sh",
                                       "-c", "stty -icanon; exec cat > /dev/null"], env=env))
        time.sleep(1)
        wid = subprocess.run(["xdotool", "search", "--name", "^bench-target$"], env=env, capture_output=True,
                             text=True).stdout.split()[0]
        subprocess.run(["xdotool", "windowactivate", "--sync", wid, "windowfocus", "--sync", wid], env=env)

        def post(path: str, body: dict[str, object]) -> None:
            response = api.post(path, json=body)
            assert response.status_code == 200, response.text

        def xdotool(*argv: str) -> None:
            subprocess.run(["xdotool", *argv], env=env, check=True)

        health = summary("GET /v1/health (HTTP floor)", timed(lambda: api.get("/v1/health"), args.requests))
        peer = summary("xdotool type --delay 0 <20 ASCII> (spawn)",
                      timed(lambda: xdotool("type", "--delay", "0", ASCII_20), args.spawns))
        summary("POST keyboard/type 20 ASCII, delayMs 0",
               timed(lambda: post("/v1/desktop/keyboard/type", {"text": ASCII_20, "delayMs": 0}), args.requests),
               peer, "xdotool")
        peer = summary("xdotool type --delay 0 <20 non-ASCII> (spawn, mangles)",
                      timed(lambda: xdotool("type", "--delay", "0", UNICODE_20), args.spawns))
        summary("POST keyboard/type 20 non-ASCII (bindings reused)",
               timed(lambda: post("/v1/desktop/keyboard/type", {"text": UNICODE_20, "delayMs": 0}),
                     args.requests), peer, "xdotool")
        texts = iter(fresh_texts(args.spawns, 8))
        summary("POST keyboard/type 8 never-typed CJK characters",
               timed(lambda: post("/v1/desktop/keyboard/type", {"text": next(texts), "delayMs": 0}),
                     args.spawns // 2), peer, "xdotool")
        time.sleep(2)  # let the spare keycodes age, then one request with all 19 at once
        summary("POST keyboard/type 19 never-typed CJK (idle LRU)",
               timed(lambda: post("/v1/desktop/keyboard/type", {"text": next(texts) + next(texts)[:11],
                                                                "delayMs": 0}), 1), peer, "xdotool")
        peer = summary("xdotool key ctrl+a (spawn)", timed(lambda: xdotool("key", "ctrl+a"), args.spawns))
        summary("POST keyboard/press ctrl+a",
               timed(lambda: post("/v1/desktop/keyboard/press", {"key": "ctrl+a"}), args.requests), peer, "xdotool")
        print(f"(HTTP floor {health * 1000:.2f} ms)")


if __name__ == "__main__":
    main()
