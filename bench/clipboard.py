"""Benchmark the clipboard over HTTP on a realistic screen, beside xclip spawns measured in the same run.

Prints medians and p90s: set+get of a short text, a 1 MB and a 10 MB set, and gets of values
owned by xclip, each beside the peer way (`xclip -i` then `xclip -o`) with the ratio.
Usage: /tmp/venv/bin/python bench/clipboard.py [--requests 300] [--spawns 50] [--large 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed

SHORT = "héllo ✓ clipboard"
MEGABYTE = ("0123456789abcdef" * 65536)[:1 << 20]


def xclip_in(env: dict[str, str], data: bytes) -> None:
    """The peer write: xclip reads stdin, forks a child that owns the selection, and the parent exits."""
    subprocess.run(["xclip", "-i", "-selection", "clipboard"], input=data, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=30)


def xclip_out(env: dict[str, str]) -> bytes:
    return subprocess.run(["xclip", "-o", "-selection", "clipboard"], env=env, capture_output=True, check=True,
                          timeout=30).stdout


def pair(name: str, ours: Callable[[], object], peer: Callable[[], object], count: int, peer_count: int) -> None:
    """Time both ways in the same run and print the peer/ours ratio."""
    mine = summary(f"{name} (API)", timed(ours, count))
    theirs = summary(f"{name} (xclip spawns)", timed(peer, peer_count))
    print(f"{'':<44} xclip / API = {theirs / mine:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--spawns", type=int, default=50)
    parser.add_argument("--large", type=int, default=20)
    args = parser.parse_args()

    with bench_desktop("clipboard", 215) as bench:
        api, env, tmp = bench.api, bench.env, bench.tmp
        bench.health_baseline(args.requests)

        def api_set(text: str) -> None:
            response = api.post("/v1/desktop/clipboard", json={"text": text})
            assert response.status_code == 200, response.text

        def api_get() -> str:
            response = api.get("/v1/desktop/clipboard")
            assert response.status_code == 200, response.text
            return str(response.json()["text"])

        def api_set_get() -> None:
            api_set(SHORT)
            assert api_get() == SHORT

        def xclip_set_get() -> None:
            xclip_in(env, SHORT.encode())
            assert xclip_out(env) == SHORT.encode()

        pair("set+get, short text", api_set_get, xclip_set_get, args.requests, args.spawns)
        pair("set, 1 MB", lambda: api_set(MEGABYTE), lambda: xclip_in(env, MEGABYTE.encode()), args.large, args.large)
        ten = MEGABYTE * 10
        summary("set, 10 MB (API)", timed(lambda: api_set(ten), max(3, args.large // 4)))
        api_set(MEGABYTE)
        summary("xclip -o of our 1 MB (INCR from us)", timed(lambda: xclip_out(env), args.large))

        for label, data, count in (("short", SHORT.encode(), args.requests), ("1 MB", MEGABYTE.encode(), args.large)):
            source = tmp / f"owned-{label}"
            source.write_bytes(data)
            with open(source, "rb") as stdin:
                owner = subprocess.Popen(["xclip", "-quiet", "-i", "-selection", "clipboard"], stdin=stdin,
                                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 10
                while xclip_out(env) != data and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert api_get().encode() == data
                pair(f"get, {label} owned by xclip", api_get, lambda: xclip_out(env), count,
                     min(count, args.spawns))
            finally:
                owner.kill()
                owner.wait()


if __name__ == "__main__":
    main()
