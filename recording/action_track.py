"""A recording's action track: the action log while it records, aligned to video time.

Each entry is appended to `rec_N.actions.jsonl` with `videoMs` (milliseconds since the recording's
time zero, on the same monotonic clock) and flushed at once, so a crash loses at most one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from desktop.events import action_log as logged
from desktop.events.action_log import WIRE, ActionLog, Entry
from sandbox_desktop_wire.action_log import ActionLogEntry

logger = logging.getLogger("sandbox_desktop.recording")

CUE_MAX_MS = 1000
"""A cue lasts until the next action, at most this long."""


@dataclass(frozen=True)
class Tracked:
    """An entry of a recording's action track: the logged action and its time in the video."""

    entry: Entry
    video_ms: int
    """Milliseconds since the recording's time zero, on the log's clock."""

    def to_wire(self) -> ActionLogEntry:
        return self.entry.to_wire(self.video_ms)

    @classmethod
    def from_wire(cls, wire: ActionLogEntry) -> Tracked:
        return cls(Entry.from_wire(wire), wire.video_ms or 0)


class ActionTrack:
    """Appends the action log's new entries to `path` until `close()`."""

    def __init__(self, log: ActionLog, path: Path, t0: float) -> None:
        self.path = path
        self._t0 = t0
        # Line-buffered: every entry reaches the file as soon as it is written.
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._unsubscribe: Callable[[], None] = log.subscribe(self._append)

    def _append(self, entry: Entry) -> None:
        if self._file is None:
            return
        line = Tracked(entry, max(0, round((entry.t - self._t0) * 1000))).to_wire()
        try:
            self._file.write(json.dumps(line.model_dump(mode="json", by_alias=True), ensure_ascii=False) + "\n")
        except OSError as exc:
            logger.warning("cannot write %s: %s", self.path.name, exc)

    def close(self) -> None:
        self._unsubscribe()
        if self._file is not None:
            self._file.close()
            self._file = None


def read_track(path: Path) -> list[Tracked]:
    """The entries of an action track (none if there is no file); a torn last line is skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            wire = WIRE.validate_json(line)
        except ValidationError:
            continue
        entries.append(Tracked.from_wire(wire))
    return entries


def cue_text(action: logged.LoggedAction) -> str:
    """`click left (512,300)`, `type "héllo"`, `press ctrl+c`: one action in a few words."""
    words = [action.KIND]
    match action:
        case logged.Move(x=x, y=y) | logged.Drop(x=x, y=y):
            words.append(f"({x},{y})")
        case logged.Click(x=x, y=y, button=button, count=count):
            words += [str(button), f"({x},{y})"] + ([f"x{count}"] if count != 1 else [])
        case logged.MouseDown(x=x, y=y, button=button) | logged.MouseUp(x=x, y=y, button=button):
            words += [str(button)] + ([f"({x},{y})"] if x is not None and y is not None else [])
        case logged.Drag(x=x, y=y, end_x=end_x, end_y=end_y, button=button):
            words += [str(button), f"({x},{y})", f"to ({end_x},{end_y})"]
        case logged.Scroll(x=x, y=y, delta_x=dx, delta_y=dy):
            words += [f"({x},{y})", f"dx={dx} dy={dy}"]
        case logged.Type(text=text):
            words.append(json.dumps(text, ensure_ascii=False))
        case logged.Press(keys=keys) | logged.KeyDown(keys=keys) | logged.KeyUp(keys=keys):
            words.append(keys)
    return " ".join(words)


def _timestamp(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def webvtt(entries: list[Tracked]) -> str:
    """WebVTT chapters: one cue per action, from its `videoMs` to the next one's (at most 1 s)."""
    lines = ["WEBVTT", ""]
    for index, tracked in enumerate(entries):
        start = tracked.video_ms
        end = start + CUE_MAX_MS
        if index + 1 < len(entries):
            end = min(end, max(start + 1, entries[index + 1].video_ms))
        # A cue's text must not contain a blank line or "-->".
        text = cue_text(tracked.entry.action).replace("-->", "->").replace("\n", " ")
        lines += [str(tracked.entry.seq), f"{_timestamp(start)} --> {_timestamp(end)}", text, ""]
    return "\n".join(lines)
