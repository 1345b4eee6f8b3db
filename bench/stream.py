"""Live view: server CPU, received fps and latency for 1 and 3 viewers, on a static and a busy screen.

    .venv/bin/python bench/stream.py [--seconds 10] [--codec h264 vp8] [--size 1440x900]

Each viewer is a Python aiortc client in a process of its own (it decodes, as a browser would;
its CPU is reported apart from the server's). The busy screen is a Tk window animating 30 boxes
and scrolling text over the usual scene, with a pixel clock (the wall-clock ms as 24 black/white
squares) that the viewers decode for glass-to-glass latency, and a square that flips on each click
for input -> photon. The baseline, measured in the same run on frames of that busy screen: one
encoder per viewer (aiortc's model), with our tuned encoder and with aiortc's stock one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from av.video.frame import VideoFrame

from bench.common import cpu_seconds, percentile
from bench.scene import close_scene, open_scene, wait_for_windows
from desktop.screen.frames import Frame, FrameSource
from streaming.canvas import Canvas, video_size
from streaming.encoders import TIME_BASE, EncoderSettings, VideoEncoder, default_bitrate
from streaming.socket_viewer import SocketViewer
from streaming.viewer import Viewer
from streaming.viewer_session import ViewerSession
from tests.conftest import ServerProcess, launch_server

DISPLAY_NUM = 280
WARMUP_S = 3.0
CLOCK_SQUARE = 16
PROBE = (0, 24, 48, 72)  # the click square, in window coordinates

BUSY_APP = r"""
import random, sys, time, tkinter as tk
W, H = int(sys.argv[1]), int(sys.argv[2])
root = tk.Tk()
root.title("stream-bench")
root.geometry(f"{W}x{H}+0+0")
c = tk.Canvas(root, width=W, height=H, bg="#203040", highlightthickness=0)
c.pack()
rng = random.Random(7)
boxes = []
for i in range(30):
    x, y = rng.randrange(60, W - 80), rng.randrange(100, H - 80)
    item = c.create_rectangle(x, y, x + 60, y + 40, fill="#%06x" % rng.randrange(0x1000000), width=0)
    boxes.append([item, rng.choice((-6, -4, 4, 6)), rng.choice((-5, -3, 3, 5))])
text = [c.create_text(W - 420, 100 + 18 * i, anchor="nw", fill="#e0e0e0", font=("DejaVu Sans Mono", 11),
                      text=f"{i:04d} the quick brown fox jumps over the lazy dog {i * 7919 % 10007:05d}")
        for i in range(40)]
bits = [c.create_rectangle(16 * i, 0, 16 * i + 16, 16, fill="black", width=0) for i in range(24)]
probe = c.create_rectangle(0, 24, 48, 72, fill="black", width=0)
state = [0]
def flip(event):
    state[0] ^= 1
    c.itemconfig(probe, fill="white" if state[0] else "black")
c.bind("<Button-1>", lambda e: flip(e) if e.x < 48 and 24 <= e.y < 72 else None)
last = [None] * 24
def tick(n=0):
    ms = int(time.time() * 1000) & 0xFFFFFF
    for i in range(24):
        b = ms >> i & 1
        if b != last[i]:
            last[i] = b
            c.itemconfig(bits[i], fill="white" if b else "black")
    if n % 4 == 0:
        for box in boxes:
            item, dx, dy = box
            x0, y0, x1, y1 = c.coords(item)
            if not 0 < x0 + dx < W - 60: box[1] = -dx
            if not 80 < y0 + dy < H - 40: box[2] = -dy
            c.move(item, box[1], box[2])
        for t in text:
            c.move(t, 0, -2)
            if c.coords(t)[1] < 90: c.move(t, 0, 18 * 40)
    root.after(4, tick, n + 1)
tick()
root.mainloop()
"""


@dataclass
class Measure:
    """One configuration's results."""

    cpu: float
    """Server process CPU, % of one core."""
    fps: list[float]
    """Decoded frames per second, per viewer."""
    latency: list[float]
    photon: list[float]
    kbps: float
    viewer_cpu: float
    """All viewer processes together, % of one core (they decode: on a real setup, other machines)."""
    machine: float
    """The whole machine, % of all cores."""
    frame_rate: int
    """The lowest frame-rate cap the server reported while measuring."""
    encoders: int


def system_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def luma(frame: VideoFrame, x: int, y: int) -> int:
    plane = frame.planes[0]
    return memoryview(plane)[y * plane.line_size + x]


class ClockReader:
    """Decodes the busy app's pixel clock and click square from a viewer's frames."""

    def __init__(self, origin: tuple[int, int]) -> None:
        self.x, self.y = origin
        self.latency: list[float] = []
        self.probe_state: int | None = None
        self.probe_changed_at = 0.0

    def __call__(self, frame: VideoFrame, arrived: float) -> None:
        half = CLOCK_SQUARE // 2
        stamp = sum((luma(frame, self.x + CLOCK_SQUARE * i + half, self.y + half) > 128) << i for i in range(24))
        age = ((int(arrived * 1000) & 0xFFFFFF) - stamp) % (1 << 24)
        if age < 5000:  # a misread square gives an absurd age: dropped
            self.latency.append(age / 1000)
        x0, y0, _, _ = PROBE  # sampled up-left of the click point: the drawn pointer covers the rest
        state = int(luma(frame, self.x + x0 + 4, self.y + y0 + 4) > 128)
        if state != self.probe_state:
            self.probe_state, self.probe_changed_at = state, arrived


@contextmanager
def bench_server(codec: str, width: int, height: int) -> Iterator[tuple[ServerProcess, httpx.Client, str]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    server = launch_server(tmp)
    api = server.client()
    try:
        started = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM, "width": width, "height": height,
                                                      "streamVideoCodec": codec})
        if started.status_code != 200:
            raise SystemExit(f"desktop start failed: {started.text}")
        yield server, api, started.json()["display"]
    finally:
        api.post("/v1/desktop/stop")
        api.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def watch(server: ServerProcess, api: httpx.Client, viewers: int, seconds: float,
                clock: tuple[int, int] | None, transport: str = "webrtc") -> Measure:
    """Start `viewers` viewer processes (one after the other: the first one drives), warm up, measure. `transport`:
    `webrtc` (streaming/viewer.py) or `websocket` (streaming/socket_viewer.py, bench/stream_ws.py)."""
    workers = []
    try:
        for i in range(viewers):
            args = [sys.executable, __file__, "--worker", "--transport", transport]
            if clock:
                args += ["--clock", f"{clock[0]},{clock[1]}"] + (["--click"] if i == 0 else [])
            args += ["--", server.url, server.token or "", str(seconds)]  # a token may start with "-"
            worker = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
            workers.append(worker)
            assert worker.stdout is not None
            if worker.stdout.readline().strip() != "ready":
                raise SystemExit(f"viewer {i} did not connect")
        await asyncio.sleep(WARMUP_S)
        cpu0, sys0, t0 = cpu_seconds(server.proc.pid), system_busy(), time.monotonic()
        statuses = []
        while time.monotonic() < t0 + seconds:
            await asyncio.sleep(0.5)
            statuses.append(api.get("/v1/desktop/stream/status").json())
        elapsed = time.monotonic() - t0
        cpu1, sys1 = cpu_seconds(server.proc.pid), system_busy()
        results = [json.loads(w.communicate(timeout=60)[0].strip().splitlines()[-1]) for w in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    return Measure(
        cpu=(cpu1 - cpu0) / elapsed * 100,
        fps=[r["fps"] for r in results],
        latency=[x for r in results for x in r["latency"]],
        photon=[x for r in results for x in r["photon"]],
        kbps=statistics.median(s.get("bitrate", 0) for s in statuses) / 1000,
        viewer_cpu=sum(r["cpu"] for r in results),
        machine=100 * (sys1[0] - sys0[0]) / max(1, sys1[1] - sys0[1]),
        frame_rate=min(s.get("frameRate", 0) for s in statuses),
        encoders=max(s.get("encoders", 0) for s in statuses),
    )


async def viewer_worker(url: str, token: str, seconds: float, clock: tuple[int, int] | None, click: bool,
                        transport: str = "webrtc") -> None:
    """One viewer process: connect, say `ready`, warm up, measure, print the results as JSON."""
    reader = ClockReader(clock) if clock else None
    viewer: ViewerSession = (SocketViewer(url, token or None, on_frame=reader) if transport == "websocket"
                             else Viewer(url, token or None, on_frame=reader))
    try:
        await viewer.connect(timeout=30)
        print("ready", flush=True)
        await asyncio.sleep(WARMUP_S)
        if reader is not None:
            reader.latency.clear()
        frames, cpu0, t0 = viewer.received.frames, time.process_time(), time.monotonic()
        photon: list[float] = []
        while time.monotonic() < t0 + seconds:
            if click and reader is not None and clock is not None:
                photon += await click_to_photon(viewer, reader, clock)
            await asyncio.sleep(0.5)
        elapsed = time.monotonic() - t0
        print(json.dumps({"fps": (viewer.received.frames - frames) / elapsed,
                          "latency": reader.latency if reader else [], "photon": photon,
                          "cpu": (time.process_time() - cpu0) / elapsed * 100}), flush=True)
    finally:
        await viewer.close()


async def click_to_photon(viewer: ViewerSession, reader: ClockReader, origin: tuple[int, int]) -> list[float]:
    """Click the flip square over the data channel; seconds until a decoded frame shows it flipped."""
    x0, y0, x1, y1 = PROBE
    before = reader.probe_state
    sent = time.time()
    viewer.move(origin[0] + (x0 + x1) // 2, origin[1] + (y0 + y1) // 2)
    viewer.button(1, True)
    viewer.button(1, False)
    for _ in range(100):
        await asyncio.sleep(0.01)
        if reader.probe_state != before and reader.probe_changed_at >= sent:
            return [reader.probe_changed_at - sent]
    return []


def report(name: str, m: Measure, baseline_cpu: float | None = None, against: str = "1 viewer") -> None:
    ratio = f" ({m.cpu / baseline_cpu:.2f}x {against})" if baseline_cpu else ""
    print(f"  {name:<18} server CPU {m.cpu:5.1f} % of a core{ratio}; viewers {m.viewer_cpu:5.1f} %, machine "
          f"{m.machine:3.0f} % of {os.cpu_count()} cores; cap {m.frame_rate} fps, {m.encoders} encoder(s)")
    line = f"  {'':<18} fps/viewer {min(m.fps):5.1f}-{max(m.fps):5.1f}  {m.kbps:6.0f} kbps"
    if m.latency:
        line += (f"  glass-to-glass p50 {statistics.median(m.latency) * 1000:4.0f} ms "
                 f"p90 {percentile(m.latency, 0.9) * 1000:4.0f} ms")
    if m.photon:
        line += f"  input->photon p50 {statistics.median(m.photon) * 1000:4.0f} ms (n={len(m.photon)})"
    print(line, flush=True)


async def grab_frames(display: str, count: int) -> list[Frame]:
    source = FrameSource()
    sub = source.subscribe(display, 30)
    frames: list[Frame] = []
    try:
        for _ in range(count * 10):
            frame = await sub.next(timeout=1)
            if frame is not None:
                frames.append(frame)
            if len(frames) >= count:
                break
    finally:
        await source.close()
    return frames


def encode_baseline(codec: str, frames: list[Frame], viewers: int) -> None:
    """ms of CPU per picture: our shared pipeline vs one encoder per viewer (ours and aiortc's stock)."""
    from aiortc.codecs import get_encoder
    from aiortc.rtcrtpparameters import RTCRtpCodecParameters

    width, height = video_size(frames[0].width, frames[0].height)
    settings = EncoderSettings(codec, width, height, 30, default_bitrate(width, height))

    def run(encoders: int, stock: bool) -> float:
        """Every encoder converts and encodes each frame, as each aiortc sender does on its own."""
        canvas = Canvas(width, height)
        mime = {"h264": "video/H264", "vp8": "video/VP8"}[codec]
        encode: list[Callable[[VideoFrame, bool], object]]
        if stock:
            parameters = RTCRtpCodecParameters(mimeType=mime, clockRate=90000, payloadType=96)
            encode = [get_encoder(parameters).encode for _ in range(encoders)]
        else:
            encode = [VideoEncoder(settings).encode for _ in range(encoders)]
        start = time.process_time()
        for i, frame in enumerate(frames):
            for fn in encode:
                picture = canvas.render(frame, None)
                picture.pts, picture.time_base = i * 3000, TIME_BASE
                fn(picture, i == 0)
        return (time.process_time() - start) / len(frames) * 1000

    shared = run(1, stock=False)
    per_viewer = run(viewers, stock=False)
    stock = run(viewers, stock=True)
    print(f"  encode baseline on {len(frames)} busy frames ({width}x{height}, process CPU per picture):")
    print(f"    shared pipeline (1 convert + 1 encode, any number of viewers) {shared:6.1f} ms"
          f"  = {shared * 3:5.1f} % of a core at 30 fps")
    print(f"    one tuned encoder per viewer, {viewers} viewers               {per_viewer:6.1f} ms"
          f"  = {per_viewer * 3:5.1f} % ({per_viewer / shared:.2f}x)")
    print(f"    aiortc's stock {codec} encoder per viewer, {viewers} viewers       {stock:6.1f} ms"
          f"  = {stock * 3:5.1f} % ({stock / shared:.2f}x)")


async def bench_codec(codec: str, width: int, height: int, seconds: float) -> None:
    with bench_server(codec, width, height) as (server, api, display):
        scene = open_scene(display)
        busy: subprocess.Popen[bytes] | None = None
        try:
            listed = wait_for_windows(api, len(scene))
            print(f"\n== {codec}, {width}x{height} on {display}, {listed} windows, {os.cpu_count()} cores ==")
            api.post("/v1/desktop/stream/start").raise_for_status()
            one = await watch(server, api, 1, seconds, None)
            report("static, 1 viewer", one)
            report("static, 3 viewers", await watch(server, api, 3, seconds, None), one.cpu)
            busy = subprocess.Popen([sys.executable, "-c", BUSY_APP, str(min(width, 1200)), str(min(height, 860))],
                                    env=dict(os.environ, DISPLAY=display))
            origin = await asyncio.to_thread(window_origin, api, "stream-bench")
            one = await watch(server, api, 1, seconds, origin)
            report("busy, 1 viewer", one)
            report("busy, 3 viewers", await watch(server, api, 3, seconds, origin), one.cpu)
            frames = await grab_frames(display, 60)
            encode_baseline(codec, frames, 3)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
            close_scene(scene)


def window_origin(api: httpx.Client, title: str) -> tuple[int, int]:
    for _ in range(100):
        for window in api.get("/v1/desktop/windows").json()["windows"]:
            if window["title"] == title:
                time.sleep(1.0)  # let it draw
                return int(window["x"]), int(window["y"])
        time.sleep(0.1)
    raise SystemExit(f"window {title!r} did not appear")


def worker_main(argv: list[str]) -> None:
    """`--worker [--clock X,Y] [--click] -- URL TOKEN SECONDS`: one viewer process of `watch`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("seconds", type=float)
    parser.add_argument("--clock")
    parser.add_argument("--click", action="store_true")
    parser.add_argument("--transport", default="webrtc", choices=["webrtc", "websocket"])
    args = parser.parse_args(argv)
    clock = None
    if args.clock:
        x, y = args.clock.split(",")
        clock = (int(x), int(y))
    asyncio.run(viewer_worker(args.url, args.token, args.seconds, clock, args.click, args.transport))


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--codec", nargs="+", default=["h264"], choices=["h264", "vp8"])
    parser.add_argument("--size", default="1440x900")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    for codec in args.codec:
        asyncio.run(bench_codec(codec, width, height, args.seconds))


if __name__ == "__main__":
    main()
