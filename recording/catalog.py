"""The recordings of one directory: `rec_N.mp4` beside `rec_N.json`, surviving restarts.

Every method does file I/O and blocks: call it off the event loop. The in-memory `records` are
changed only by the caller (the manager, on the event loop). Ids are never reused: a new number is
one past the highest ever issued (`last-id`, kept even when that recording is deleted) and past any
file present, and the MP4 is created with O_EXCL, so no file is ever overwritten.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.lifecycle.snapshot import rfc3339_ns
from recording.mp4file import probe, repair
from sandbox_desktop_wire.enums import RecordingState

logger = logging.getLogger("sandbox_desktop.recording")

FILE_PATTERN = re.compile(r"^rec_([1-9][0-9]{0,17})\.(mp4|json)$")
LAST_ID_FILE = "last-id"
INTERRUPTED = ("the server stopped before this recording was finalised; "
               "the file plays up to the last fragment written before that")


@dataclass
class RecordingRecord:
    """One recording's metadata, as stored in `rec_N.json`."""

    number: int
    status: RecordingState
    """`interrupted`: found unfinished after a crash."""
    started_at: str
    ended_at: str | None = None
    fps: int | None = None
    width: int | None = None
    height: int | None = None
    frames: int = 0
    duration_ms: int = 0
    size: int = 0
    """Bytes in the file (`bytes` on the wire)."""
    last_error: str | None = None
    audio: bool = False
    """The file has the desktop's sound as an AAC track (docs/audio.md)."""

    @property
    def id(self) -> str:
        return f"rec_{self.number}"

    @property
    def file_name(self) -> str:
        return f"rec_{self.number}.mp4"

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, **dataclasses.asdict(self)}, indent=1).encode()

    @classmethod
    def from_json(cls, raw: bytes, number: int) -> RecordingRecord:
        """Read `rec_N.json`; the number is the file name's."""
        data: dict[str, Any] = json.loads(raw)
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}
        fields["status"] = RecordingState(str(fields.get("status")))  # unknown: a ValueError, as bad JSON
        return cls(**{**fields, "number": number})


@dataclass
class Claim:
    """A new recording's number and its MP4, created empty and locked for as long as it records."""

    number: int
    path: Path
    fd: int

    def release(self) -> None:
        """Drop the lock (closing the descriptor); a killed process drops it too."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Catalog:
    """The recordings of one directory; `open()` reads it and settles what a crash left behind."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.records: dict[int, RecordingRecord] = {}
        self.last_number = 0

    def path(self, number: int) -> Path:
        return self.directory / f"rec_{number}.mp4"

    def actions_path(self, number: int) -> Path:
        """`rec_N.actions.jsonl`: the actions executed while it recorded."""
        return self.directory / f"rec_{number}.actions.jsonl"

    def sorted(self) -> list[RecordingRecord]:
        """The records in numeric id order (rec_2 before rec_10)."""
        return [self.records[n] for n in sorted(self.records)]

    @classmethod
    def open(cls, directory: Path) -> Catalog:
        """Read the directory (creating it), recovering recordings that were never finalised."""
        catalog = cls(directory)
        directory.mkdir(parents=True, exist_ok=True)
        numbers: set[int] = set()
        for entry in os.scandir(directory):
            match = FILE_PATTERN.match(entry.name)
            if match:
                numbers.add(int(match.group(1)))
        with contextlib.suppress(OSError, ValueError):
            catalog.last_number = int((directory / LAST_ID_FILE).read_text().strip())
        catalog.last_number = max(catalog.last_number, *numbers, 0)
        for number in sorted(numbers):
            record = catalog._read(number)
            if record is not None:
                catalog.records[number] = record
        return catalog

    def _read(self, number: int) -> RecordingRecord | None:
        meta = self.directory / f"rec_{number}.json"
        mp4 = self.path(number)
        record = None
        try:
            record = RecordingRecord.from_json(meta.read_bytes(), number)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError) as exc:
            logger.warning("unreadable %s (%s); rebuilding it from the video", meta, exc)
        if record is not None and record.status != RecordingState.RECORDING:
            return record
        if not mp4.exists():
            if record is not None:
                record.status, record.last_error = RecordingState.FAILED, f"{record.file_name} is missing"
            return record
        if record is not None and _locked_elsewhere(mp4):
            return record  # another live server is recording it
        return self._recover(number, record)

    def _recover(self, number: int, record: RecordingRecord | None) -> RecordingRecord:
        """Settle an unfinished recording: cut a torn tail, measure what plays, and say so."""
        mp4 = self.path(number)
        stat = mp4.stat()
        tail = repair(mp4)
        found = probe(mp4)
        if record is None:  # killed between creating the file and writing its metadata
            started = rfc3339_ns(stat.st_mtime_ns - found.duration_ms * 10**6)
            record = RecordingRecord(number, RecordingState.RECORDING, started)
        if tail.finalised and found.frames:
            record.status, record.last_error = RecordingState.COMPLETED, None  # finished, only the metadata was lost
        elif found.frames:
            record.status, record.last_error = RecordingState.INTERRUPTED, INTERRUPTED
        else:
            record.status = RecordingState.FAILED
            record.last_error = "the server stopped before any video was written to this recording"
        record.ended_at = record.ended_at or rfc3339_ns(stat.st_mtime_ns)
        record.size = tail.size
        record.frames, record.duration_ms = found.frames, found.duration_ms
        record.width, record.height = found.width or record.width, found.height or record.height
        try:
            self.save(record)
        except OSError as exc:
            logger.warning("cannot update %s.json: %s", record.id, exc)
        logger.info("recovered %s as %s (%d frames, %d ms)", record.id, record.status, found.frames,
                    found.duration_ms)
        return record

    def claim(self) -> Claim:
        """The next number, with its MP4 created (never an existing one) and locked."""
        number = self.last_number + 1
        for _ in range(10_000):  # files appearing behind our back, at worst
            path = self.path(number)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                break
            except FileExistsError:
                number += 1
        else:
            raise FileExistsError(f"no free recording number in {self.directory}")
        claim = Claim(number, path, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.last_number = number
            _write_atomic(self.directory / LAST_ID_FILE, f"{number}\n".encode())
        except BaseException:
            claim.release()
            path.unlink(missing_ok=True)
            raise
        return claim

    def save(self, record: RecordingRecord) -> None:
        """Write `rec_N.json` atomically (temporary file, fsync, rename)."""
        _write_atomic(self.directory / f"rec_{record.number}.json", record.to_json())

    def remove(self, number: int) -> None:
        """Delete the video, then its metadata."""
        self.path(number).unlink(missing_ok=True)
        (self.directory / f"rec_{number}.json").unlink(missing_ok=True)
        self.actions_path(number).unlink(missing_ok=True)


def _write_atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    try:
        with open(temp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _locked_elsewhere(path: Path) -> bool:
    """Whether another process holds the recording lock on `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
