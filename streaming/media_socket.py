"""The live view over one WebSocket on the server's own port: for viewers UDP does not reach (docs/streaming.md).

The same session as WebRTC's (streaming/signaling.py: neko's JSON events, control, clipboard, roles), with
the media on the socket instead of a peer connection:
- text, both ways: the signalling session's events, minus `signal/*`; the viewer asks for its media with
  `media/request {video: "h264"|"jpeg"|"none", audio: bool}` and is answered `media/provide`; a decoder that
  lost the picture asks `media/keyframe` (as a PLI does on WebRTC);
- binary, viewer → server: input as the data channel's neko frames (streaming/input.py decodes both);
- binary, server → viewer: one message per access unit, `MEDIA_HEADER` (kind, flags, timestamp in µs)
  then the payload: H.264 Annex-B access units of the live view's shared encoder (the packets WebRTC viewers
  get, encoded once for all), Opus packets of the shared sound encoder (streaming/audio.py), JPEG pictures
  for browsers without an H.264 decoder (streaming/jpeg.py), and the data channel's replies (the pong).

Rate control is the socket's backpressure: a send waits while the socket's buffer is full, packets queue
meanwhile in the viewer's `ViewerTrack` (at most `MAX_PENDING`), and a viewer that falls further behind
drops them and resumes at the next keyframe, which it asks for (streaming/track.py).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

from aiortc.mediastreams import MediaStreamError

from sandbox_desktop_wire.enums import VideoCodec
from streaming.control import Access, ControlRefused
from streaming.encoders import TIME_BASE
from streaming.jpeg import JpegPictures
from streaming.signaling import Link, LiveView, SignalingSession
from streaming.track import PacketTrack, ViewerTrack

if TYPE_CHECKING:
    import av

logger = logging.getLogger("sandbox_desktop.stream.websocket")

MEDIA_HEADER = struct.Struct("!BBQ")
"""kind (`MediaKind`), flags (`KEYFRAME`), timestamp in microseconds: 10 bytes before every binary payload."""
KEYFRAME = 0x01
SIGNAL_EVENTS = ("signal/request", "signal/answer", "signal/candidate", "signal/close")
"""The WebRTC negotiation: no peer connection here."""
MAX_PACKETS = 1 << 40
"""A sender's loop bound (years of video): it ends when its track stops."""


class MediaKind(enum.IntEnum):
    """What a binary message from the server carries."""

    H264 = 1
    """An H.264 access unit, Annex-B (start codes; SPS and PPS before every keyframe)."""
    OPUS = 2
    """One Opus packet: 40 ms of 48 kHz stereo."""
    JPEG = 3
    """One picture, for a viewer that asked for `video: "jpeg"`."""
    DATA = 4
    """A data-channel reply (neko's pong), as WebRTC viewers get it on their channel."""


class VideoFormat(enum.StrEnum):
    """`media/request`'s `video`."""

    H264 = "h264"
    JPEG = "jpeg"
    NONE = "none"


def media_message(kind: MediaKind, keyframe: bool, timestamp_us: int, payload: bytes) -> bytes:
    return MEDIA_HEADER.pack(kind, KEYFRAME if keyframe else 0, max(0, timestamp_us)) + payload


def microseconds(packet: av.Packet, time_base: Fraction) -> int:
    return int((packet.pts or 0) * (packet.time_base or time_base) * 1_000_000)


class MediaLink(Link, Protocol):
    """The viewer's WebSocket with binary messages: media out, input in (`on_binary`)."""

    on_binary: Any
    """Called with each binary message the viewer sends."""

    async def send_bytes(self, data: bytes) -> None: ...


class MediaLiveView(LiveView, Protocol):
    """What a WebSocket viewer needs of the live view, beyond a WebRTC viewer's (streaming/manager.py)."""

    def attach_video(self, track: ViewerTrack, viewer: str, codec: VideoCodec) -> None: ...

    def detach_video(self, track: ViewerTrack) -> None: ...

    def audio_track(self) -> PacketTrack | None: ...


class MediaSocketSession(SignalingSession):
    """One viewer on the WebSocket transport: the signalling session's events and control, media on the socket."""

    def __init__(self, viewer_id: str, link: MediaLink, manager: MediaLiveView, access: Access = Access.ADMIN) -> None:
        super().__init__(viewer_id, link, manager, access)
        self.media_link = link
        self.media = manager
        link.on_binary = self.input.feed
        for event in SIGNAL_EVENTS:
            del self._handlers[event]
        self._handlers["media/request"] = self._media_request
        self._handlers["media/keyframe"] = self._keyframe
        self._video: ViewerTrack | None = None
        self._audio: PacketTrack | None = None
        self._senders: list[asyncio.Task[None]] = []

    async def close_peer(self) -> None:
        """Stop sending media (the session's end, or a new `media/request`)."""
        senders, self._senders = self._senders, []
        video, self._video = self._video, None
        audio, self._audio = self._audio, None
        if video is not None:
            self.media.detach_video(video)
            video.stop()
        if audio is not None:
            audio.stop()
        for task in senders:
            task.cancel()
        await asyncio.gather(*senders, return_exceptions=True)

    def _init_payload(self) -> dict[str, Any]:
        return {**super()._init_payload(), "transport": "websocket"}

    def _reply(self, data: bytes) -> None:
        self.spawn(self._send(media_message(MediaKind.DATA, False, 0, data)))

    async def _media_request(self, payload: dict[str, Any]) -> None:
        try:
            video = VideoFormat(payload.get("video", VideoFormat.H264))
        except ValueError:
            raise ControlRefused(f"media/request video must be one of {', '.join(VideoFormat)}") from None
        await self.close_peer()
        audio = self.media.audio_track() if payload.get("audio") is True else None
        await self.emit("media/provide", {
            "video": {"disabled": video is VideoFormat.NONE, "format": str(video)},
            "audio": {"disabled": audio is None, "codec": "opus", "sample_rate": 48_000, "channels": 2},
        })
        if video is not VideoFormat.NONE:
            track = ViewerTrack()
            self._video = track
            self.media.attach_video(track, self.id, VideoCodec.H264)  # asks the encoder for a keyframe
            self._senders.append(self._start(self._send_video(track, video)))
        if audio is not None:
            self._audio = audio
            self._senders.append(self._start(self._send_audio(audio)))

    async def _keyframe(self, payload: dict[str, Any]) -> None:
        """The viewer's decoder lost the picture (a PLI's equivalent): a keyframe, throttled as PLIs are."""
        if self._video is not None:
            self._video.request_keyframe()

    def _start(self, work: Any) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(work, name=f"stream-ws-{self.id}")

    async def _send_video(self, track: ViewerTrack, video: VideoFormat) -> None:
        pictures = JpegPictures() if video is VideoFormat.JPEG else None
        for _ in range(MAX_PACKETS):
            try:
                packet = await track.recv()
            except MediaStreamError:
                return
            keyframe, timestamp = bool(packet.is_keyframe), microseconds(packet, TIME_BASE)
            if pictures is None:
                await self._send(media_message(MediaKind.H264, keyframe, timestamp, bytes(packet)))
                continue
            # Every packet is decoded (the next ones refer to it); only the newest is sent as a picture.
            jpeg = await asyncio.to_thread(pictures.add, bytes(packet), not track.pending)
            if jpeg is not None:
                await self._send(media_message(MediaKind.JPEG, keyframe, timestamp, jpeg))

    async def _send_audio(self, track: PacketTrack) -> None:
        from streaming.audio import TIME_BASE as AUDIO_TIME_BASE
        for _ in range(MAX_PACKETS):
            try:
                packet = await track.recv()
            except MediaStreamError:
                return
            await self._send(media_message(MediaKind.OPUS, False, microseconds(packet, AUDIO_TIME_BASE),
                                           bytes(packet)))

    async def _send(self, message: bytes) -> None:
        """One binary message; waits while the socket is full (the rate control, module doc)."""
        async with self._send_lock:
            try:
                await self.media_link.send_bytes(message)
            except Exception as exc:  # closed under us: the receive loop ends the session
                logger.debug("viewer %s: send failed: %s", self.id, exc)
