"""One recording in progress: frames from the shared capture loop into an Mp4Writer on its own thread.

The event loop only waits for frames; converting and encoding run on the recording's encoder
thread. Latest frame wins: while a frame is being encoded newer ones replace each other, so a
slow encoder lowers the frame rate instead of building a queue. An idle screen sends no frames
(XDamage); every `HEARTBEAT_S` the last image is encoded again (an all-skip frame of a few bytes)
so that the file on disk never lags the screen by more than about a second.

With sound (docs/audio.md), a second task feeds the desktop's 40 ms chunks to the same thread, stamped
on the same monotonic clock as the frames; while nothing plays it writes silence up to shortly before
now, so the muxer never holds video back waiting for audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from desktop.lifecycle.snapshot import rfc3339_ns
from desktop.screen.frames import Frame, Subscription
from desktop.sound.capture import AudioSubscription
from desktop.sound.server import SAMPLE_RATE
from recording.catalog import Claim, RecordingRecord
from recording.encoder import EncoderSettings, H264Encoder, Mp4Writer
from sandbox_desktop_wire.enums import RecordingState

logger = logging.getLogger("sandbox_desktop.recording")

T = TypeVar("T")

HEARTBEAT_S = 0.5
# A stop right after the start still waits this long for the first image, so the file is never empty.
FIRST_FRAME_TIMEOUT_S = 2.0
SILENCE_MARGIN_S = 0.3
"""While nothing plays, silence is written up to this long before now: a chunk that is late by less
(the capture's delay is ~40 ms) still finds its place free."""


class Recorder:
    """Feeds one recording's writer until `stop()`, then finalises it and reports through `on_end`."""

    def __init__(self, record: RecordingRecord, claim: Claim, writer: Mp4Writer, executor: ThreadPoolExecutor,
                 on_end: Callable[[Recorder], Awaitable[None]]) -> None:
        self.record = record
        self._claim = claim
        self._writer = writer
        self._executor = executor
        self._on_end = on_end
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._end: float | None = None
        self._final: Frame | None = None
        self._last_seq = 0
        self._first_written = asyncio.Event()
        self._audio: AudioSubscription | None = None
        self._audio_task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, record: RecordingRecord, claim: Claim, settings: EncoderSettings,
                   on_end: Callable[[Recorder], Awaitable[None]], audio: bool = False,
                   encoder: H264Encoder | None = None) -> Recorder:
        """Create the writer (opening the file; with an AAC track when `audio`) on a new encoder thread;
        `encoder`: the warm x264 encoder of the desktop's last recording, if any."""
        assert record.width and record.height and record.fps
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rec-{record.number}")
        try:
            writer = await asyncio.get_running_loop().run_in_executor(
                executor, Mp4Writer, claim.path, record.width, record.height, record.fps, settings, audio, encoder)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        record.width, record.height = writer.width, writer.height
        return cls(record, claim, writer, executor, on_end)

    def start(self, subscription: Subscription, t0: float, audio: AudioSubscription | None = None) -> None:
        """Record frames of `subscription` (and the sound of `audio`); `t0` (monotonic) is time zero."""
        self._sub = subscription
        self._t0 = t0
        self._task = asyncio.create_task(self._run(), name=f"recording-{self.record.id}")
        if audio is not None:
            self._audio = audio
            self._audio_task = asyncio.create_task(self._record_audio(audio), name=f"recording-{self.record.id}-audio")

    @property
    def frames(self) -> int:
        return self._writer.frames

    def reusable_encoder(self) -> H264Encoder | None:
        """From `on_end` on: its x264 encoder, for the next recording, unless writing failed (the writer's thread
        is done with it by then: `finish` has returned)."""
        return self._writer.reusable_encoder()

    def size(self) -> int:
        """Bytes in the file so far."""
        try:
            return os.path.getsize(self._claim.path)
        except OSError:
            return 0

    @property
    def elapsed_ms(self) -> int:
        return round(((self._end or time.monotonic()) - self._t0) * 1000)

    async def stop(self) -> RecordingRecord:
        """Finalise: the last image lasts until now, the file is closed; returns the final record."""
        assert self._sub is not None and self._task is not None
        if self._end is None:
            self._end = time.monotonic()
            if self._writer.frames == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._first_written.wait(), FIRST_FRAME_TIMEOUT_S)
            self._final = self._sub.latest()  # drawn since the last frame we took, maybe
            await self._sub.close()
        await asyncio.shield(self._task)
        return self.record

    async def _run(self) -> None:
        assert self._sub is not None
        error = None
        try:
            await self._record()
            await self._stop_audio()
            await self._call(self._writer.finish, self._ms(self._end or time.monotonic()))
        except Exception as exc:
            error = f"writing {self.record.file_name} failed: {exc or type(exc).__name__}"
            logger.warning("recording %s failed: %s", self.record.id, error)
            await self._call(self._writer.abort)
        finally:
            await self._stop_audio()
            self._first_written.set()  # a stop waiting for a first frame need not wait any longer
            self._executor.shutdown(wait=False)
            if not self._sub.closed:
                await self._sub.close()
            self._claim.release()
        self._settle(error)
        await self._on_end(self)

    async def _record(self) -> None:
        assert self._sub is not None
        while True:
            frame = await self._sub.next(HEARTBEAT_S)
            if frame is not None:
                await self._write(frame)
            elif self._sub.closed:
                break
            else:
                await self._call(self._writer.repeat, self._ms(time.monotonic()))
        if self._end is None:  # capture was closed under us (the desktop went away)
            self._end = time.monotonic()
        if self._final is not None and self._final.seq > self._last_seq:
            await self._write(self._final)

    async def _record_audio(self, audio: AudioSubscription) -> None:
        """Chunks into the writer at their sample position; silence up to shortly before now while none come."""
        while not audio.closed:
            chunk = await audio.next(HEARTBEAT_S)
            if chunk is None:
                until = round((time.monotonic() - SILENCE_MARGIN_S - self._t0) * SAMPLE_RATE)
                await self._call(self._writer.fill_audio, until)
                continue
            for item in (chunk, *audio.drain()):
                await self._call(self._writer.write_audio, item.data, round((item.at - self._t0) * SAMPLE_RATE))

    async def _stop_audio(self) -> None:
        audio, task = self._audio, self._audio_task
        self._audio = self._audio_task = None
        if audio is not None:
            await audio.close()
        if task is not None:
            task.cancel()  # a write in progress finishes on the encoder thread before finish() runs there
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # the sound is lost from here on; the video goes on
                logger.warning("recording %s: writing its audio failed: %s", self.record.id, exc)

    async def _write(self, frame: Frame) -> None:
        at = 0 if self._writer.frames == 0 else self._ms(frame.captured_at)
        await self._call(self._writer.write, frame.data, frame.width, frame.height, at)
        self._last_seq = frame.seq
        self._first_written.set()

    def _ms(self, at: float) -> int:
        return max(0, round((at - self._t0) * 1000))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _settle(self, error: str | None) -> None:
        record = self.record
        record.ended_at = rfc3339_ns(time.time_ns())
        record.frames = self._writer.frames
        record.duration_ms = self.elapsed_ms if error is None else max(0, self._writer.last_ms)
        record.size = self.size()
        if error is None and self._writer.frames == 0:
            error = "no frame was captured: the screen could not be read"
        record.status = RecordingState.FAILED if error else RecordingState.COMPLETED
        record.last_error = error
