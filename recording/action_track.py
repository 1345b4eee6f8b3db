"""A recording's action track: the action log while it records, aligned to video time.

Each entry is appended to `rec_N.actions.jsonl` with `videoMs` (milliseconds since the recording's
time zero, on the same monotonic clock) and flushed at once, so a crash loses at most one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from desktop.events.action_log import ActionLog, Entry

logger = logging.getLogger("sandbox_desktop.recording")

CUE_MAX_MS = 1000
"""A cue lasts until the next action, at most this long."""


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
        line = {**entry, "videoMs": max(0, round((entry["t"] - self._t0) * 1000))}
        try:
            self._file.write(json.dumps(line, ensure_ascii=False) + "\n")
        except OSError as exc:
            logger.warning("cannot write %s: %s", self.path.name, exc)

    def close(self) -> None:
        self._unsubscribe()
        if self._file is not None:
            self._file.close()
            self._file = None


def read_track(path: Path) -> list[Entry]:
    """The entries of an action track (none if there is no file); a torn last line is skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries


def cue_text(entry: Entry) -> str:
    """`click left (512,300)`, `type "héllo"`, `press ctrl+c`: one action in a few words."""
    kind = entry.get("kind", "?")
    words = [str(kind)]
    if "button" in entry and kind != "scroll":
        words.append(str(entry["button"]))
    if kind == "type":
        words.append(json.dumps(entry.get("text", ""), ensure_ascii=False))
    elif "keys" in entry:
        words.append(str(entry["keys"]))
    if entry.get("x") is not None and entry.get("y") is not None:
        words.append(f"({entry['x']},{entry['y']})")
    if "endX" in entry:
        words.append(f"to ({entry['endX']},{entry['endY']})")
    if kind == "scroll":
        words.append(f"dx={entry.get('deltaX')} dy={entry.get('deltaY')}")
    if entry.get("count", 1) != 1:
        words.append(f"x{entry['count']}")
    return " ".join(words)


def _timestamp(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def webvtt(entries: list[dict[str, Any]]) -> str:
    """WebVTT chapters: one cue per action, from its `videoMs` to the next one's (at most 1 s)."""
    lines = ["WEBVTT", ""]
    for index, entry in enumerate(entries):
        start = int(entry["videoMs"])
        end = start + CUE_MAX_MS
        if index + 1 < len(entries):
            end = min(end, max(start + 1, int(entries[index + 1]["videoMs"])))
        # A cue's text must not contain a blank line or "-->".
        text = cue_text(entry).replace("-->", "->").replace("\n", " ")
        lines += [str(entry.get("seq", index + 1)), f"{_timestamp(start)} --> {_timestamp(end)}", text, ""]
    return "\n".join(lines)
