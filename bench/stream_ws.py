"""Live view over WebRTC and over the WebSocket transport, in one run: server CPU, fps, glass-to-glass and
input -> photon per viewer, on the busy screen of bench/stream.py.

    .venv/bin/python bench/stream_ws.py [--seconds 6] [--size 1440x900] [--viewers 1 3]

Each viewer is a Python client in a process of its own that decodes H.264 with PyAV (aiortc's stack for
WebRTC, streaming/socket_viewer.py for the WebSocket); both transports take the same shared encoder's
packets, so the difference is the transport: RTP packetization and DTLS/SRTP in aiortc against one
WebSocket message per picture. The WebRTC figures of the same run are the baseline of each ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scene import close_scene, open_scene, wait_for_windows
from bench.stream import BUSY_APP, bench_server, report, watch, window_origin


async def compare(width: int, height: int, seconds: float, counts: list[int]) -> None:
    with bench_server("h264", width, height) as (server, api, display):
        scene = open_scene(display)
        busy = None
        try:
            listed = wait_for_windows(api, len(scene))
            print(f"\n== h264, {width}x{height} on {display}, {listed} windows, {os.cpu_count()} cores, busy screen ==")
            api.post("/v1/desktop/stream/start").raise_for_status()
            busy = subprocess.Popen([sys.executable, "-c", BUSY_APP, str(min(width, 1200)), str(min(height, 860))],
                                    env=dict(os.environ, DISPLAY=display))
            origin = await asyncio.to_thread(window_origin, api, "stream-bench")
            for viewers in counts:
                rtc = await watch(server, api, viewers, seconds, origin, "webrtc")
                report(f"webrtc, {viewers} viewer{'s' * (viewers > 1)}", rtc)
                ws = await watch(server, api, viewers, seconds, origin, "websocket")
                report(f"websocket, {viewers}", ws, rtc.cpu, against="WebRTC")
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
            close_scene(scene)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--size", default="1440x900")
    parser.add_argument("--viewers", type=int, nargs="+", default=[1, 3])
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    asyncio.run(compare(width, height, args.seconds, args.viewers))


if __name__ == "__main__":
    main()
