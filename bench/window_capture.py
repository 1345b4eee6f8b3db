"""Benchmark window screenshots (XComposite) on the realistic 1440x900 scene, with their baselines.

Cases, over HTTP (medians and p90s): a PNG of an 800x600 window uncovered and covered, against the
same rectangle as a screenshot region and against a full-screen PNG cropped by the client; an xterm of
about 800x600 too, uncovered and covered (text: what agents mostly look at; the pattern window's
fine-grained gradient is the worst case for PNG). Server and Xvfb CPU per request are printed beside
each median: on a shared machine they hold when the wall clock does not. Before the first window capture nothing is
redirected, so the run first measures the desktop without redirection, then with it: a full-screen
screenshot, an application's drawing rate and the X server's memory, and what redirecting one window
on demand (and back) costs per capture and gets wrong for a covered window.
Usage: .venv/bin/python bench/window_capture.py [--requests 100]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from PIL import Image, ImageChops
from Xlib.display import Display
from Xlib.ext import composite

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mss.linux import xcb

from bench.common import BenchDesktop, bench_desktop, cpu_seconds, rss_kib, summary, timed
from desktop.screen.screenshots import ShotOptions
from desktop.windows.capture import _Connections, _SharedImage, render
from tests.support.window_app import WindowApp, pattern

TARGET_S = 0.008
WINDOW = "800x600+200+120"
DRAW_FRAMES = 300


def fetch(api: httpx.Client, path: str, **params: object) -> Callable[[], bytes]:
    def get() -> bytes:
        response = api.get(path, params=params)
        if response.status_code != 200:
            raise SystemExit(f"{path} {params} -> {response.status_code}: {response.text}")
        return response.content
    return get


def listed(api: httpx.Client, title: str) -> dict[str, object]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = [w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"] == title]
        if found:
            return dict(found[0])
        time.sleep(0.05)
    raise SystemExit(f"the {title} window never appeared")


def drawing(display: str) -> float:
    """An application's cost per frame: fill an 800x600 window of its own and wait for the server (seconds)."""
    d = Display(display)
    screen = d.screen()
    window = screen.root.create_window(600, 250, 800, 600, 0, screen.root_depth, override_redirect=True)
    window.map()
    gcs = [window.create_gc(foreground=colour) for colour in (0x204080, 0x806020)]
    d.sync()
    began = time.perf_counter()
    for i in range(DRAW_FRAMES):
        window.fill_rectangle(gcs[i % 2], 0, 0, 800, 600)
        d.sync()
    took = (time.perf_counter() - began) / DRAW_FRAMES
    window.destroy()
    d.close()
    return took


def top_level(d: Display, wid: int) -> int:
    root = d.screen().root.id
    current = wid
    while True:
        parent = d.create_resource_object("window", current).query_tree().parent
        if parent.id == root:
            return current
        current = parent.id


def on_demand(display: str, wid: int, width: int, height: int, count: int) -> tuple[list[float], Image.Image]:
    """Redirect one window, name its pixmap, grab it, un-redirect: per capture, and the last image."""
    d = Display(display)
    d.composite_query_version()
    frame = d.create_resource_object("window", top_level(d, wid))
    client = d.create_resource_object("window", wid)
    conn, _ = xcb.connect(display)
    shm = _SharedImage(conn, width * height * 4)
    image = Image.new("RGB", (width, height))

    def once() -> None:
        nonlocal image
        frame.composite_redirect_window(composite.RedirectAutomatic)
        pixmap = frame.composite_name_window_pixmap()
        origin = client.translate_coords(frame, 0, 0)
        image = shm.grab(pixmap.id, -origin.x, -origin.y, width, height)
        pixmap.free()
        frame.composite_unredirect_window(composite.RedirectAutomatic)
        d.sync()

    samples = timed(once, count)
    shm.close()
    xcb.disconnect(conn)
    d.close()
    return samples, image


def xvfb_pid(display: str) -> int:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"Xvfb") and display.encode() in argv:
            return int(cmdline.parent.name)
    raise SystemExit(f"no Xvfb for {display}")


def case(bench: BenchDesktop, label: str, fn: Callable[[], object], count: int, baseline: float | None = None) -> float:
    """Wall-clock summary, then the CPU time the server and the X server spent per request (load-proof)."""
    fn()
    server, xserver = bench.server.proc.pid, xvfb_pid(bench.display)
    before = cpu_seconds(server), cpu_seconds(xserver)
    median = summary(label, timed(fn, count), baseline)
    server_ms = (cpu_seconds(server) - before[0]) / count * 1000
    x_ms = (cpu_seconds(xserver) - before[1]) / count * 1000
    print(f"{'':<52} CPU per request: server {server_ms:6.2f} ms, Xvfb {x_ms:6.2f} ms")
    return median


def desktop_costs(bench: BenchDesktop, label: str, count: int) -> None:
    case(bench, f"[{label}] full-screen PNG 1440x900", fetch(bench.api, "/v1/desktop/screenshot"), count // 2)
    xserver = xvfb_pid(bench.display)
    before = cpu_seconds(xserver)
    per_frame = drawing(bench.display)
    x_ms = (cpu_seconds(xserver) - before) / DRAW_FRAMES * 1000
    print(f"[{label}] app fills an 800x600 window + sync: {per_frame * 1000:.3f} ms/frame wall, Xvfb CPU "
          f"{x_ms:.3f} ms/frame; Xvfb RSS {rss_kib(xvfb_pid(bench.display)) / 1024:.1f} MB")


def floor(display: str, wid: int, count: int) -> None:
    """The server's capture code in this process, without HTTP: wall and CPU time of this thread."""
    conns = _Connections(display)
    shot = ShotOptions()
    try:
        def grab() -> None:
            conns.grab(wid, False)

        def grab_png() -> None:
            began = time.perf_counter()
            image, region = conns.grab(wid, False)
            render(image, shot, region, None, (1440, 900), began, time.perf_counter())

        for label, fn in (("grab only (NameWindowPixmap + XShm)", grab), ("grab + PNG", grab_png)):
            summary(f"floor: {label}", timed(fn, count))
            summary(f"floor: {label} (CPU time)", timed(fn, count, clock=time.thread_time))
    finally:
        conns.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--display-num", type=int, default=520)
    args = parser.parse_args()
    n = args.requests

    with bench_desktop("window-capture", args.display_num) as bench:
        api, display = bench.api, bench.display
        health = bench.health_baseline(n)
        app = WindowApp(display, bench.tmp / "target.jsonl", "bench-target", WINDOW)
        cover = None
        text_median = covered_text = float("nan")
        try:
            target = listed(api, "bench-target")
            wid, x, y = str(target["id"]), int(target["x"]), int(target["y"])  # type: ignore[call-overload]
            app.wait_for(lambda e: e["type"] == "Expose")
            time.sleep(0.3)

            print("\nwithout redirection (before the first window capture):")
            desktop_costs(bench, "no redirect", n)
            cover = WindowApp(display, bench.tmp / "cover.jsonl", "bench-cover", "500x400+500+300", seed=90)
            listed(api, "bench-cover")
            time.sleep(0.3)
            samples, image = on_demand(display, int(wid), 800, 600, n)
            summary("[no redirect] on-demand redirect+grab+unredirect (in process)", samples)
            wrong = ImageChops.difference(image, pattern(800, 600)).convert("L").point(lambda v: 255 if v else 0)
            share = sum(wrong.histogram()[1:]) / (800 * 600)
            print(f"[no redirect] on-demand capture of the covered window: {share:.1%} of its pixels wrong "
                  "(the covering window's, until the app repaints)")

            print("\nwith every top-level window redirected (the server's window-capture thread):")
            window_png = fetch(api, f"/v1/desktop/windows/{wid}/screenshot")
            began = time.perf_counter()
            first = Image.open(io.BytesIO(window_png())).convert("RGB")  # redirects, waits for the repaint
            whole = ImageChops.difference(first, pattern(800, 600)).getbbox() is None
            print(f"first window capture (redirects the desktop, covered window): "
                  f"{(time.perf_counter() - began) * 1000:.0f} ms, whole: {whole}")
            time.sleep(0.3)
            desktop_costs(bench, "redirected", n)

            print()
            covered = Image.open(io.BytesIO(window_png())).convert("RGB")
            same = ImageChops.difference(covered, pattern(800, 600)).getbbox() is None
            print(f"covered 800x600 window: capture equals its own pixels: {same}")
            timed(window_png, 5)
            covered_median = case(bench, "window PNG 800x600, covered", window_png, n, health)
            cover.close()
            cover = None
            time.sleep(0.3)
            uncovered_median = case(bench, "window PNG 800x600, uncovered", window_png, n, health)
            region = fetch(api, "/v1/desktop/screenshot/region", x=x, y=y, width=800, height=600)
            case(bench, "baseline: screenshot region PNG 800x600 (same rect)", region, n, health)
            full = fetch(api, "/v1/desktop/screenshot")

            def full_cropped() -> None:
                Image.open(io.BytesIO(full())).crop((x, y, x + 800, y + 600)).load()

            case(bench, "baseline: full-screen PNG, cropped by the client", full_cropped, n, health)
            case(bench, "window JPEG q70 800x600", fetch(api, f"/v1/desktop/windows/{wid}/screenshot",
                                                         format="jpeg", quality=70), n, health)
            case(bench, "window PNG at scale 0.5 (400x300)", fetch(api, f"/v1/desktop/windows/{wid}/screenshot",
                                                                   scale=0.5), n, health)
            terminal = subprocess.Popen(["xterm", "-T", "bench-xterm", "-geometry", "132x46+300+150", "-fa",
                                         "DejaVu Sans Mono", "-fs", "9", "-e", "sh", "-c",
                                         "ls -la --color=always /usr/bin | head -300; exec sleep 3600"], env=bench.env)
            try:
                term = listed(api, "bench-xterm")
                resized = api.post(f"/v1/desktop/windows/{term['id']}/resize", json={"width": 800, "height": 600})
                size = f"{resized.json()['width']}x{resized.json()['height']}"
                time.sleep(0.5)
                text_median = case(bench, f"window PNG, xterm {size} (text), covering the pattern",
                                   fetch(api, f"/v1/desktop/windows/{term['id']}/screenshot"), n, health)
                post = api.post(f"/v1/desktop/windows/{wid}/raise")  # the pattern window now covers the xterm
                if post.status_code != 200:
                    raise SystemExit(post.text)
                covered_text = case(bench, f"window PNG, xterm {size} (text), covered",
                                    fetch(api, f"/v1/desktop/windows/{term['id']}/screenshot"), n, health)
            finally:
                terminal.kill()
                terminal.wait()
            print()
            floor(display, int(wid), n)
            print()
            for label, median in (("pattern, covered", covered_median), ("pattern, uncovered", uncovered_median),
                                  ("xterm, uncovered", text_median), ("xterm, covered", covered_text)):
                verdict = "ok" if median <= TARGET_S else "MISSED"
                print(f"target window PNG ~800x600 {label:<20} <= {TARGET_S * 1000:.0f} ms: "
                      f"{median * 1000:.2f} ms  {verdict}")
        finally:
            if cover is not None:
                cover.close()
            app.close()


if __name__ == "__main__":
    main()
