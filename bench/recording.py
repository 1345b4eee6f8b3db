"""Benchmark recording at 1440x900 beside `ffmpeg -f x11grab` on the same screen in the same run.

For each case: CPU time of the recording process per second of recording (utime+stime from
/proc/<pid>/stat over a steady window, after a warm-up), the effective frame rate (frames in the file
/ its duration, by ffprobe) and bytes per second. Cases: the server idle (no recording), recording an
idle screen and a busy one (an xterm printing timestamps every 10 ms over a realistic scene), and the
reference's way, ffmpeg x11grab with libx264 ultrafast, on both screens.
Then, in this process, the shared capture loop: CPU of a do-nothing 30 fps subscriber alone, of a
recording alone, and of a recording plus that subscriber (sharing means the last costs what the
second does; the grab rate and the capture threads show it directly).
Last, what a test harness does for every test: a recording of the scene started, given two pictures and
finished at once, each on a new thread as in the server, with a new x264 encoder (the design before) and
with the last recording's (now): CPU of each, alternating, medians.
Usage: .venv/bin/python bench/recording.py [--seconds 10] [--runs 3] [--display-num 296] [--short 20]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import mss

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import BenchDesktop, bench_desktop, cpu_seconds
from desktop.screen.frames import FrameSource
from recording.catalog import Catalog, RecordingRecord
from recording.encoder import EncoderSettings, H264Encoder, Mp4Writer
from recording.recorder import Recorder

WARMUP_S = 1.0
BUSY_SCRIPT = "import sys, time\nwhile True:\n    print(time.time(), flush=True)\n    time.sleep(0.01)\n"


@dataclass
class Row:
    label: str
    cpu: float
    """CPU seconds per wall second (1.0 = one core)."""
    fps: float | None = None
    bytes_per_s: float | None = None

    def show(self) -> None:
        fps = f"{self.fps:6.2f} fps" if self.fps is not None else " " * 10
        rate = f"{self.bytes_per_s / 1000:8.0f} kB/s" if self.bytes_per_s is not None else ""
        print(f"{self.label:<48} CPU {self.cpu * 100:6.1f} % of a core   {fps}   {rate}")


def file_rate(path: Path) -> tuple[float, float]:
    """(frames / duration, bytes / duration) of a video, by ffprobe."""
    done = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_format", "-show_streams", "-of",
                           "json", str(path)], capture_output=True, check=True, timeout=120)
    info = json.loads(done.stdout)
    duration = float(info["format"]["duration"])
    return int(info["streams"][0]["nb_read_packets"]) / duration, path.stat().st_size / duration


def steady_cpu(pid: int | str, seconds: float) -> float:
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


@contextmanager
def busy_screen(display: str) -> Iterator[None]:
    """A large xterm printing a timestamp every 10 ms: the screen changes continuously."""
    proc = subprocess.Popen(["xterm", "-geometry", "150x50+200+60", "-fa", "DejaVu Sans Mono", "-fs", "10",
                             "-e", sys.executable, "-c", BUSY_SCRIPT],
                            env=dict(os.environ, DISPLAY=display), stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # mapped and scrolling
        yield
    finally:
        proc.kill()
        proc.wait()
        time.sleep(0.5)  # let the screen settle


def ours(bench: BenchDesktop, label: str, seconds: float) -> Row:
    api = bench.api
    started = api.post("/v1/desktop/recording/start", json={"fps": 30})
    if started.status_code != 200:
        raise SystemExit(f"recording start failed: {started.text}")
    time.sleep(WARMUP_S)
    cpu = steady_cpu(bench.server.proc.pid, seconds)
    rec = api.post("/v1/desktop/recording/stop").json()
    fps, rate = file_rate(bench.server.state_dir / "recordings" / rec["fileName"])
    return Row(label, cpu, fps, rate)


def ffmpeg(bench: BenchDesktop, label: str, seconds: float) -> Row:
    out = bench.tmp / f"ffmpeg-{time.monotonic_ns()}.mp4"
    proc = subprocess.Popen(["ffmpeg", "-y", "-loglevel", "error", "-f", "x11grab", "-video_size", "1440x900",
                             "-framerate", "30", "-i", bench.display, "-c:v", "libx264", "-preset", "ultrafast",
                             "-pix_fmt", "yuv420p", str(out)], stdin=subprocess.PIPE)
    try:
        time.sleep(WARMUP_S)
        cpu = steady_cpu(proc.pid, seconds)
        proc.communicate(b"q", timeout=30)  # a clean finish, as ffmpeg's own `q` key
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    fps, rate = file_rate(out)
    return Row(label, cpu, fps, rate)


# -- the shared capture loop, in this process ------------------------------------------------------


@dataclass
class Shared:
    cpu: float
    grabs_per_s: float
    """Screen grabs of the capture loop per second (its frame sequence numbers)."""
    threads: int
    """Capture threads running (one per loop)."""


async def in_process(display: str, seconds: float, recording: bool, idle_subscriber: bool) -> Shared:
    """CPU of this process while it records and/or runs a 30 fps subscriber that does nothing."""
    source = FrameSource()
    tasks: list[asyncio.Task[None]] = []
    subscriber = source.subscribe(display, 30) if idle_subscriber else None
    if subscriber is not None:
        async def drain() -> None:
            while await subscriber.next() is not None:
                pass
        tasks.append(asyncio.create_task(drain()))
    recorder = None
    if recording:
        catalog = await asyncio.to_thread(Catalog.open, Path(tempfile.mkdtemp(prefix="bench-rec-")))
        claim = await asyncio.to_thread(catalog.claim)
        record = RecordingRecord(claim.number, "recording", "", fps=30, width=1440, height=900)

        async def ended(_: Recorder) -> None:
            return None

        recorder = await Recorder.open(record, claim, EncoderSettings(), ended)
        recorder.start(source.subscribe(display, 30), time.monotonic())
    await asyncio.sleep(WARMUP_S)
    first = source.latest.seq if source.latest else 0
    start = time.monotonic()
    cpu = await asyncio.to_thread(steady_cpu, "self", seconds)
    grabs = ((source.latest.seq if source.latest else 0) - first) / (time.monotonic() - start)
    threads = sum(1 for t in threading.enumerate() if t.name.startswith("frames-"))
    if recorder is not None:
        await recorder.stop()
    await source.close()
    for task in tasks:
        await task
    return Shared(cpu, grabs, threads)


def shared_capture(display: str, seconds: float, runs: int) -> None:
    cases = [("capture only (a 30 fps subscriber, no work)", False, True), ("recording alone", True, False),
             ("recording + a 30 fps subscriber", True, True)]
    results: dict[str, list[Shared]] = {label: [] for label, _, _ in cases}
    for _ in range(runs):  # interleaved, so that load from elsewhere hits every case alike
        for label, recording, subscriber in cases:
            results[label].append(asyncio.run(in_process(display, seconds, recording, subscriber)))
    medians = {}
    for label, shared in results.items():
        cpu = statistics.median(r.cpu for r in shared)
        medians[label] = cpu
        grabs = statistics.median(r.grabs_per_s for r in shared)
        threads = max(r.threads for r in shared)
        print(f"in-process: {label:<44} CPU {cpu * 100:6.1f} % of a core   {grabs:5.1f} grabs/s, "
              f"{threads} capture thread(s)")
    extra = medians["recording + a 30 fps subscriber"] - medians["recording alone"]
    print(f"{'':<56} the second subscriber adds {extra * 100:+.1f} % "
          f"(a capture loop of its own would add ~{medians[cases[0][0]] * 100:.1f} %)")


def short_recordings(display: str, count: int) -> None:
    with mss.MSS(display=display) as grabber:
        shot = grabber.grab(grabber.monitors[0])
    data, width, height = bytes(shot.raw), shot.width, shot.height
    tmp = Path(tempfile.mkdtemp(prefix="bench-short-"))
    spare: H264Encoder | None = None

    def record(index: int, reuse: bool) -> float:
        nonlocal spare
        started = time.thread_time()
        writer = Mp4Writer(tmp / f"rec_{index}.mp4", width, height, 30, encoder=spare if reuse else None)
        writer.write(data, width, height, 0)
        writer.write(data, width, height, 300)
        writer.finish(400)
        spare = writer.reusable_encoder()
        return time.thread_time() - started

    costs: dict[bool, list[float]] = {False: [], True: []}
    for index in range(2 * count):  # alternating, so that load from elsewhere hits both alike
        reuse = bool(index % 2)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:  # a new thread, as the server's
            costs[reuse].append(thread.submit(record, index, reuse).result())
        (tmp / f"rec_{index}.mp4").unlink()
    tmp.rmdir()
    cold, warm = (statistics.median(costs[r]) * 1000 for r in (False, True))
    print(f"a short recording ({width}x{height}, 2 pictures), new encoder (before)   CPU {cold:6.1f} ms")
    print(f"a short recording ({width}x{height}, 2 pictures), last one's encoder     CPU {warm:6.1f} ms   "
          f"{cold / warm:.1f}x less")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--display-num", type=int, default=296)
    parser.add_argument("--runs", type=int, default=3, help="runs of each in-process case (medians)")
    parser.add_argument("--short", type=int, default=20, help="short recordings of each kind (medians)")
    args = parser.parse_args()

    with bench_desktop("recording", args.display_num) as bench:
        pid = bench.server.proc.pid
        rows = [Row("server, no recording (idle screen)", steady_cpu(pid, args.seconds))]
        rows.append(ours(bench, "ours: record idle screen, 30 fps", args.seconds))
        rows.append(ffmpeg(bench, "ffmpeg x11grab: idle screen, 30 fps", args.seconds))
        with busy_screen(bench.display):
            rows.append(ours(bench, "ours: record busy screen, 30 fps", args.seconds))
            rows.append(ffmpeg(bench, "ffmpeg x11grab: busy screen, 30 fps", args.seconds))
            print("CPU is per second of recording, from /proc/<pid>/stat over a steady window\n")
            for row in rows:
                row.show()
            print()
            shared_capture(bench.display, args.seconds, args.runs)
        print()
        short_recordings(bench.display, args.short)
        busy, idle = rows[3], rows[1]
        print()
        checks = [("busy fps >= 29.5", (busy.fps or 0) >= 29.5, f"{busy.fps:.2f}"),
                  ("busy CPU <= 35 % of a core", busy.cpu <= 0.35, f"{busy.cpu * 100:.1f} %"),
                  ("idle CPU <= 5 % of a core", idle.cpu <= 0.05, f"{idle.cpu * 100:.1f} %")]
        for name, ok, value in checks:
            print(f"target {name:<32} {value:>10}  {'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
