"""The desktop's sound in the live view: one Opus encoder per desktop, its packets sent to every viewer.

As for the video (streaming/track.py), aiortc gets packets that are already encoded and only
packetizes them: N viewers cost one encode, and aiortc's per-frame work for raw audio (a thread
hop and a pure-Python audio level over every sample, measured at ~7 % of a core for one viewer)
is skipped. The feed listens to the desktop's shared capture (desktop/sound/capture.py) only while
a viewer is attached. Packets carry the capture's sample clock as pts: the silence while nothing
plays (the sink is suspended: no chunks, no packets) shows as a jump of the RTP timestamp, which a
browser's jitter buffer takes as the gap it is. docs/audio.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from fractions import Fraction

import av
from av.audio.frame import AudioFrame

from desktop.core.errors import DomainError
from desktop.sound.capture import AudioCapture, AudioChunk
from desktop.sound.server import CHUNK_MS, CHUNK_SAMPLES, SAMPLE_RATE
from streaming.track import PacketTrack

logger = logging.getLogger("sandbox_desktop.stream.audio")

TIME_BASE = Fraction(1, SAMPLE_RATE)
OPUS_BITRATE = 96_000
"""aiortc's own choice for stereo: transparent for desktop sound and speech."""
MAX_PENDING = 200 // CHUNK_MS
"""Packets (200 ms) a viewer may fall behind before its oldest are dropped."""


def audio_frame(chunk: AudioChunk) -> AudioFrame:
    """One chunk as a packed s16 stereo frame stamped on the capture's sample clock."""
    frame = AudioFrame(format="s16", layout="stereo", samples=CHUNK_SAMPLES)
    frame.planes[0].update(chunk.data)
    frame.sample_rate = SAMPLE_RATE
    frame.pts = chunk.sample
    frame.time_base = TIME_BASE
    return frame


def opus_encoder() -> av.AudioCodecContext:
    codec = av.CodecContext.create("libopus", "w")
    assert isinstance(codec, av.AudioCodecContext)
    codec.bit_rate = OPUS_BITRATE
    codec.format = "s16"
    codec.layout = "stereo"
    codec.sample_rate = SAMPLE_RATE
    codec.time_base = TIME_BASE
    # Frames of the chunks' size (40 ms: desktop/sound/server.py CHUNK_MS); "audio": music and system sounds, not
    # only voice; complexity 5 of 10: 0.8 % of a core instead of 1.3 % (bench/audio.py), still clean.
    # Digital silence comes out as 3-byte packets.
    codec.options = {"application": "audio", "frame_duration": str(CHUNK_MS), "compression_level": "5"}
    return codec


class DesktopAudioTrack(PacketTrack):
    """The Opus packets one viewer receives, from the desktop's `OpusFeed`."""

    kind = "audio"

    def __init__(self, feed: OpusFeed) -> None:
        super().__init__()
        self.feed = feed
        self._attached = False

    def push(self, packet: av.Packet) -> None:
        if len(self._pending) >= MAX_PENDING:  # the sender stalled: old sound is worth nothing now
            self._pending.popleft()
            self.dropped += 1
        self._queue(packet)

    async def recv(self) -> av.Packet:
        if not self._attached:  # aiortc pulls once the connection is up: listen from then on
            self._attached = True
            self.feed.attach(self)
        return await super().recv()

    def stop(self) -> None:
        super().stop()
        if self._attached:
            self.feed.detach(self)


class OpusFeed:
    """The desktop's sound, encoded once, for every attached viewer track."""

    def __init__(self, capture: AudioCapture) -> None:
        self.capture = capture
        self.tracks: set[DesktopAudioTrack] = set()
        self.packets = 0
        self._task: asyncio.Task[None] | None = None

    def attach(self, track: DesktopAudioTrack) -> None:
        self.tracks.add(track)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="audio-opus")

    def detach(self, track: DesktopAudioTrack) -> None:
        self.tracks.discard(track)
        if not self.tracks and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        try:
            subscription = await self.capture.subscribe()
        except DomainError as exc:  # the sound server went away since the offer
            logger.info("no sound for the live view: %s", exc.message)
            for track in list(self.tracks):
                track.stop()
            return
        encoder = opus_encoder()
        try:
            while self.tracks:
                chunk = await subscription.next()
                if chunk is None:
                    return
                # Inline: ~0.2 ms a chunk, less than a hop to a worker thread costs.
                for packet in encoder.encode(audio_frame(chunk)):
                    self.packets += 1
                    for track in list(self.tracks):
                        track.push(packet)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(subscription.close())
