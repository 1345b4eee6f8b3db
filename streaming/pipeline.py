"""The shared video pipeline of one codec: frames → pointer → canvas → encoder, once for every viewer.

It subscribes to the desktop's capture loop while viewers are attached. Each tick it takes the
newest frame (latest wins, nothing queues) and encodes a picture only when something changed:
new pixels, the pointer moved or changed shape, a keyframe is due, or a one-second keep-alive.
A static screen therefore costs one QueryPointer round trip per tick. All X, conversion and
encoding work runs in one dedicated thread; the event loop only fans the packets out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import av

from desktop.screen.cursor import Cursor, CursorReader
from desktop.screen.frames import Frame, FrameSource
from sandbox_desktop_wire.enums import VideoCodec
from streaming.canvas import Canvas, video_size
from streaming.encoders import TIME_BASE, EncoderSettings, VideoEncoder, default_bitrate
from streaming.rate import FrameRate
from streaming.track import ViewerTrack

logger = logging.getLogger("sandbox_desktop.stream.pipeline")

KEEPALIVE_S = 1.0
"""Repeat the picture this often on a static screen, so receivers do not report a stall."""
# A change is also followed by one repeat at the next tick: receivers that complete a frame only
# when the next one starts (aiortc's jitter buffer) then show a change at once, not a second later.
# A keyframe's repeat goes out at once, not a tick later: a keyframe is what a joining viewer and a
# screen of a new size (docs/display.md) wait for, and the repeat costs one small P-frame.
KEYFRAME_GAP_S = 0.5
"""Requested keyframes come at most this often: a PLI storm must not become a keyframe storm."""
SAFETY_KEYFRAME_S = 30.0
"""A keyframe at least this often, whatever was requested."""
STATS_WINDOW_S = 2.0
MAX_FAILURE_BACKOFF_S = 2.0


@dataclass(frozen=True)
class PipelineStats:
    """What the pipeline sent recently (over STATS_WINDOW_S)."""

    fps: float
    bitrate: int
    frame_rate: int
    """The current frame-rate cap (lowered under CPU pressure)."""
    pictures: int
    keyframes: int


class _Painter:
    """Pointer, canvas and encoder; lives in the pipeline's thread (X connections are single-threaded)."""

    def __init__(self, display: str, codec: VideoCodec, fps: int, bitrate: int | None) -> None:
        self.display = display
        self.codec = codec
        self.fps = fps
        self.bitrate = bitrate
        self._reader: CursorReader | None = None
        self._canvas: Canvas | None = None
        self._encoder: VideoEncoder | None = None
        self._source_size: tuple[int, int] | None = None
        self._seq = -1
        self._pointer_key: tuple[int, int, int] | None = None
        self._epoch = time.monotonic()
        self._pts = -1

    def paint(self, frame: Frame, keyframe: bool, repeat: bool) -> tuple[list[av.Packet], bool] | None:
        """Encode a picture if anything changed (or a keyframe or repeat is due): (packets, changed)."""
        pointer = self._read_pointer()
        fresh = frame.seq != self._seq
        changed = fresh or (pointer.key if pointer else None) != self._pointer_key
        if not (changed or keyframe or repeat):
            return None
        if self._source_size != (frame.width, frame.height):
            self._reopen(frame.width, frame.height)
            keyframe = True
        assert self._canvas is not None and self._encoder is not None
        picture = self._canvas.render(frame, pointer)
        taken = frame.captured_at if fresh else time.monotonic()
        self._pts = max(self._pts + 1, round((taken - self._epoch) / TIME_BASE))
        picture.pts = self._pts
        packets = self._encoder.encode(picture, keyframe)
        self._seq = frame.seq
        self._pointer_key = pointer.key if pointer else None
        return packets, changed

    def _reopen(self, width: int, height: int) -> None:
        size = video_size(width, height)
        bitrate = self.bitrate or default_bitrate(*size)
        self._canvas = Canvas(*size)
        if self._encoder is not None:
            self._encoder.close()
        self._encoder = VideoEncoder(EncoderSettings(self.codec, size[0], size[1], self.fps, bitrate))
        self._source_size = (width, height)

    def _read_pointer(self) -> Cursor | None:
        try:
            if self._reader is None:
                self._reader = CursorReader(self.display, follow_shape=True)  # the cheap read, every tick
            return self._reader.read()
        except Exception as exc:  # the X server is restarting: draw no pointer, reconnect next tick
            logger.debug("pointer unavailable: %s", exc)
            self.close_reader()
            return None

    def close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        self.close_reader()
        if self._encoder is not None:
            self._encoder.close()
            self._encoder = None


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("live view pipeline stopped", exc_info=task.exception())


class VideoPipeline:
    """Encodes the desktop once for every attached track; runs while at least one is attached."""

    def __init__(self, frames: FrameSource, display: str, codec: VideoCodec, fps: int,
                 bitrate: int | None = None) -> None:
        self.codec = codec
        self.rate = FrameRate(fps)
        self._frames = frames
        self._display = display
        self._tracks: set[ViewerTrack] = set()
        self._painter = _Painter(display, codec, fps, bitrate)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"stream-{codec}")
        self._task: asyncio.Task[None] | None = None
        self._keyframe_wanted = True
        self._last_keyframe = -math.inf
        self._last_output = -math.inf
        self._repeat_due = False
        self._repeat_now = False
        self._sent: collections.deque[tuple[float, int, bool]] = collections.deque()
        self.pictures = 0
        self.keyframes = 0

    @property
    def tracks(self) -> frozenset[ViewerTrack]:
        return frozenset(self._tracks)

    def attach(self, track: ViewerTrack) -> None:
        """Start sending to `track` from the next keyframe (asked for now)."""
        self._tracks.add(track)
        track.on_keyframe_request = self.request_keyframe
        self.request_keyframe()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"stream-{self.codec}")
            self._task.add_done_callback(_report_crash)

    def detach(self, track: ViewerTrack) -> None:
        self._tracks.discard(track)
        track.on_keyframe_request = None

    def request_keyframe(self) -> None:
        self._keyframe_wanted = True

    def stats(self) -> PipelineStats:
        now = time.monotonic()
        self._expire(now)
        count = len(self._sent)
        size = sum(n for _, n, _ in self._sent)
        return PipelineStats(fps=round(count / STATS_WINDOW_S, 1), bitrate=int(size * 8 / STATS_WINDOW_S),
                             frame_rate=self.rate.current, pictures=self.pictures, keyframes=self.keyframes)

    async def close(self) -> None:
        """Stop encoding and release the thread and its X connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await loop.run_in_executor(self._executor, self._painter.close)
        self._executor.shutdown(wait=True)
        self._tracks.clear()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        subscription = self._frames.subscribe(self._display, self.rate.current)
        failures = 0
        try:
            while not subscription.closed:
                wait, self._repeat_now = (0.0 if self._repeat_now else self.rate.period), False
                frame = await subscription.next(timeout=wait) or subscription.latest()
                if frame is None or not self._tracks:
                    continue
                started = time.monotonic()
                keyframe = self._keyframe_due(started)
                repeat = self._repeat_due or started - self._last_output >= KEEPALIVE_S
                try:
                    picture = await loop.run_in_executor(self._executor, self._painter.paint, frame, keyframe,
                                                         repeat)
                    failures = 0
                except Exception as exc:  # encoder or X trouble: retry with backoff, never spin
                    failures += 1
                    log = logger.warning if failures == 1 else logger.debug
                    log("live view picture failed (%s); retrying", exc)
                    await asyncio.sleep(min(MAX_FAILURE_BACKOFF_S, 0.05 * 2 ** failures))
                    continue
                if picture is None:
                    continue
                packets, changed = picture
                finished = time.monotonic()
                keyframed = any(p.is_keyframe for p in packets)
                self._repeat_now = keyframed
                self._repeat_due = changed or keyframed
                self._publish(packets, finished)
                # Keyframes are rare and several times dearer: they say nothing about the steady load.
                if not keyframed and self.rate.observe(finished - started, finished):
                    subscription.fps = self.rate.current  # the capture loop reads it every tick
                    logger.info("live view %s: %d fps (%.1f ms per picture)", self.codec, self.rate.current,
                                self.rate.cost * 1000)
        finally:
            await subscription.close()

    def _keyframe_due(self, now: float) -> bool:
        since = now - self._last_keyframe
        return (self._keyframe_wanted and since >= KEYFRAME_GAP_S) or since >= SAFETY_KEYFRAME_S

    def _publish(self, packets: list[av.Packet], now: float) -> None:
        self._last_output = now
        for packet in packets:
            keyframe = bool(packet.is_keyframe)
            if keyframe:
                self._keyframe_wanted = False
                self._last_keyframe = now
                self.keyframes += 1
            self.pictures += 1
            self._sent.append((now, packet.size, keyframe))
            for track in list(self._tracks):
                track.push(packet, keyframe)
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._sent and now - self._sent[0][0] > STATS_WINDOW_S:
            self._sent.popleft()
