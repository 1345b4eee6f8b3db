"""Screen size changes at runtime: time to the first frame at the new size in a viewer, the X call, memory.

    .venv/bin/python bench/display.py [--count 12] [--codec vp8 h264]

1. A server and a desktop with the usual scene (terminals and images), a Python aiortc viewer connected:
   `POST /v1/desktop/display` cycling through common sizes, timed to the response, to the X server's
   confirmation (the RandR calls, `elapsedMs`), and to the first decoded frame of the new size in the
   viewer (target: 500 ms). Baseline in the same run: `GET /v1/health`.
2. Xvfb alone: idle RSS started at the plain size vs started at a larger framebuffer and switched down
   (what the desktop does, docs/display.md), and the start time of each.
3. Xorg with the dummy driver (`xserver-xorg-video-dummy`), the alternative: start time, resize time and
   RSS at the same sizes; skipped with a message when it is not installed.
4. Xvfb with GLX (`"opengl": true`) and without (the default), alternating: start time and private memory
   (docs/display.md "OpenGL").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import desktop.x11.thread as _xthread  # noqa: F401  (python-xlib fixes every connection of the service gets)
from bench.common import rss_kib, summary, timed
from bench.footprint import rollup
from bench.scene import close_scene, open_scene, wait_for_windows
from desktop.x11.randr import apply_display
from streaming.viewer import Viewer
from tests.conftest import launch_server

DISPLAY_NUM = 298
PORTS = "59550-59559"
SIZES = ((1280, 720), (1920, 1080), (1440, 900), (1024, 768), (2560, 1440), (1366, 768))
PLAIN = (1440, 900)
FRAMEBUFFERS = ((1440, 900), (1920, 1080), (2560, 1600), (3840, 2160))
SPARE_DISPLAY = 874
DUMMY_DRIVER = Path("/usr/lib/xorg/modules/drivers/dummy_drv.so")
SETTLE_S = 1.0

# The settings the dummy driver needs (docs/display.md): no input hot-plug, a pixel clock high enough for
# 4K modelines (the default 300 MHz drops them silently), and room in VideoRam for the largest screen.
XORG_DUMMY_CONF = """\
Section "ServerFlags"
  Option "AutoAddDevices" "false"
  Option "DontVTSwitch" "true"
EndSection
Section "Device"
  Identifier "dummy"
  Driver "dummy"
  VideoRam 256000
  DacSpeed 2000
EndSection
Section "Monitor"
  Identifier "monitor"
  HorizSync 5.0-1000.0
  VertRefresh 5.0-200.0
EndSection
Section "Screen"
  Identifier "screen"
  Device "dummy"
  Monitor "monitor"
  DefaultDepth 24
  SubSection "Display"
    Depth 24
    Virtual 1440 900
  EndSubSection
EndSection
"""


# -- 1. the live view follows ------------------------------------------------------------------------

async def viewer_follows(url: str, token: str | None, count: int) -> None:
    viewer = Viewer(url, token)
    await viewer.connect()
    responses: list[float] = []
    applied: list[float] = []
    first_frames: list[float] = []
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
            for i in range(count):
                width, height = SIZES[i % len(SIZES)]
                began = time.monotonic()
                answer = await asyncio.to_thread(api.post, "/v1/desktop/display",
                                                 json={"width": width, "height": height})
                responses.append(time.monotonic() - began)
                answer.raise_for_status()
                applied.append(answer.json()["elapsedMs"] / 1000)
                for _ in range(2000):  # 10 s
                    frame = viewer.received.last_frame
                    if frame is not None and (frame.width, frame.height) == (width, height):
                        first_frames.append(time.monotonic() - began)
                        break
                    await asyncio.sleep(0.005)
                else:
                    print(f"  no {width}x{height} frame within 10 s")
                await asyncio.sleep(0.3)
    finally:
        await viewer.close()
    summary("POST /v1/desktop/display (HTTP response)", responses)
    summary("  of which the X server applying it (RandR)", applied)
    summary("first viewer frame at the new size (target 500 ms)", first_frames)


def live_view(count: int, codec: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-display-"))
    server = launch_server(tmp)
    api = server.client()
    scene: list[subprocess.Popen[bytes]] = []
    try:
        started = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM, "width": PLAIN[0],
                                                      "height": PLAIN[1], "streamVideoCodec": codec,
                                                      "webrtcPortRange": PORTS})
        if started.status_code != 200:
            raise SystemExit(f"desktop start failed: {started.text}")
        display = started.json()["display"]
        limits = started.json()["resolution"]
        scene = open_scene(display)
        listed = wait_for_windows(api, len(scene))
        print(f"\ndisplay {display} {PLAIN[0]}x{PLAIN[1]} (maximum {limits['maxWidth']}x{limits['maxHeight']}), "
              f"{listed} windows open, {codec}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        summary("GET /v1/health (HTTP baseline)", timed(lambda: api.get("/v1/health"), 50))
        api.post("/v1/desktop/stream/start").raise_for_status()
        asyncio.run(viewer_follows(server.url, server.token, count))
    finally:
        close_scene(scene)
        api.post("/v1/desktop/stream/stop")
        api.post("/v1/desktop/stop")
        api.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# -- 2 and 3. the X servers alone ---------------------------------------------------------------------------

@contextmanager
def x_server(args: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """An X server on SPARE_DISPLAY, and the seconds until it announced itself (-displayfd)."""
    read_fd, write_fd = os.pipe()
    began = time.perf_counter()
    proc = subprocess.Popen([*args, f":{SPARE_DISPLAY}", "-nolisten", "tcp", "-noreset", "-displayfd", str(write_fd)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=(write_fd,))
    os.close(write_fd)
    try:
        announced = b""
        while b"\n" not in announced:
            chunk = os.read(read_fd, 64)
            if not chunk:
                raise SystemExit(f"{args[0]} exited before it was ready")
            announced += chunk
        yield proc, time.perf_counter() - began
    finally:
        os.close(read_fd)
        proc.terminate()
        proc.wait(10)


def switch(size: tuple[int, int]) -> float:
    """One resize on a connection of its own; the seconds the RandR calls took."""
    from Xlib.display import Display

    conn = Display(f":{SPARE_DISPLAY}")
    try:
        began = time.perf_counter()
        apply_display(conn, *size, 96)
        return time.perf_counter() - began
    finally:
        conn.close()


def xvfb_memory() -> None:
    print(f"\nXvfb alone, idle at {PLAIN[0]}x{PLAIN[1]} (RSS after {SETTLE_S:.0f} s; start = until -displayfd):")
    plain_rss = None
    for framebuffer in FRAMEBUFFERS:
        with x_server(["Xvfb", "-screen", "0", f"{framebuffer[0]}x{framebuffer[1]}x24"]) as (proc, start):
            switched = switch(PLAIN) if framebuffer != PLAIN else 0.0
            time.sleep(SETTLE_S)
            rss = rss_kib(proc.pid) / 1024
            plain_rss = plain_rss if plain_rss is not None else rss
            label = "plain" if framebuffer == PLAIN else "framebuffer"
            print(f"  {label} {framebuffer[0]}x{framebuffer[1]:<5}  start {start * 1000:6.1f} ms   switch "
                  f"{switched * 1000:5.1f} ms   RSS {rss:6.1f} MiB  (+{rss - plain_rss:.1f})")


def xorg_dummy(count: int) -> None:
    if not DUMMY_DRIVER.exists() or shutil.which("Xorg") is None:
        print("\nXorg dummy driver: not installed (apt-get install xserver-xorg-video-dummy); skipped")
        return
    with tempfile.TemporaryDirectory(prefix="bench-xorg-") as tmp:
        conf = Path(tmp) / "xorg.conf"
        conf.write_text(XORG_DUMMY_CONF)
        args = ["Xorg", "-config", str(conf), "-logfile", str(Path(tmp) / "Xorg.log"), "-novtswitch", "-sharevts"]
        with x_server(args) as (proc, start):
            first = switch(PLAIN)
            time.sleep(SETTLE_S)
            rss = rss_kib(proc.pid) / 1024
            switches = [switch(SIZES[i % len(SIZES)]) for i in range(count)]
            grown = switch((3840, 2160))
            switch(PLAIN)
            time.sleep(SETTLE_S)
            after = rss_kib(proc.pid) / 1024
        print(f"\nXorg dummy driver: start {start * 1000:.1f} ms, first switch to {PLAIN[0]}x{PLAIN[1]} "
              f"{first * 1000:.1f} ms, idle RSS {rss:.1f} MiB; after growing to 3840x2160 ({grown * 1000:.1f} ms) "
              f"and back {after:.1f} MiB")
        summary("  Xorg dummy resize (RandR calls)", switches)
    with x_server(["Xvfb", "-screen", "0", "2560x1600x24"]) as (proc, start):
        switches = [switch(SIZES[i % len(SIZES)]) for i in range(count)]
    summary("  Xvfb resize, same sizes (RandR calls)", switches)


def xvfb_opengl(count: int) -> None:
    print(f"\nXvfb with and without GLX, alternating, {count} starts each (start = until -displayfd):")
    starts: dict[bool, list[float]] = {True: [], False: []}
    private: dict[bool, float] = {}
    for _ in range(count):
        for opengl in (True, False):
            flags = [] if opengl else ["-extension", "GLX"]
            with x_server(["Xvfb", "-screen", "0", "2560x1600x24", *flags]) as (proc, start):
                starts[opengl].append(start)
                private[opengl] = rollup(proc.pid)["Private_Dirty"] / 2**20
    for opengl in (True, False):
        summary(f"  {'with GLX (opengl: true)' if opengl else 'without GLX (default)'} start", starts[opengl])
        print(f"    private memory once started {private[opengl]:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=12, help="resizes per measurement")
    parser.add_argument("--codec", nargs="+", default=["vp8", "h264"], choices=["vp8", "h264"])
    args = parser.parse_args()
    if os.path.exists(f"/tmp/.X11-unix/X{SPARE_DISPLAY}"):
        raise SystemExit(f"display :{SPARE_DISPLAY} is taken; free it first")
    for codec in args.codec:
        live_view(args.count, codec)
    xvfb_memory()
    xorg_dummy(args.count)
    xvfb_opengl(args.count)


if __name__ == "__main__":
    main()
