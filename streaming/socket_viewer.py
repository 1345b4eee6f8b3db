"""A live-view client in Python on the WebSocket transport (streaming/media_socket.py, docs/streaming.md).

It does what the browser's viewer does when UDP does not get through: one socket on the server's port,
`media/request` after `system/init`, H.264 access units decoded with PyAV (or JPEG pictures with Pillow),
input as neko's binary frames on the same socket. Used by the tests and the benchmark, and as a check from
a shell:

    python -m streaming.socket_viewer http://127.0.0.1:2468 TOKEN --seconds 5 [--start] [--jpeg]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import av
from av.video.frame import VideoFrame
from PIL import Image
from websockets.asyncio.client import connect

from streaming.media_socket import KEYFRAME, MEDIA_HEADER, MediaKind, VideoFormat
from streaming.viewer_session import Received, ViewerSession, cli_parser, run_cli, signaling_url, watch

MEDIA_SOCKET_PATH = "/v1/desktop/stream/ws"
MAX_MESSAGES = 1 << 40
"""The reader's loop bound: it ends when the socket closes."""


@dataclass
class MediaReceived(Received):
    """`Received` plus what only this transport shows: each message's kind and keyframe flag, in order."""

    kinds: list[tuple[MediaKind, bool]] = field(default_factory=list)
    opus: list[bytes] = field(default_factory=list)
    """The Opus packets, in order (the desktop's sound, when asked for)."""
    last_picture: Image.Image | None = None


class SocketViewer(ViewerSession):
    """One viewer on the WebSocket transport."""

    def __init__(self, base_url: str, token: str | None = None, *, video: VideoFormat = VideoFormat.H264,
                 audio: bool = False, request_control: bool = True, name: str | None = None,
                 on_frame: Callable[[VideoFrame, float], None] | None = None) -> None:
        self.url = signaling_url(base_url, token, name, socket=MEDIA_SOCKET_PATH)
        self.video = video
        self.audio = audio
        self.request_control = request_control
        self.on_frame = on_frame
        """Called with each decoded H.264 frame and its arrival `time.time()` (benchmarks read pixels there)."""
        self.received: MediaReceived = MediaReceived()
        self.width = self.height = 0
        self.session_id: str | None = None
        self.ready = asyncio.Event()
        self.disconnected = asyncio.Event()
        self._decoder = av.CodecContext.create("h264", "r")
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._frame_event = asyncio.Event()

    async def connect(self, timeout: float = 15.0) -> None:
        """Open the socket and wait for the first picture (raises on timeout)."""
        self._ws = await connect(self.url, open_timeout=timeout, max_size=None)
        self._spawn(self._read_signaling())
        self._spawn(self._write())
        await asyncio.wait_for(self.ready.wait(), timeout)
        if self.video is not VideoFormat.NONE:
            await self.wait_frames(1, timeout)

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _send_input(self, message: bytes) -> None:
        if self._ws is None:
            raise RuntimeError("the socket is not open")
        self._outbox.put_nowait(message)  # one writer keeps the order

    async def _write(self) -> None:
        assert self._ws is not None
        for _ in range(MAX_MESSAGES):
            await self._ws.send(await self._outbox.get())

    async def _request_media(self) -> None:
        await self.emit("media/request", {"video": str(self.video), "audio": self.audio})

    def _on_binary(self, message: bytes) -> None:
        kind, flags, _ = MEDIA_HEADER.unpack_from(message)
        body = message[MEDIA_HEADER.size:]
        received = self.received
        received.kinds.append((MediaKind(kind), bool(flags & KEYFRAME)))
        if kind == MediaKind.DATA:
            received.data.append(body)
            return
        if kind == MediaKind.OPUS:
            received.opus.append(body)
            return
        now = time.monotonic()
        if kind == MediaKind.JPEG:
            picture = Image.open(io.BytesIO(body))
            picture.load()
            received.last_picture = picture
            self._count(now, bool(flags & KEYFRAME))
            return
        for frame in self._decoder.decode(av.Packet(body)):
            received.last_frame = frame
            self._count(now, frame.key_frame)
            if self.on_frame is not None:
                self.on_frame(frame, time.time())

    def _count(self, now: float, keyframe: bool) -> None:
        received = self.received
        if received.first_frame_at is None:
            received.first_frame_at = now
        received.frames += 1
        received.frame_times.append(now)
        received.keyframes += int(keyframe)
        self._frame_event.set()

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    viewer = SocketViewer(args.url, args.token, video=VideoFormat.JPEG if args.jpeg else VideoFormat.H264)
    return {"transport": "websocket", "video": str(viewer.video), **await watch(viewer, args)}


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser("python -m streaming.socket_viewer", __doc__ or "")
    parser.add_argument("--jpeg", action="store_true", help="ask for JPEG pictures instead of H.264")
    return run_cli(parser, argv, _main)


if __name__ == "__main__":
    sys.exit(main())
