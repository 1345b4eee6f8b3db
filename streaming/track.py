"""A viewer's video track: hands aiortc packets the shared pipeline already encoded.

`recv()` returns `av.Packet`s, which aiortc's sender only packetizes (its pre-encoded path), so N
viewers cost one encode. That path drops keyframe requests (a PLI only sets a private flag the
encoder would read), so `install_keyframe_hook()` wraps `RTCRtpSender._send_keyframe` to route
them to the track's pipeline; aiortc is pinned and a test checks the hook is still called.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

import aiortc
import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcrtpsender import RTCRtpSender

logger = logging.getLogger("sandbox_desktop.stream.track")

PINNED_AIORTC = "1.16.0"
MAX_PENDING = 10
"""Packets a viewer may fall behind (~0.3 s at 30 fps) before its backlog is dropped for a keyframe."""


class PacketTrack(MediaStreamTrack):
    """Packets encoded once for every viewer, queued for one viewer's sender: aiortc only packetizes them
    (what its `recv` returns is an `av.Packet`, not a frame). Subclasses decide what to queue (`_queue`)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0
        self._pending: collections.deque[av.Packet] = collections.deque()
        self._ready = asyncio.Event()

    @property
    def pending(self) -> int:
        """Packets queued and not yet taken by `recv()`."""
        return len(self._pending)

    def _queue(self, packet: av.Packet) -> None:
        self._pending.append(packet)
        self._ready.set()

    async def recv(self) -> av.Packet:
        while True:
            if self.readyState != "live":
                raise MediaStreamError
            if self._pending:
                return self._pending.popleft()
            self._ready.clear()
            await self._ready.wait()

    def stop(self) -> None:
        super().stop()
        self._pending.clear()
        self._ready.set()


class ViewerTrack(PacketTrack):
    """The video one viewer receives: packets from a pipeline, starting at a keyframe, never queued long."""

    kind = "video"

    def __init__(self) -> None:
        super().__init__()
        self.on_keyframe_request: Callable[[], None] | None = None
        """Set by the pipeline the track is attached to."""
        self.keyframe_requests = 0
        self._synced = False

    def push(self, packet: av.Packet, keyframe: bool) -> None:
        """Queue one encoded picture; a viewer only starts (or restarts) at a keyframe."""
        if self.readyState != "live":
            return
        if not self._synced:
            if not keyframe:
                return
            self._synced = True
        if len(self._pending) >= MAX_PENDING:  # the sender stalled: skip to the next keyframe
            self.dropped += len(self._pending)
            self._pending.clear()
            self._synced = keyframe
            if not keyframe:
                self.request_keyframe()
                return
        self._queue(packet)

    def request_keyframe(self) -> None:
        """The viewer needs a full picture (joined, lost packets, or fell behind)."""
        self.keyframe_requests += 1
        if self.on_keyframe_request is not None:
            self.on_keyframe_request()



_original_send_keyframe: Callable[[RTCRtpSender], None] | None = None


def install_keyframe_hook() -> None:
    """Make PLI/FIR from a viewer reach its pipeline (idempotent; refuses other aiortc versions)."""
    global _original_send_keyframe
    if _original_send_keyframe is not None:
        return
    if aiortc.__version__ != PINNED_AIORTC or not hasattr(RTCRtpSender, "_send_keyframe"):
        raise RuntimeError(f"streaming/track.py was written for aiortc {PINNED_AIORTC}, found "
                           f"{aiortc.__version__}: check RTCRtpSender._send_keyframe and update it")
    original = RTCRtpSender._send_keyframe
    _original_send_keyframe = original

    def _send_keyframe(sender: RTCRtpSender) -> None:
        original(sender)
        track = sender.track
        if isinstance(track, ViewerTrack):
            track.request_keyframe()

    RTCRtpSender._send_keyframe = _send_keyframe  # type: ignore[assignment,method-assign]
