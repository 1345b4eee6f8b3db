"""RecordingManager: at most one recording at a time, the catalog of the desktop's state directory.

Recordings live in the recordings directory of the desktop's state directory (the start request's
`stateDir`, else the server's), one catalog per directory, read when first needed (the server's
default one at server start). Starting, stopping and deleting are serialised by one lock; the
recording itself runs in a `Recorder` task and is finalised when the desktop or the server stops.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import re
import time
from functools import partial
from pathlib import Path

from desktop.core.errors import Conflict, NotFound, StreamError
from desktop.lifecycle.runtime import Desktop
from desktop.lifecycle.snapshot import rfc3339_ns
from desktop.sound.capture import AudioCapture, AudioSubscription
from desktop.sound.server import AudioUnavailable
from recording.action_track import ActionTrack, Tracked, read_track
from recording.catalog import Catalog, RecordingRecord
from recording.encoder import EncoderSettings, H264Encoder
from recording.recorder import Recorder
from sandbox_desktop_wire.enums import RecordingState

logger = logging.getLogger("sandbox_desktop.recording")

DEFAULT_FPS = 30
SPARE_ENCODER_S = 10.0
"""How long the x264 encoder of the last recording is kept for the next one (~30 MB at 1440x900): a test
harness starts the next within a second; an agent recording its turns, within a few."""
RESOURCE = "desktop_recording"
ID_PATTERN = re.compile(r"^rec_([1-9][0-9]{0,17})$")


class RecordingManager:
    """Start, stop, list and delete desktop recordings."""

    def __init__(self, desktop: Desktop, settings: EncoderSettings | None = None,
                 audio: AudioCapture | None = None) -> None:
        self.desktop = desktop
        self.settings = settings or EncoderSettings()
        self.audio = audio
        """The desktop's shared sound capture; None: recordings are silent."""
        self._catalogs: dict[Path, asyncio.Task[Catalog]] = {}
        self._lock = asyncio.Lock()
        self._active: Recorder | None = None
        self._track: ActionTrack | None = None
        self._last_failure: RecordingRecord | None = None
        self._spare: H264Encoder | None = None
        """The last recording's encoder, warm for the next one (recording/encoder.py), until `_spare_expiry`."""
        self._spare_expiry: asyncio.TimerHandle | None = None
        self.outcomes: collections.Counter[str] = collections.Counter()
        """Recordings `started`, and ended `completed` or `failed`, since the server started (for metrics)."""

    # -- server and desktop lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Server start: begin reading the default catalog, settling what a crash left unfinished.

        Measuring a large interrupted recording takes a while, so the server does not wait for it;
        the first request that needs the catalog does.
        """
        self._load(self.desktop.layout.recordings).add_done_callback(_log_failure)

    async def on_desktop_stop(self) -> None:
        """The desktop is stopping: finalise the active recording while the screen still exists."""
        async with self._lock:
            if self._active is not None:
                await self._active.stop()
            self._drop_spare()

    async def on_desktop_failure(self, reason: str) -> None:
        """The desktop failed for good: finalise what was recorded up to the failure."""
        if self._active is not None:
            logger.warning("recording %s ends: the desktop failed: %s", self._active.record.id, reason)
        await self.on_desktop_stop()

    async def shutdown(self) -> None:
        """Server exit: finalise anything still recording."""
        await self.on_desktop_stop()

    # -- operations -----------------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        return self._active is not None

    async def start_recording(self, fps: int | None = None, audio: bool | None = None) -> RecordingRecord:
        """Start recording the desktop at `fps` (default: the desktop's `recordingFps`, else 30), with its
        sound when `audio` (default: when the desktop has a sound server; `True` without one is a 503)."""
        async with self._lock:
            session = self.desktop.session()  # the desktop's own 409/503 problem when it is not ready
            if self._active is not None:
                raise Conflict("a desktop recording is already active")
            has_sound = self.audio is not None and self.audio.available
            if audio and not has_sound:
                raise AudioUnavailable("the desktop has no sound server to record (pulseaudio is not installed "
                                       "or did not start; see its runtime log); start the recording with "
                                       "audio false, or run `sandbox-desktop install desktop` and restart it")
            audio = has_sound if audio is None else audio
            options = self.desktop.options
            fps = fps or (options.recording_fps if options else None) or DEFAULT_FPS
            catalog = await self._catalog()
            try:
                claim = await asyncio.to_thread(catalog.claim)
            except OSError as exc:
                raise StreamError(f"cannot create a recording in {catalog.directory}: {exc}") from exc
            t0, wall = time.monotonic(), time.time_ns()
            record = RecordingRecord(claim.number, RecordingState.RECORDING, rfc3339_ns(wall), fps=fps,
                                     width=session.width, height=session.height, audio=audio)
            sound: AudioSubscription | None = None
            try:
                await asyncio.to_thread(catalog.save, record)
                recorder = await Recorder.open(record, claim, self.settings, partial(self._ended, catalog), audio,
                                               self._take_spare())
                if audio and self.audio is not None:
                    sound = await self.audio.subscribe()
            except Exception as exc:
                claim.release()
                await asyncio.to_thread(_discard, catalog, claim.number)
                if isinstance(exc, AudioUnavailable):  # the sound server went away meanwhile
                    raise
                raise StreamError(f"cannot start {record.file_name} in {catalog.directory}: {exc}") from exc
            catalog.records[record.number] = record
            recorder.start(self.desktop.frames.subscribe(session.display, fps), t0, sound)
            self._active = recorder
            self.outcomes["started"] += 1
            try:
                self._track = ActionTrack(self.desktop.action_log, catalog.actions_path(record.number), t0)
            except OSError as exc:  # the video matters more than its action track
                logger.warning("recording %s has no action track: %s", record.id, exc)
            logger.info("recording %s started (%s at %d fps)", record.id, session.display, fps)
            return self._view(record)

    async def stop_recording(self) -> RecordingRecord:
        """Finalise the active recording; its final record (completed, or failed with `lastError`)."""
        async with self._lock:
            if self._active is None:
                message = "no desktop recording is active"
                failed = self._last_failure
                if failed is not None:
                    message += f" ({failed.id} failed: {failed.last_error})"
                raise Conflict(message)
            record = await self._active.stop()
            return self._view(record)

    async def list_recordings(self) -> list[RecordingRecord]:
        """The recordings of the desktop's state directory, in id order."""
        catalog = await self._catalog()
        return [self._view(r) for r in catalog.sorted()]

    async def get(self, ident: str) -> RecordingRecord:
        return self._view(await self._find(ident))

    async def file(self, ident: str) -> tuple[RecordingRecord, Path]:
        """A recording and the path of its MP4 (which may still be growing)."""
        record = await self._find(ident)
        catalog = await self._catalog()
        return self._view(record), catalog.path(record.number)

    async def actions(self, ident: str) -> tuple[RecordingRecord, list[Tracked]]:
        """A recording and the actions executed while it recorded, with their `videoMs`."""
        record = await self._find(ident)
        catalog = await self._catalog()
        return self._view(record), await asyncio.to_thread(read_track, catalog.actions_path(record.number))

    async def delete(self, ident: str) -> None:
        """Delete a recording's video and metadata; the active one must be stopped first."""
        async with self._lock:
            record = await self._find(ident)
            if record.status is RecordingState.RECORDING:
                raise Conflict("stop the active desktop recording before deleting it")
            catalog = await self._catalog()
            try:
                await asyncio.to_thread(catalog.remove, record.number)
            except OSError as exc:
                raise StreamError(f"cannot delete {record.file_name}: {exc}") from exc
            catalog.records.pop(record.number, None)

    # -- internals ------------------------------------------------------------------------------

    async def _catalog(self) -> Catalog:
        """The catalog of the desktop's current recordings directory, read on first use."""
        directory = self.desktop.layout.recordings
        try:
            return await asyncio.shield(self._load(directory))
        except OSError as exc:
            raise StreamError(f"cannot read the recordings directory {directory}: {exc}") from exc

    def _load(self, directory: Path) -> asyncio.Task[Catalog]:
        """The task reading `directory`'s catalog: started once, again only after a failure."""
        task = self._catalogs.get(directory)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.create_task(asyncio.to_thread(Catalog.open, directory), name=f"catalog {directory}")
            self._catalogs[directory] = task
        return task

    async def _find(self, ident: str) -> RecordingRecord:
        match = ID_PATTERN.match(ident)
        catalog = await self._catalog()
        record = catalog.records.get(int(match.group(1))) if match else None
        if record is None:
            raise NotFound(RESOURCE, ident)
        return record

    def _view(self, record: RecordingRecord) -> RecordingRecord:
        """A copy with live figures while it records (size, frames, elapsed time)."""
        active = self._active
        if active is None or active.record is not record or record.status is not RecordingState.RECORDING:
            return dataclasses.replace(record)
        return dataclasses.replace(record, size=active.size(), frames=active.frames, duration_ms=active.elapsed_ms)

    async def _ended(self, catalog: Catalog, recorder: Recorder) -> None:
        """A recording finished (stopped or failed): persist its final metadata."""
        record = recorder.record
        if record.status is RecordingState.FAILED and record.frames == 0:
            cause = self.desktop.frames.failure()
            if cause is not None:
                record.last_error = f"no frame was captured: {cause}"
        if self._active is recorder:
            self._active = None
            if self._track is not None:
                self._track.close()
                self._track = None
        self._last_failure = record if record.status is RecordingState.FAILED else None
        self._keep_spare(recorder.reusable_encoder())
        self.outcomes[record.status] += 1
        try:
            await asyncio.to_thread(catalog.save, record)
        except OSError as exc:
            logger.warning("cannot write %s.json: %s", record.id, exc)
        logger.info("recording %s %s: %d frames, %d ms, %d bytes", record.id, record.status, record.frames,
                    record.duration_ms, record.size)

    def _take_spare(self) -> H264Encoder | None:
        spare, self._spare = self._spare, None
        if self._spare_expiry is not None:
            self._spare_expiry.cancel()
            self._spare_expiry = None
        return spare

    def _keep_spare(self, encoder: H264Encoder | None) -> None:
        self._take_spare()
        if encoder is not None:
            self._spare = encoder
            self._spare_expiry = asyncio.get_running_loop().call_later(SPARE_ENCODER_S, self._drop_spare)

    def _drop_spare(self) -> None:
        self._take_spare()  # its memory goes with the last reference


def _log_failure(task: asyncio.Task[Catalog]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("cannot read the recordings directory: %s", task.exception())


def _discard(catalog: Catalog, number: int) -> None:
    try:
        catalog.remove(number)
    except OSError as exc:
        logger.warning("cannot remove rec_%d after a failed start: %s", number, exc)
