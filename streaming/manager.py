"""The live view of the desktop: whether streaming is on, its viewers, their control and their video.

`start_stream()` only arms the stream (it costs nothing until a viewer connects); each viewer's
WebSocket is served by a `SignalingSession`. Viewers negotiating the same codec share one
`VideoPipeline`, which runs while any of them is attached. Stopping the stream (or the desktop), or
the desktop failing for good, sends every viewer `system/disconnect` and closes its peer.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from desktop.errors import StreamError, StreamNotActive, invalid_action
from desktop.runtime import Desktop
from streaming import ports
from streaming.control import Control
from streaming.encoders import CODECS
from streaming.peer import ViewerPeer
from streaming.pipeline import VideoPipeline
from streaming.ports import HostPolicy
from streaming.signaling import Link, SignalingSession
from streaming.track import install_keyframe_hook

logger = logging.getLogger("sandbox_desktop.stream")

DISCONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class StreamConfig:
    """What the stream was started with: the desktop's stream options and screen."""

    codec: str
    fps: int
    ports: tuple[int, int]
    display: str
    width: int
    height: int


@dataclass(frozen=True)
class StreamStatus:
    """`GET /v1/desktop/stream/status`."""

    active: bool
    codec: str | None = None
    frame_rate: int | None = None
    """The frame-rate cap now (the configured one, lowered under CPU pressure)."""
    fps: float | None = None
    """Pictures sent per second recently (a static screen sends about one)."""
    bitrate: int | None = None
    viewers: int | None = None
    controller: str | None = None
    port_range: tuple[int, int] | None = None
    encoders: int | None = None
    """Running encoders: one per codec in use, however many viewers share it."""


class StreamManager:
    """The desktop's live view; the API calls `start_stream`, `stop_stream`, `status` and `serve`."""

    def __init__(self, desktop: Desktop, public_addresses: tuple[str, ...] = ()) -> None:
        self.desktop = desktop
        self.public_addresses = public_addresses
        """Where viewers reach our UDP ports through a 1:1 NAT (`--webrtc-public-address`)."""
        self.control = Control(self._host_changed)
        self._config: StreamConfig | None = None
        self._sessions: dict[str, SignalingSession] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        """Viewer connections being served, and background work (pipelines closing)."""
        self._pipelines: dict[str, VideoPipeline] = {}
        self._peers: dict[ViewerPeer, str] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._unavailable: str | None = None
        """Why the live view cannot run here (unsupported aiortc/aioice version), if it cannot."""

    # -- server lifecycle (api/app.py) -----------------------------------------------------------

    async def start(self) -> None:
        """Server start: install the aiortc/aioice hooks; unknown versions disable the live view only."""
        try:
            install_keyframe_hook()
            ports.install()
        except RuntimeError as exc:
            self._unavailable = str(exc)
            logger.error("live view disabled: %s", exc)
        if self.public_addresses:
            logger.info("live view: host candidates also offered at %s (1:1 NAT)", ", ".join(self.public_addresses))
        for name in ("aioice", "aiortc"):  # one INFO line per ICE check otherwise
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.WARNING)

    async def on_desktop_stop(self) -> None:
        await self.stop_stream("the desktop stopped")

    async def on_desktop_failure(self, reason: str) -> None:
        await self.stop_stream(f"the desktop failed: {reason}")

    async def shutdown(self) -> None:
        await self.stop_stream("the server is shutting down")

    # -- the API -----------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._config is not None

    async def start_stream(self) -> StreamStatus:
        """Arm the stream with the desktop's options (idempotent while active)."""
        async with self._lock:
            if self._unavailable is not None:
                raise StreamError(f"the live view is unavailable on this server: {self._unavailable}")
            session = self.desktop.session()
            if self._config is None:
                options = self.desktop.options
                assert options is not None
                if options.stream_video_codec not in CODECS:
                    raise invalid_action(
                        f"streamVideoCodec {options.stream_video_codec} is not supported by the live view; "
                        f"start the desktop with streamVideoCodec {' or '.join(CODECS)}", "streamVideoCodec")
                self._config = StreamConfig(options.stream_video_codec, options.stream_frame_rate,
                                            options.webrtc_port_range, session.display, session.width,
                                            session.height)
                logger.info("live view on: %s, %d fps, UDP %d-%d", self._config.codec, self._config.fps,
                            *self._config.ports)
            return self.status()

    async def stop_stream(self, reason: str = "desktop streaming stopped") -> StreamStatus:
        """Disconnect every viewer (telling them `reason`) and stop encoding."""
        async with self._lock:
            if self._config is None:
                return self.status()
            self._config = None
            sessions = list(self._sessions.values())
            await asyncio.gather(*(s.disconnect(reason) for s in sessions), return_exceptions=True)
            tasks = list(self._tasks)
            if tasks:
                await asyncio.wait(tasks, timeout=DISCONNECT_TIMEOUT_S)
            for task in tasks:  # a viewer that did not let go in time
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for pipeline in list(self._pipelines.values()):
                await pipeline.close()
            self._pipelines.clear()
            self.control.clear()
            logger.info("live view off: %s", reason)
            return self.status()

    def status(self) -> StreamStatus:
        config = self._config
        if config is None:
            return StreamStatus(active=False)
        pipeline = self._pipelines.get(config.codec) or next(iter(self._pipelines.values()), None)
        stats = pipeline.stats() if pipeline is not None else None
        return StreamStatus(
            active=True, codec=config.codec,
            frame_rate=stats.frame_rate if stats else config.fps,
            fps=stats.fps if stats else 0.0, bitrate=stats.bitrate if stats else 0,
            viewers=len(self._sessions), controller=self.control.host, port_range=config.ports,
            encoders=len(self._pipelines),
        )

    def require_config(self) -> StreamConfig:
        """The active stream's configuration, or the 409 a client gets before `stream/start`."""
        if self._config is None:
            raise StreamNotActive("desktop streaming is not active; POST /v1/desktop/stream/start first")
        return self._config

    async def serve(self, link: Link, can_control: bool = True) -> None:
        """Serve one viewer's signalling WebSocket until it closes (the socket is already accepted); a viewer
        that cannot control (a view-only token) watches only."""
        viewer = SignalingSession(f"viewer_{next(self._ids)}", link, self, can_control)
        if self._config is None:  # stopped between the handshake and now
            await viewer.disconnect("desktop streaming is not active")
            return
        self._sessions[viewer.id] = viewer
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await viewer.run()
        finally:
            self._sessions.pop(viewer.id, None)
            self.control.release(viewer.id)
            await viewer.finish()
            if task is not None:
                self._tasks.discard(task)

    # -- for sessions ------------------------------------------------------------------------

    def can_control(self, viewer: str) -> bool:
        session = self._sessions.get(viewer)
        return session is not None and session.can_control

    def viewer_ids(self) -> list[str]:
        return list(self._sessions)

    def watching(self) -> set[str]:
        return set(self._peers.values())

    def open_peer(self, on_message: Callable[[bytes | str], None], on_state: Callable[[str], None]) -> ViewerPeer:
        config = self.require_config()
        # Host candidates on every interface plus 127.0.0.1 (as neko's nat1to1 127.0.0.1), in the range,
        # and the public addresses a NAT forwards the range from.
        policy = HostPolicy(ports=config.ports, loopback=True, public_addresses=self.public_addresses)
        return ViewerPeer(config.codec, policy, on_message, on_state)

    def attach(self, peer: ViewerPeer, viewer: str) -> None:
        """Start sending video to a viewer's peer whose answer was applied."""
        config = self.require_config()
        codec = peer.codec or config.codec
        pipeline = self._pipelines.get(codec)
        if pipeline is None:
            pipeline = VideoPipeline(self.desktop.frames, config.display, codec, config.fps)
            self._pipelines[codec] = pipeline
        pipeline.attach(peer.track)
        self._peers[peer] = viewer

    def detach(self, peer: ViewerPeer) -> None:
        """Stop sending to a peer; the last one out stops its pipeline."""
        self._peers.pop(peer, None)
        for codec, pipeline in list(self._pipelines.items()):
            pipeline.detach(peer.track)
            if not pipeline.tracks:
                del self._pipelines[codec]
                self._spawn(pipeline.close())

    async def broadcast(self, event: str, payload: dict[str, Any]) -> None:
        """Send one event to every connected viewer (e.g. neko's `screen/updated` after a resize)."""
        sessions = list(self._sessions.values())
        await asyncio.gather(*(s.emit(event, payload) for s in sessions), return_exceptions=True)

    async def send_to(self, viewer: str, event: str, payload: dict[str, Any]) -> None:
        session = self._sessions.get(viewer)
        if session is not None:
            await session.emit(event, payload)

    # -- control -----------------------------------------------------------------------------

    def _host_changed(self, host: str | None, previous: str | None, cause: str) -> None:
        """Broadcast neko's `control/host`, and release what the previous host still held."""
        payload = {"id": cause, "has_host": host is not None, **({"host_id": host} if host else {})}
        for session in self._sessions.values():
            session.spawn(session.emit("control/host", payload))
        old = self._sessions.get(previous or "")
        if old is not None:
            old.input.release()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
