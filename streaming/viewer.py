"""A live-view client in Python that speaks exactly the SDK's side of the protocol (docs/streaming.md).

On `system/init` it sends `control/request` and `signal/request {video:{}, audio:{}}`, answers the
server's offer, trickles its candidates as `signal/candidate`, takes the server-created data
channel from `ondatachannel`, and sends input as neko's binary opcodes. Used by the tests and
the benchmark, and handy as a check from a shell:

    python -m streaming.viewer http://127.0.0.1:2468 TOKEN --seconds 5 [--start]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCIceTransportPolicy,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcdatachannel import RTCDataChannel
from av.video.frame import VideoFrame
from websockets.asyncio.client import ClientConnection, connect

from streaming.ports import HostPolicy, host_policy
from streaming.viewer_session import Received, ViewerSession, cli_parser, run_cli, signaling_url, watch


def split_candidates(sdp: str) -> tuple[str, list[dict[str, Any]]]:
    """The SDP without its candidate lines, and those candidates as RTCIceCandidateInit (for trickle)."""
    kept: list[str] = []
    found: list[dict[str, Any]] = []
    index, mid = -1, None
    for line in sdp.splitlines():
        if line.startswith("m="):
            index, mid = index + 1, None
        elif line.startswith("a=mid:"):
            mid = line[len("a=mid:"):]
        if line.startswith("a=candidate:"):
            found.append({"candidate": line[2:], "sdpMid": mid, "sdpMLineIndex": index})
            continue
        if line != "a=end-of-candidates":
            kept.append(line)
    for candidate in found:  # the mid line may follow the candidates within a section
        if candidate["sdpMid"] is None:
            candidate["sdpMid"] = _section_mid(sdp, candidate["sdpMLineIndex"])
    return "\r\n".join(kept) + "\r\n", found


def _media_sections(sdp: str) -> list[str]:
    """The SDP's media sections in order, each from its `m=` line's value (`video 9 ...`) on."""
    return re.split(r"\r?\nm=", sdp)[1:]


def _section_mid(sdp: str, index: int) -> str | None:
    sections = _media_sections(sdp)
    if index < len(sections):
        match = re.search(r"a=mid:(\S+)", sections[index])
        return match.group(1) if match else None
    return None


def first_video_codec(sdp: str) -> str | None:
    """The first codec name of the video section (`H264`, `VP8`)."""
    video = re.search(r"m=video [^\r\n]*?((?: \d+)+)\r?\n", sdp)
    if video is None:
        return None
    payload_type = video.group(1).split()[0]
    match = re.search(rf"a=rtpmap:{payload_type} ([^/\s]+)/", sdp)
    return match.group(1) if match else None


def video_ssrc(sdp: str) -> int | None:
    """The SSRC the video section of an SDP announces for its media (the first `a=ssrc:` line)."""
    video = next((section for section in _media_sections(sdp) if section.startswith("video ")), None)
    match = re.search(r"^a=ssrc:(\d+) ", video, re.MULTILINE) if video else None
    return int(match.group(1)) if match else None


class Viewer(ViewerSession):
    """One viewer: a WebSocket for signalling and an aiortc peer connection receiving the video."""

    def __init__(self, base_url: str, token: str | None = None, *, addresses: Iterable[str] = ("127.0.0.1",),
                 trickle: bool = True, request_control: bool = True, name: str | None = None,
                 on_frame: Callable[[VideoFrame, float], None] | None = None, relay_only: bool = False) -> None:
        self.url = signaling_url(base_url, token, name)
        self.policy = HostPolicy(addresses=tuple(addresses))
        self.trickle = trickle
        self.request_control = request_control
        self.on_frame = on_frame
        """Called with each decoded frame and its arrival `time.time()` (benchmarks read pixels there)."""
        self.relay_only = relay_only
        """Gather relay candidates only, from the offer's TURN servers, as a browser with
        `iceTransportPolicy: "relay"` (docs/streaming-turn.md)."""
        self.received = Received()
        self.width = self.height = 0
        self.session_id: str | None = None
        self.offer_sdp: str | None = None
        self.answer_sdp: str | None = None
        self.ready = asyncio.Event()
        self.connected = asyncio.Event()
        self.channel_open = asyncio.Event()
        self.disconnected = asyncio.Event()
        self._ws: ClientConnection | None = None
        self._pc: RTCPeerConnection | None = None
        self._channel: RTCDataChannel | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._frame_event = asyncio.Event()

    # -- connection --------------------------------------------------------------------------

    async def connect(self, timeout: float = 15.0) -> None:
        """Open the WebSocket and wait until video and the data channel flow (raises on timeout)."""
        self._ws = await connect(self.url, open_timeout=timeout, max_size=None)
        self._spawn(self._read_signaling())
        await asyncio.wait_for(self.channel_open.wait(), timeout)
        await self.wait_frames(1, timeout)

    async def close(self) -> None:
        """Close the peer connection and the WebSocket; cancel everything the viewer started."""
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._pc is not None:
            await self._pc.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def codec(self) -> str | None:
        """The codec the answer accepted first (the one the server sends)."""
        return first_video_codec(self.answer_sdp) if self.answer_sdp else None

    async def request_keyframe(self) -> None:
        """Send a PLI as a browser does after losing packets (aiortc has no public call for it).

        It goes to the SSRC the offer announced: aiortc's `getSynchronizationSources()` lists only sources
        heard from in the last 10 s by the wall clock, so a clock step would silently send nothing."""
        assert self._pc is not None and self.offer_sdp is not None
        ssrc = video_ssrc(self.offer_sdp)
        if ssrc is None:
            raise RuntimeError("the offer announces no video SSRC to ask a keyframe of")
        await self._pc.getReceivers()[0]._send_rtcp_pli(ssrc)

    def _send_input(self, message: bytes) -> None:
        if self._channel is None or self._channel.readyState != "open":
            raise RuntimeError("the data channel is not open")
        self._channel.send(message)

    # -- signalling ------------------------------------------------------------------------------

    async def _request_media(self) -> None:
        await self.emit("signal/request", {"video": {}, "audio": {}})

    async def _on_event(self, event: str, payload: dict[str, Any]) -> None:
        if event in ("signal/provide", "signal/offer", "signal/restart"):
            await self._on_offer(payload["sdp"], payload.get("iceservers") or [])
        elif event == "signal/close" and self._pc is not None:
            await self._pc.close()
        # signal/candidate: none come, the server puts every candidate in its offer

    async def _on_offer(self, sdp: str, ice_servers: list[dict[str, Any]]) -> None:
        self.offer_sdp = sdp
        servers = [RTCIceServer(s["urls"], s.get("username"), s.get("credential")) for s in ice_servers]
        policy = RTCIceTransportPolicy.RELAY if self.relay_only else RTCIceTransportPolicy.ALL
        pc = RTCPeerConnection(RTCConfiguration(iceServers=servers, iceTransportPolicy=policy))
        self._pc = pc

        @pc.on("track")
        def _track(track: MediaStreamTrack) -> None:
            self._spawn(self._read_frames(track))

        @pc.on("datachannel")
        def _channel(channel: RTCDataChannel) -> None:
            self._channel = channel
            channel.on("message", self.received.data.append)
            if channel.readyState == "open":
                self.channel_open.set()
            channel.on("open", self.channel_open.set)

        @pc.on("connectionstatechange")
        def _state() -> None:
            if pc.connectionState == "connected":
                self.connected.set()

        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        answer = await pc.createAnswer()
        with host_policy(self.policy):
            await pc.setLocalDescription(answer)
        local = pc.localDescription.sdp
        self.answer_sdp = local
        if not self.trickle:
            await self.emit("signal/answer", {"sdp": local})
            return
        stripped, candidates = split_candidates(local)
        await self.emit("signal/answer", {"sdp": stripped})
        for candidate in candidates:
            await self.emit("signal/candidate", candidate)

    async def _read_frames(self, track: MediaStreamTrack) -> None:
        for _ in range(10_000_000):  # ~4 days at 30 fps
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            if not isinstance(frame, VideoFrame):
                continue  # the desktop's sound: read (or aiortc's queue grows), not counted as video
            now = time.monotonic()
            received = self.received
            if received.first_frame_at is None:
                received.first_frame_at = now
            received.frames += 1
            received.frame_times.append(now)
            received.last_frame = frame
            received.keyframes += int(frame.key_frame)
            if self.on_frame is not None:
                self.on_frame(frame, time.time())
            self._frame_event.set()

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def fps(self, window: float) -> float:
        """Frames decoded per second over the last `window` seconds."""
        now = time.monotonic()
        return sum(1 for t in self.received.frame_times if now - t <= window) / window


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    viewer = Viewer(args.url, args.token, addresses=args.address or ("127.0.0.1",), relay_only=args.relay_only)
    seen = await watch(viewer, args)
    return {"codec": viewer.codec, **seen}


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser("python -m streaming.viewer", __doc__ or "")
    parser.add_argument("--address", action="append", help="local address for ICE (default 127.0.0.1)")
    parser.add_argument("--relay-only", action="store_true",
                        help="only relay candidates, through the TURN servers the offer names (docs/streaming-turn.md)")
    return run_cli(parser, argv, _main)


if __name__ == "__main__":
    sys.exit(main())
