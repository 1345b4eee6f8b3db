"""Write a trajectory as a dataset: `steps.jsonl` and the screens it names, in one zip (docs/trajectories.md).

The video is decoded once, front to back, and only the frames some step names are converted and
encoded, each once however many steps share it (a step's "after" is the next one's "before"). Encoding
runs on a small pool beside the decoder. With `pyarrow` installed the archive also holds
`steps.parquet`, the same rows with the images inside, typed for the Hugging Face `datasets` library
(`datasets.load_dataset("parquet", data_files="steps.parquet")` gives `before`/`after` as images).
Blocking: call it off the event loop.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
from av.video.frame import VideoFrame

from desktop.screen.encode import encode
from recording.trajectory import Step
from sandbox_desktop_wire.enums import ScreenshotFormat
from sandbox_desktop_wire.trajectory import TrajectoryImageFormat

EXTENSIONS = {TrajectoryImageFormat.PNG: "png", TrajectoryImageFormat.JPEG: "jpg"}
JPEG_QUALITY = 90
ENCODERS = 2
"""Threads encoding images while the decoder goes on (the machines this runs on have 2+ cores)."""
HF_FEATURES = {
    "step": {"dtype": "int64", "_type": "Value"},
    "timestampMs": {"dtype": "int64", "_type": "Value"},
    "action": {"dtype": "string", "_type": "Value"},
    "source": {"dtype": "string", "_type": "Value"},
    "at": {"dtype": "string", "_type": "Value"},
    "before": {"_type": "Image"},
    "after": {"_type": "Image"},
}
"""The `datasets` features of steps.parquet, stored in its schema metadata so images load as images."""


@dataclass(frozen=True)
class ExportSummary:
    steps: int
    images: int
    parquet: bool


def export(video: Path, steps: Sequence[Step], archive: Path, *,
           image_format: TrajectoryImageFormat = TrajectoryImageFormat.PNG,
           parquet: bool | None = None) -> ExportSummary:
    """Write the zip `archive` for `steps` of the recording `video`; `parquet` None: when pyarrow is there."""
    extension = EXTENSIONS[image_format]
    fmt = ScreenshotFormat(image_format)  # each a trajectory may use is a screenshot format
    times = sorted({t for step in steps for t in (step.before_ms, step.after_ms)})
    names = {t: f"images/{t:09d}.{extension}" for t in times}
    images: dict[int, bytes] = {}
    with ThreadPoolExecutor(ENCODERS, thread_name_prefix="trajectory") as pool:
        pending: list[tuple[list[int], Future[bytes]]] = []
        for frame_times, frame in frames_at(video, times):
            pending.append((frame_times, pool.submit(_encode, frame, fmt)))
        for frame_times, future in pending:
            data = future.result()
            for t in frame_times:
                images[t] = data
    rows = [_row(step, names) for step in steps]
    with_parquet = has_pyarrow() if parquet is None else parquet
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("steps.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        written = set()
        for t, name in names.items():
            if t in images and name not in written:  # compressed already: stored as it is
                out.writestr(zipfile.ZipInfo(name), images[t], compress_type=zipfile.ZIP_STORED)
                written.add(name)
        if with_parquet:
            out.writestr(zipfile.ZipInfo("steps.parquet"), _parquet(rows, images, steps),
                         compress_type=zipfile.ZIP_STORED)
    return ExportSummary(len(rows), len(written), with_parquet)


def frames_at(video: Path, times_ms: Sequence[int]) -> Iterator[tuple[list[int], VideoFrame]]:
    """For sorted `times_ms`, each frame on screen at one or more of them (the last one shown at or before
    the time; the first frame for a time before it), with those times; one decoding pass."""
    if not times_ms:
        return
    wanted = 0
    previous: VideoFrame | None = None
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            if frame.pts is None or frame.time_base is None:
                continue
            shown_ms = float(frame.pts * frame.time_base) * 1000
            due = []
            while wanted < len(times_ms) and times_ms[wanted] < shown_ms:
                due.append(times_ms[wanted])
                wanted += 1
            if due:
                yield due, previous if previous is not None else frame
            previous = frame
            if wanted == len(times_ms):
                return
    if previous is not None and wanted < len(times_ms):
        yield list(times_ms[wanted:]), previous


def _encode(frame: VideoFrame, image_format: ScreenshotFormat) -> bytes:
    return encode(frame.to_image(), image_format, JPEG_QUALITY)


def _row(step: Step, names: dict[int, str]) -> dict[str, object]:
    return {"step": step.index, "timestampMs": step.timestamp_ms, "action": step.action, "source": step.source.value,
            "at": step.at, "before": names[step.before_ms], "after": names[step.after_ms]}


def has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _parquet(rows: list[dict[str, object]], images: dict[int, bytes], steps: Sequence[Step]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def column(key: str, times: list[int]) -> list[dict[str, object]]:
        return [{"bytes": images.get(t), "path": row[key]} for row, t in zip(rows, times, strict=True)]

    table = pa.table({
        "step": [row["step"] for row in rows],
        "timestampMs": [row["timestampMs"] for row in rows],
        "action": [json.dumps(row["action"], ensure_ascii=False) for row in rows],
        "source": [row["source"] for row in rows],
        "at": [row["at"] for row in rows],
        "before": column("before", [s.before_ms for s in steps]),
        "after": column("after", [s.after_ms for s in steps]),
    })
    metadata = {b"huggingface": json.dumps({"info": {"features": HF_FEATURES}}).encode()}
    table = table.replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())
