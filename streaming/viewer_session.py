"""What the Python live-view clients share, on either transport (docs/streaming.md): the viewer socket's URL,
what a viewer received, neko's events and input frames on the socket (`ViewerSession`), and the shell
entry's arguments and measurement. `streaming.viewer` speaks WebRTC, `streaming.socket_viewer` the
WebSocket transport.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import struct
import time
import urllib.request
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from av.video.frame import VideoFrame
from websockets.asyncio.client import ClientConnection

from streaming.input import (
    HEADER,
    OP_BUTTON_DOWN,
    OP_BUTTON_UP,
    OP_KEY_DOWN,
    OP_KEY_UP,
    OP_MOVE,
    OP_PING,
    OP_SCROLL,
)

SIGNALING_PATH = "/v1/desktop/stream/signaling"


def signaling_url(base: str, token: str | None, name: str | None = None, socket: str = SIGNALING_PATH) -> str:
    """`http://host:port` (or a ws:// URL, or a viewer socket URL of one desktop such as
    `http://host:port/v1/desktops/ID/stream/signaling`) → the URL of the viewer socket `socket` (the signalling
    one, or `/v1/desktop/stream/ws`: the tail is kept for one desktop's) with `access_token` (and the viewer's
    `name`, docs/control.md)."""
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    given = re.fullmatch(r"(.*)/stream/(signaling|ws)", parts.path)
    tail = socket.rsplit("/stream/", 1)[1]
    path = f"{given.group(1)}/stream/{tail}" if given else parts.path.rstrip("/") + socket
    query = f"access_token={quote(token, safe='')}" if token else parts.query
    if name is not None:
        query = "&".join(filter(None, (query, f"name={quote(name, safe='')}")))
    return urlunsplit((scheme, parts.netloc, path, query, ""))


@dataclass
class Received:
    """What the viewer has received so far."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    frames: int = 0
    keyframes: int = 0
    first_frame_at: float | None = None
    last_frame: VideoFrame | None = None
    frame_times: list[float] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)


class ViewerSession:
    """What every live-view client does the same on either transport: neko's events on its WebSocket
    (control, the clipboard) and input as neko's binary frames (`_send_input` says where they go)."""

    _ws: ClientConnection | None = None
    _frame_event: asyncio.Event
    received: Received
    width: int
    height: int
    session_id: str | None
    request_control: bool
    ready: asyncio.Event
    disconnected: asyncio.Event

    async def connect(self, timeout: float = 15.0) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def wait_frames(self, count: int, timeout: float = 10.0) -> int:
        """Wait until `count` frames in total were decoded; returns how many there are."""
        deadline = time.monotonic() + timeout
        while self.received.frames < count:
            left = deadline - time.monotonic()
            if left <= 0 or self.disconnected.is_set():
                raise TimeoutError(f"only {self.received.frames} of {count} frames in {timeout} s")
            self._frame_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._frame_event.wait(), min(left, 0.5))
        return self.received.frames

    async def _read_signaling(self) -> None:
        """The socket's messages until it closes: events recorded and handled, binary ones to `_on_binary`."""
        assert self._ws is not None
        try:
            async for message in self._ws:
                if isinstance(message, bytes):
                    self._on_binary(message)
                    continue
                parsed = json.loads(message)
                event, payload = parsed.get("event", ""), parsed.get("payload") or {}
                self.received.events.append((event, payload))
                if event == "system/init":
                    await self._on_init(payload)
                elif event == "system/disconnect":
                    break
                else:
                    await self._on_event(event, payload)
        except Exception as exc:  # the socket died: report it through `disconnected`
            self.received.events.append(("error", {"message": str(exc)}))
        finally:
            self.disconnected.set()

    async def _on_init(self, payload: dict[str, Any]) -> None:
        size = payload.get("screen_size") or {}
        self.width, self.height = int(size.get("width", 0)), int(size.get("height", 0))
        self.session_id = payload.get("session_id")
        self.ready.set()
        if self.request_control:
            await self.emit("control/request", {})
        await self._request_media()

    async def _request_media(self) -> None:
        raise NotImplementedError

    async def _on_event(self, event: str, payload: dict[str, Any]) -> None:
        """Any other event (after it was recorded)."""

    def _on_binary(self, message: bytes) -> None:
        """A binary message (none on the signalling socket)."""

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        assert self._ws is not None
        await self._ws.send(json.dumps({"event": event, "payload": payload}))

    # -- shared control and the clipboard (docs/control.md) -----------------------------------------

    async def request(self, takeover: bool = False) -> None:
        await self.emit("control/request", {"takeover": True} if takeover else {})

    async def give(self, viewer: str) -> None:
        await self.emit("control/give", {"id": viewer})

    async def take(self) -> None:
        await self.emit("control/take", {})

    async def release(self) -> None:
        await self.emit("control/release", {})

    async def set_clipboard(self, text: str) -> None:
        await self.emit("clipboard/set", {"text": text})

    def events_named(self, event: str) -> list[dict[str, Any]]:
        """The payloads of every `event` received so far, oldest first."""
        return [payload for name, payload in self.received.events if name == event]

    def _send_input(self, message: bytes) -> None:
        raise NotImplementedError

    def _send(self, opcode: int, payload: bytes) -> None:
        self._send_input(HEADER.pack(opcode, len(payload)) + payload)

    # -- input (neko's binary opcodes) -----------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        self._send(OP_MOVE, struct.pack("!HH", x, y))

    def button(self, button: int, down: bool) -> None:
        self._send(OP_BUTTON_DOWN if down else OP_BUTTON_UP, struct.pack("!I", button))

    def key(self, keysym: int, down: bool) -> None:
        self._send(OP_KEY_DOWN if down else OP_KEY_UP, struct.pack("!I", keysym))

    def scroll(self, dx: int, dy: int) -> None:
        self._send(OP_SCROLL, struct.pack("!hhB", dx, dy, 0))

    def ping(self) -> None:
        now = int(time.time() * 1000)
        self._send(OP_PING, struct.pack("!II", *divmod(now, 0xFFFFFFFF)))


def start_stream(base_url: str, token: str | None) -> dict[str, Any]:
    """`POST /v1/desktop/stream/start` with the standard library (no HTTP client dependency)."""
    request = urllib.request.Request(base_url.rstrip("/") + "/v1/desktop/stream/start", method="POST",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def cli_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The arguments every shell viewer takes (this one, streaming/socket_viewer.py)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("url", help="server URL, e.g. http://127.0.0.1:2468")
    parser.add_argument("token", nargs="?", default=None, help="the server's token, if it has one")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to watch after the first frame")
    parser.add_argument("--start", action="store_true", help="POST /v1/desktop/stream/start first")
    parser.add_argument("--timeout", type=float, default=15.0)
    return parser


def run_cli(parser: argparse.ArgumentParser, argv: list[str] | None,
            run: Callable[[argparse.Namespace], Coroutine[Any, Any, dict[str, Any]]]) -> int:
    """A shell viewer's whole run: parse `argv`, watch with `run`, print its figures as one JSON line."""
    print(json.dumps(asyncio.run(run(parser.parse_args(argv)))))
    return 0


async def watch(viewer: ViewerSession, args: argparse.Namespace) -> dict[str, Any]:
    """Connect, watch `args.seconds`, close: the size, frames, fps and time to the first frame."""
    if args.start:
        await asyncio.to_thread(start_stream, args.url, args.token)
    started = time.monotonic()
    try:
        await viewer.connect(timeout=args.timeout)
        first = (viewer.received.first_frame_at or started) - started
        begin = viewer.received.frames
        await asyncio.sleep(args.seconds)
        frames = viewer.received.frames - begin
        return {"width": viewer.width, "height": viewer.height, "frames": frames,
                "fps": round(frames / args.seconds, 1), "firstFrameMs": round(first * 1000)}
    finally:
        await viewer.close()
