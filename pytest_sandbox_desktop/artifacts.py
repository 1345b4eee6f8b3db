"""One test's watch over its desktop: its recording and its stretch of the action log, and on failure the
files that show what happened (`screenshot.png`, `recording.mp4`, `actions.json`, `accessibility.json`)
in one folder per test under `--desktop-output`."""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sandbox_desktop_client import ApiError, ConflictError
from sandbox_desktop_wire.action_log import ActionLogEntry

from .handle import Desktop
from .options import RecordMode

LOG_PAGE = 1000
LOG_PAGES = 20
"""At most this many pages of the action log per test (20 000 actions): a bound, not a limit in practice."""
MAX_FOLDER_NAME = 120

Step = Callable[[Path], "Artifact | None"]
"""Writes one file into a test's folder (None: nothing to write)."""


class ArtifactKind(enum.StrEnum):
    """The files of a failed test; the value is the file's name (and, prefixed, the JUnit property's)."""

    SCREENSHOT = "screenshot.png"
    RECORDING = "recording.mp4"
    ACTIONS = "actions.json"
    ACCESSIBILITY = "accessibility.json"

    @property
    def property_name(self) -> str:
        return "desktop_" + self.value.split(".")[0]


@dataclass(frozen=True)
class Artifact:
    kind: ArtifactKind
    path: Path


@dataclass(frozen=True)
class Collected:
    """What a test left: its files, and what could not be collected (each as `what: why`)."""

    artifacts: list[Artifact] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def folder_name(nodeid: str) -> str:
    """A test's folder: its node id with every character but letters, digits, `.`, `_` and `-` made a `-`;
    a long one is cut and given a hash of the whole, so two never share a folder."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-.") or "test"
    if len(name) <= MAX_FOLDER_NAME:
        return name
    digest = hashlib.sha256(nodeid.encode()).hexdigest()[:10]
    return f"{name[:MAX_FOLDER_NAME // 2]}-{digest}-{name[-MAX_FOLDER_NAME // 2 + 12:]}"


def read_action_log(desktop: Desktop, since: int) -> list[ActionLogEntry]:
    """The desktop's action-log entries after `since` (docs/action-log.md), oldest first."""
    entries: list[ActionLogEntry] = []
    for _ in range(LOG_PAGES):
        page = desktop.action_log(since=since, limit=LOG_PAGE)
        entries.extend(page)
        if len(page) < LOG_PAGE:
            break
        since = page[-1].seq
    return entries


def _name(step: Step) -> str:
    return getattr(step, "__name__", "step").lstrip("_")


class Watch:
    """Started before a test runs on `desktop`: starts its recording (unless `record` is off) and notes
    where the action log stood (`since`, the last `seq` before the test)."""

    def __init__(self, desktop: Desktop, record: RecordMode, since: int) -> None:
        self.desktop = desktop
        self.record = record
        self.since = since
        self.last_seq = since
        self.recording_id: str | None = None
        self.problems: list[str] = []
        if record is not RecordMode.OFF:
            try:
                self.recording_id = desktop.start_recording().id
            except ApiError as error:  # e.g. the test's own recording still runs: the test goes on without one
                self.problems.append(f"recording: {error.status} {error.code}: {error.detail}")

    def finish(self, failed: bool, folder: Path, marker: str) -> Collected:
        """End the watch: on failure write the test's files into `folder` (replacing an earlier run's;
        `marker` is the file that marks the output directory as the plugin's);
        keep the recording there too with `--desktop-record=on`; delete it from the server either way."""
        artifacts: list[Artifact] = []
        problems = list(self.problems)
        keep_recording = self.recording_id is not None and (failed or self.record is RecordMode.ON)
        if failed or keep_recording:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            (folder.parent / marker).touch()
        steps = ([self._screenshot, self._accessibility] if failed else []) + [self._actions(failed)]
        for step in steps:
            self._collect(step, folder, artifacts, problems)
        if self.recording_id is not None:
            self._collect(self._recording(keep_recording), folder, artifacts, problems)
        return Collected(artifacts, problems)

    @staticmethod
    def _collect(step: Step, folder: Path, artifacts: list[Artifact], problems: list[str]) -> None:
        # One file failing (the desktop gone, no accessibility bus) must not cost the test its other files.
        try:
            made = step(folder)
        except ApiError as error:
            problems.append(f"{_name(step)}: {error.status} {error.code}: {error.detail}")
            return
        except (OSError, httpx.TransportError) as error:
            problems.append(f"{_name(step)}: {error}")
            return
        if made is not None:
            artifacts.append(made)

    def _screenshot(self, folder: Path) -> Artifact:
        path = folder / ArtifactKind.SCREENSHOT
        self.desktop.screenshot().save(path)
        return Artifact(ArtifactKind.SCREENSHOT, path)

    def _accessibility(self, folder: Path) -> Artifact:
        tree = self.desktop.tree()
        path = folder / ArtifactKind.ACCESSIBILITY
        path.write_text(json.dumps(tree.model_dump(mode="json", by_alias=True, exclude_none=True), indent=1))
        return Artifact(ArtifactKind.ACCESSIBILITY, path)

    def _actions(self, write: bool) -> Step:
        def actions(folder: Path) -> Artifact | None:
            entries = read_action_log(self.desktop, self.since)
            if entries:
                self.last_seq = entries[-1].seq
            if not write:
                return None
            path = folder / ArtifactKind.ACTIONS
            wire = [entry.model_dump(mode="json", by_alias=True) for entry in entries]
            path.write_text(json.dumps({"desktopId": self.desktop.id, "entries": wire}, indent=1))
            return Artifact(ArtifactKind.ACTIONS, path)
        return actions

    def _recording(self, keep: bool) -> Step:
        recording_id = self.recording_id
        assert recording_id is not None

        def recording(folder: Path) -> Artifact | None:
            with contextlib.suppress(ConflictError):  # the test stopped it itself: it still holds the test
                self.desktop.stop_recording()
            try:
                if not keep:
                    return None
                path = folder / ArtifactKind.RECORDING
                self.desktop.download_recording(recording_id, path)
                return Artifact(ArtifactKind.RECORDING, path)
            finally:
                self.desktop.delete_recording(recording_id)
        return recording
