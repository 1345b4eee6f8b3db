"""One viewer's WebRTC connection: the server's offer with a video track, the desktop's sound when it has
some (an Opus track in the same MediaStream, so one `<video>` element plays both) and a server-created
data channel.

The server is the offerer (neko's model, and what the SDK expects: it relies on `ondatachannel`).
aiortc gathers every candidate before the offer is made, so they all travel inside its SDP; the
viewer's trickled candidates are added once its answer is applied. No STUN server (`iceServers=[]`):
on a LAN or loopback it would only delay the offer (docs/streaming.md); a TURN server only when the server
is told to relay its own side too (`--turn-server-relay`, docs/streaming-turn.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiortc import (
    RTCBundlePolicy,
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpSender,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamTrack
from aiortc.rtcrtpparameters import RTCRtpCodecCapability
from aiortc.sdp import SessionDescription, candidate_from_sdp

from sandbox_desktop_wire.enums import VideoCodec
from streaming.encoders import CODECS, MIME_TYPES
from streaming.ports import HostPolicy, host_policy
from streaming.track import ViewerTrack
from streaming.turn import IceServer

logger = logging.getLogger("sandbox_desktop.stream.peer")

DATA_CHANNEL_LABEL = "data"
"""neko's label; the SDK does not check it."""
MAX_EARLY_CANDIDATES = 64
"""Candidates kept while the answer has not come yet (a browser trickles a handful)."""


class NegotiationError(Exception):
    """The viewer's answer cannot be used (no common codec, malformed SDP)."""


def codec_preferences(preferred: VideoCodec) -> list[RTCRtpCodecCapability]:
    """aiortc's video codecs, `preferred` first, the other one as a fallback, each with its RTX."""
    order = [preferred, *(c for c in CODECS if c != preferred)]
    capabilities = RTCRtpSender.getCapabilities("video").codecs
    chosen = [c for name in order for c in capabilities if c.mimeType.lower() == MIME_TYPES[name].lower()]
    return chosen + [c for c in capabilities if c.mimeType.lower() == "video/rtx"]


def opus_preferences() -> list[RTCRtpCodecCapability]:
    """Opus only: the one audio codec every browser has, and what aiortc encodes 48 kHz stereo with."""
    return [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType.lower() == "audio/opus"]


def negotiated_codec(answer_sdp: str, preferred: VideoCodec) -> VideoCodec:
    """The codec aiortc sends with: the first of our preferences that the answer accepted."""
    try:
        description = SessionDescription.parse(answer_sdp)
    except Exception as exc:
        raise NegotiationError(f"the answer is not valid SDP: {exc}") from exc
    accepted = {c.mimeType.lower() for m in description.media if m.kind == "video" and m.port
                for c in m.rtp.codecs}
    for name in (preferred, *CODECS):
        if MIME_TYPES[name].lower() in accepted:
            return name
    raise NegotiationError("the viewer accepts neither H.264 nor VP8 video")


class ViewerPeer:
    """A peer connection sending `track` and carrying input on the `data` channel."""

    def __init__(self, codec: VideoCodec, policy: HostPolicy, on_message: Callable[[bytes | str], None],
                 on_state: Callable[[str], None], ice_servers: list[IceServer] | None = None) -> None:
        self.preferred = codec
        self.policy = policy
        self.codec: VideoCodec | None = None
        """The negotiated codec, once the answer is applied."""
        self.track = ViewerTrack()
        self.audio: MediaStreamTrack | None = None
        """The desktop's sound (streaming/audio.py), when the offer carries it."""
        servers = [RTCIceServer(list(s.urls), s.username, s.credential) for s in ice_servers or ()]
        self._pc = RTCPeerConnection(RTCConfiguration(iceServers=servers, bundlePolicy=RTCBundlePolicy.MAX_BUNDLE))
        transceiver = self._pc.addTransceiver(self.track, direction="sendonly")
        transceiver.setCodecPreferences(codec_preferences(codec))
        self._video_sender = transceiver.sender
        self.channel = self._pc.createDataChannel(DATA_CHANNEL_LABEL, ordered=True)
        self.channel.on("message", on_message)
        self._pending: list[dict[str, Any]] = []
        self._answered = False

        @self._pc.on("connectionstatechange")
        def _state() -> None:
            on_state(self._pc.connectionState)

    @property
    def state(self) -> str:
        return self._pc.connectionState

    @property
    def has_audio(self) -> bool:
        """Whether the offer carries the desktop's sound (neko's `signal/provide` `audio.disabled`)."""
        return self.audio is not None

    def add_audio(self, track: MediaStreamTrack) -> None:
        """Send `track` as Opus in the video's MediaStream (before `offer()`)."""
        transceiver = self._pc.addTransceiver(track, direction="sendonly")
        transceiver.setCodecPreferences(opus_preferences())
        # One msid for both tracks: the browser's `ontrack` then gives one stream holding video and audio,
        # which a single <video> element plays (and keeps in sync). aiortc only shares a stream id between
        # tracks added with addTrack (which the pinned 1.16 sets on the sender, as here).
        transceiver.sender._stream_id = self._video_sender._stream_id
        self.audio = track

    async def offer(self) -> str:
        """Create the offer (gathering host candidates under the port policy) and return its SDP."""
        offer = await self._pc.createOffer()
        with host_policy(self.policy):
            await self._pc.setLocalDescription(offer)
        return self._pc.localDescription.sdp

    async def accept(self, answer_sdp: str) -> VideoCodec:
        """Apply the viewer's answer and the candidates it trickled so far; returns the codec."""
        codec = negotiated_codec(answer_sdp, self.preferred)
        await self._pc.setRemoteDescription(RTCSessionDescription(sdp=answer_sdp, type="answer"))
        self.codec = codec
        self._answered = True
        pending, self._pending = self._pending, []
        for candidate in pending:
            await self.add_candidate(candidate)
        return codec

    async def add_candidate(self, init: dict[str, Any]) -> None:
        """Add one trickled RTCIceCandidateInit (`{candidate, sdpMid, sdpMLineIndex}`)."""
        if not self._answered:
            if len(self._pending) < MAX_EARLY_CANDIDATES:
                self._pending.append(init)
            return
        text = init.get("candidate")
        if not isinstance(text, str) or not text.strip():
            return  # end of candidates
        candidate = candidate_from_sdp(text.split(":", 1)[1] if text.startswith("candidate:") else text)
        mid, index = init.get("sdpMid"), init.get("sdpMLineIndex")
        candidate.sdpMid = mid if isinstance(mid, str) else None
        candidate.sdpMLineIndex = index if isinstance(index, int) else None
        if candidate.sdpMid is None and candidate.sdpMLineIndex is None:
            candidate.sdpMLineIndex = 0  # bundled: every m-line shares the first one's transport
        await self._pc.addIceCandidate(candidate)

    def send(self, data: bytes) -> None:
        """Send on the data channel when it is open (server → viewer messages are best effort)."""
        if self.channel.readyState == "open":
            self.channel.send(data)

    async def close(self) -> None:
        self.track.stop()
        if self.audio is not None:
            self.audio.stop()
        await self._pc.close()
