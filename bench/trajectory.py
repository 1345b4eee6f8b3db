"""Benchmark the trajectory export of a recording (target: a 60 s recording with 100 actions in ≤ 5 s).

Records `--seconds` of a realistic 1440x900 desktop (the bench scene: terminals and images) while doing
`--actions` actions spread evenly (clicks, typing, key presses), then times
`GET /v1/desktop/recordings/{id}/trajectory` (PNG, and JPEG) end to end (the zip downloaded), the export
itself in this process (`recording.trajectory_export.export` on the downloaded MP4, no HTTP), and, as the
baseline in the same run, the naive export: for every screen a step names, seek the video and decode up
to it (what a script using PyAV's seek per timestamp does), encoding the same images as PNG.
Usage: .venv/bin/python bench/trajectory.py [--seconds 60] [--actions 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import av

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import BenchDesktop, bench_desktop
from desktop.events.action_log import WIRE
from desktop.screen.encode import encode
from recording.action_track import Tracked
from recording.trajectory import steps
from recording.trajectory_export import export


def record(bench: BenchDesktop, seconds: float, actions: int) -> str:
    api = bench.api
    assert api.post("/v1/desktop/recording/start", json={}).status_code == 200
    started = time.monotonic()
    for i in range(actions):
        due = started + (i + 0.5) * seconds / actions
        time.sleep(max(0.0, due - time.monotonic()))
        match i % 3:
            case 0:
                api.post("/v1/desktop/mouse/click", json={"x": 100 + (i * 37) % 1200, "y": 100 + (i * 53) % 700})
            case 1:
                api.post("/v1/desktop/keyboard/type", json={"text": f"echo step {i}\n"})
            case _:
                api.post("/v1/desktop/keyboard/press", json={"key": "ctrl+l"})
    time.sleep(max(0.0, started + seconds - time.monotonic()))
    answer = api.post("/v1/desktop/recording/stop").json()
    print(f"recorded {answer['id']}: {answer['durationMs'] / 1000:.1f} s, {answer['frames']} frames, "
          f"{answer['bytes'] / 1e6:.1f} MB, {actions} actions")
    return str(answer["id"])


def export_via_api(bench: BenchDesktop, rec_id: str, image_format: str) -> tuple[float, int, int]:
    begin = time.perf_counter()
    response = bench.api.get(f"/v1/desktop/recordings/{rec_id}/trajectory",
                             params={"imageFormat": image_format}, timeout=120)
    elapsed = time.perf_counter() - begin
    assert response.status_code == 200, response.text
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        rows = len(archive.read("steps.jsonl").splitlines())
    return elapsed, rows, len(response.content)


def naive_export(video: Path, times_ms: list[int]) -> float:
    """Seek to each time and decode forward to it: the baseline."""
    begin = time.perf_counter()
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        time_base = stream.time_base
        assert time_base is not None
        for t in times_ms:
            container.seek(int(t / 1000 / time_base), stream=stream, backward=True, any_frame=False)
            chosen = None
            for frame in container.decode(stream):
                if frame.time is not None and frame.time * 1000 > t:
                    break
                chosen = frame
            if chosen is not None:
                encode(chosen.to_image(), "png", 90)
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--actions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with bench_desktop("trajectory", 171) as bench:
        rec_id = record(bench, args.seconds, args.actions)
        bests = {}
        for image_format in ("png", "jpeg"):
            samples = [export_via_api(bench, rec_id, image_format) for _ in range(args.runs)]
            best = bests[image_format] = min(s[0] for s in samples)
            print(f"trajectory export ({image_format}): best {best:.2f} s of {args.runs}, "
                  f"{samples[0][1]} steps, {samples[0][2] / 1e6:.1f} MB zip")
        entries = [Tracked.from_wire(WIRE.validate_python(e))
                   for e in bench.api.get(f"/v1/desktop/recordings/{rec_id}/actions").json()["entries"]]
        info = bench.api.get(f"/v1/desktop/recordings/{rec_id}").json()
        times = sorted({t for s in steps(entries, info["durationMs"]) for t in (s.before_ms, s.after_ms)})
        with tempfile.TemporaryDirectory() as tmp:
            video = Path(tmp) / "rec.mp4"
            video.write_bytes(bench.api.get(f"/v1/desktop/recordings/{rec_id}/download").content)
            rows = steps(entries, info["durationMs"])
            local = []
            for _ in range(args.runs):
                begin = time.perf_counter()
                summary = export(video, rows, Path(tmp) / "t.zip", parquet=False)
                local.append(time.perf_counter() - begin)
            print(f"export in-process (png, no parquet, no HTTP): best {min(local):.2f} s of {args.runs}, "
                  f"{summary.images} images")
            naive = naive_export(video, times)
        print(f"baseline, seek and decode per screen ({len(times)} screens, png): {naive:.2f} s "
              f"({naive / min(local):.1f}x the in-process export)")


if __name__ == "__main__":
    main()
