"""The live view of the desktop: whether streaming is on, its viewers, their control and their video.

`start_stream()` only arms the stream (it costs nothing until a viewer connects); each viewer's
WebSocket is served by a `SignalingSession`. Viewers negotiating the same codec share one
`VideoPipeline`, which runs while any of them is attached. Stopping the stream (or the desktop), or
the desktop failing for good, sends every viewer `system/disconnect` and closes its peer.

Viewers share control (streaming/control.py, docs/control.md): each change is broadcast
(`control/host`, `control/takeover`), published on the desktop's event bus (`control.changed`),
written to the action log, and handed to the takeover gate (desktop/control/takeover.py) that holds agent
input off while a person holds the desktop. The controller's browser and the desktop share the
clipboard over the signalling socket (`clipboard/updated` out, `clipboard/set` in).

The WebRTC stack (aiortc, aioice, PyAV's encoders: ~0.3 s of a server's start, per server of a pytest-xdist
run) is imported when the live view is first started, not with the server; so are the hooks installed
into it, whose version check then decides whether the live view can run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from desktop.core.errors import DomainError, StreamError, StreamNotActive, invalid_action
from desktop.events import action_log as logged
from desktop.events.action_log import acting_as
from desktop.events.bus import Event
from desktop.events.event_types import ControlChanged
from desktop.lifecycle.runtime import Desktop
from desktop.sound.capture import AudioCapture
from sandbox_desktop_wire.enums import ActionSource, TakeoverMode, VideoCodec
from sandbox_desktop_wire.events import EventType
from streaming.config import StreamConfig
from streaming.control import Access, Control, ControlChange, ControlRefused
from streaming.turn import TurnRelays, ice_servers_json

if TYPE_CHECKING:  # the WebRTC stack, imported once the live view starts (module doc)
    from streaming.audio import OpusFeed
    from streaming.media_socket import MediaLink
    from streaming.peer import ViewerPeer
    from streaming.pipeline import VideoPipeline
    from streaming.signaling import Link, SignalingSession
    from streaming.track import PacketTrack, ViewerTrack

logger = logging.getLogger("sandbox_desktop.stream")

DISCONNECT_TIMEOUT_S = 5.0
MAX_CLIPBOARD_CHARS = 1_000_000
"""Clipboard text exchanged with a viewer, each way (a larger copy stays on its side)."""
MAX_NAME_CHARS = 40
NAME_PATTERN = re.compile(r"[\w .@-]+")


def viewer_name(text: str) -> str:
    """A viewer's `?name=`: 1-40 letters, digits, spaces and `._@-` (400 naming `name` otherwise)."""
    name = text.strip()
    if not name or len(name) > MAX_NAME_CHARS or not NAME_PATTERN.fullmatch(name):
        raise invalid_action(f"name must be 1 to {MAX_NAME_CHARS} letters, digits, spaces or ._@-", "name", "query")
    return name


@dataclass(frozen=True)
class StreamStatus:
    """`GET /v1/desktop/stream/status`."""

    active: bool
    codec: VideoCodec | None = None
    frame_rate: int | None = None
    """The frame-rate cap now (the configured one, lowered under CPU pressure)."""
    fps: float | None = None
    """Pictures sent per second recently (a static screen sends about one)."""
    bitrate: int | None = None
    viewers: int | None = None
    controller: str | None = None
    takeover: bool | None = None
    """Whether the controller holds the desktop (agent input waits or is refused, docs/control.md)."""
    takeover_mode: TakeoverMode | None = None
    port_range: tuple[int, int] | None = None
    encoders: int | None = None
    """Running encoders: one per codec in use, however many viewers share it."""
    keyframes: int | None = None
    """Keyframes the first codec's encoder sent since it started (viewers joining, PLIs, the safety one)."""


class StreamManager:
    """The desktop's live view; the API calls `start_stream`, `stop_stream`, `status` and `serve`."""

    def __init__(self, desktop: Desktop, public_addresses: tuple[str, ...] = (),
                 audio: AudioCapture | None = None, turn: TurnRelays | None = None) -> None:
        self.desktop = desktop
        self.turn = turn
        """The TURN servers viewers may relay through (`--turn-url`, `--turn local`; docs/streaming-turn.md)."""
        self.sound = audio
        """The desktop's sound (None: video only), encoded once for every viewer by `audio`."""
        self.audio: OpusFeed | None = None
        """That encoder (streaming/audio.py), made for the first viewer."""
        self.public_addresses = public_addresses
        """Where viewers reach our UDP ports through a 1:1 NAT (`--webrtc-public-address`)."""
        self.takeover = desktop.takeover
        """The desktop's takeover gate (desktop/control/takeover.py): control changes here tell it who holds the
        desktop."""
        self.control = Control(self._control_changed, self._access_of)
        self._clipboard_task: asyncio.Task[None] | None = None
        self._clipboard_known: str | None = None
        """The clipboard text the controller's browser has (sent or received), so none is echoed back."""
        self._config: StreamConfig | None = None
        self._sessions: dict[str, SignalingSession] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        """Viewer connections being served, and background work (pipelines closing)."""
        self._pipelines: dict[VideoCodec, VideoPipeline] = {}
        self._watchers: dict[ViewerTrack, str] = {}
        """The video track of each viewer that watches (a WebRTC peer's or a WebSocket viewer's), and whose."""
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._unavailable: str | None = None
        """Why the live view cannot run here (unsupported aiortc/aioice version), if it cannot."""
        self._prepared = False

    # -- server lifecycle (api/app.py) -----------------------------------------------------------

    async def start(self) -> None:
        """Server start; the WebRTC stack waits for the first `start_stream` (module doc)."""
        if self.public_addresses:
            logger.info("live view: host candidates also offered at %s (1:1 NAT)", ", ".join(self.public_addresses))
        for name in ("aioice", "aiortc"):  # one INFO line per ICE check otherwise
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.WARNING)

    def _prepare(self) -> None:
        """Import the WebRTC stack and install the aiortc/aioice hooks; unknown versions disable the live view
        only (with the reason logged once and given to every `start_stream`)."""
        if self._prepared:
            return
        self._prepared = True
        from streaming import ports
        from streaming.track import install_keyframe_hook
        try:
            install_keyframe_hook()
            ports.install()
        except RuntimeError as exc:
            self._unavailable = str(exc)
            logger.error("live view disabled: %s", exc)

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
            self._prepare()
            if self._unavailable is not None:
                raise StreamError(f"the live view is unavailable on this server: {self._unavailable}")
            session = self.desktop.session()
            if self._config is None:
                from streaming.encoders import CODECS
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
                self._clipboard_task = asyncio.get_running_loop().create_task(self._follow_clipboard(),
                                                                              name="stream-clipboard")
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
            self.takeover.hold(None)
            clipboard, self._clipboard_task = self._clipboard_task, None
            if clipboard is not None:
                clipboard.cancel()
                await asyncio.gather(clipboard, return_exceptions=True)
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
            viewers=len(self._sessions), controller=self.control.host, takeover=self.control.takeover,
            takeover_mode=self.takeover.mode, port_range=config.ports,
            encoders=len(self._pipelines), keyframes=stats.keyframes if stats else 0,
        )

    def require_config(self) -> StreamConfig:
        """The active stream's configuration, or the 409 a client gets before `stream/start`."""
        if self._config is None:
            raise StreamNotActive("desktop streaming is not active; POST /v1/desktop/stream/start first")
        return self._config

    async def serve(self, link: Link, access: Access = Access.ADMIN, name: str | None = None,
                    media_link: MediaLink | None = None) -> None:
        """Serve one viewer's signalling WebSocket until it closes (the socket is already accepted). `access`
        comes from its credential (a view-only token watches only); `name` (checked by `viewer_name`) is
        made unique and is the viewer's id. With `media_link` (the same socket), the media go over it
        instead of WebRTC (streaming/media_socket.py)."""
        from streaming.media_socket import MediaSocketSession
        from streaming.signaling import SignalingSession
        viewer = (SignalingSession(self._unique_name(name), link, self, access) if media_link is None
                  else MediaSocketSession(self._unique_name(name), media_link, self, access))
        if self._config is None:  # stopped between the handshake and now
            await viewer.disconnect("desktop streaming is not active")
            return
        self._sessions[viewer.id] = viewer
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        logger.info("viewer %s joined (%s)", viewer.id, access)
        self._broadcast_soon("session/created", self.describe(viewer.id), but=viewer.id)
        try:
            await viewer.run()
        finally:
            self._sessions.pop(viewer.id, None)
            self.control.leave(viewer.id)
            self._broadcast_soon("session/deleted", {"id": viewer.id})
            await viewer.finish()
            if task is not None:
                self._tasks.discard(task)

    def _unique_name(self, name: str | None) -> str:
        if name is None:
            for _ in range(1000):
                candidate = f"viewer_{next(self._ids)}"
                if candidate not in self._sessions:
                    return candidate
        base = name or "viewer"
        if base not in self._sessions:
            return base
        # One of these is free: there are fewer sessions than suffixes tried.
        return next(f"{base}_{n}" for n in range(2, len(self._sessions) + 3) if f"{base}_{n}" not in self._sessions)

    # -- for sessions ------------------------------------------------------------------------

    def _access_of(self, viewer: str) -> Access | None:
        session = self._sessions.get(viewer)
        return session.access if session is not None else None

    def describe(self, viewer: str) -> dict[str, Any]:
        """neko's session entry (`id`, `profile`, `state`) plus our `role` and `access` (docs/control.md)."""
        session = self._sessions.get(viewer)
        access = session.access if session is not None else Access.VIEW
        host = self.control.holds(viewer)
        return {"id": viewer, "role": "controller" if host else "watcher", "access": str(access),
                "profile": {"name": viewer, "is_admin": access is Access.ADMIN, "can_watch": True,
                            "can_host": access is not Access.VIEW, "can_access_clipboard": access is not Access.VIEW},
                "state": {"is_connected": True, "is_watching": viewer in self.watching(), "is_host": host}}

    def takeover_state(self) -> dict[str, Any]:
        """`control/takeover`: whether the controller holds the desktop, and what agent input gets then."""
        host = self.control.host
        return {"active": self.control.takeover, "mode": str(self.takeover.mode), **({"host_id": host} if host else {})}

    def viewer_ids(self) -> list[str]:
        return list(self._sessions)

    def ice_servers_for(self, viewer: str) -> list[dict[str, Any]]:
        """A viewer's RTCConfiguration `iceServers`, fresh credentials included ([] without TURN): what
        `signal/provide` carries, and what any other transport that hands a browser a peer connection gives."""
        return ice_servers_json(self.turn.for_viewer(self.desktop.id, viewer)) if self.turn is not None else []

    def watching(self) -> set[str]:
        return set(self._watchers.values())

    def open_peer(self, on_message: Callable[[bytes | str], None], on_state: Callable[[str], None]) -> ViewerPeer:
        from streaming.peer import ViewerPeer
        from streaming.ports import HostPolicy
        config = self.require_config()
        # Host candidates on every interface plus 127.0.0.1 (as neko's nat1to1 127.0.0.1), in the range,
        # and the public addresses a NAT forwards the range from.
        policy = HostPolicy(ports=config.ports, loopback=True, public_addresses=self.public_addresses)
        relays = self.turn.for_server_peer(self.desktop.id) if self.turn is not None else None
        peer = ViewerPeer(config.codec, policy, on_message, on_state, relays)
        audio = self.audio_track()
        if audio is not None:
            peer.add_audio(audio)
        return peer

    def audio_track(self) -> PacketTrack | None:
        """A viewer's track of the desktop's sound from the one Opus encoder; None when the desktop has none."""
        from streaming.audio import DesktopAudioTrack, OpusFeed
        if self.sound is None or not self.sound.available:
            return None
        if self.audio is None:
            self.audio = OpusFeed(self.sound)
        return DesktopAudioTrack(self.audio)

    def attach(self, peer: ViewerPeer, viewer: str) -> None:
        """Start sending video to a viewer's peer whose answer was applied."""
        self.attach_video(peer.track, viewer, peer.codec or self.require_config().codec)

    def detach(self, peer: ViewerPeer) -> None:
        self.detach_video(peer.track)

    def attach_video(self, track: ViewerTrack, viewer: str, codec: VideoCodec) -> None:
        """Send `codec`'s pictures to a viewer's track, from the next keyframe: its codec's one encoder, started
        for the first viewer of either transport."""
        config = self.require_config()
        pipeline = self._pipelines.get(codec)
        if pipeline is None:
            from streaming.pipeline import VideoPipeline
            pipeline = VideoPipeline(self.desktop.frames, config.display, codec, config.fps)
            self._pipelines[codec] = pipeline
        pipeline.attach(track)
        self._watchers[track] = viewer

    def detach_video(self, track: ViewerTrack) -> None:
        """Stop sending to a track; the last one out stops its pipeline."""
        self._watchers.pop(track, None)
        for codec, pipeline in list(self._pipelines.items()):
            pipeline.detach(track)
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

    def _broadcast_soon(self, event: str, payload: dict[str, Any], but: str | None = None) -> None:
        """Queue one event to every viewer (each in its session's order), from code that cannot await."""
        for session in self._sessions.values():
            if session.id != but:
                session.spawn(session.emit(event, payload))

    # -- control -----------------------------------------------------------------------------

    def _control_changed(self, change: ControlChange) -> None:
        """Control's one listener: tell the viewers, the gate, the event bus and the action log."""
        host = change.controller
        if change.controller != change.previous:
            self._broadcast_soon("control/host", {"id": change.cause, "has_host": host is not None,
                                                  **({"host_id": host} if host else {})})
        self._broadcast_soon("control/takeover", self.takeover_state())
        self.takeover.hold(host if change.takeover else None)
        said = (host, change.previous, change.takeover, change.cause, str(change.reason))
        self.desktop.events.bus.publish(ControlChanged(*said))
        with acting_as(ActionSource.STREAM):
            self.desktop.action_log.record(logged.Control(*said))
        if change.controller == change.previous:
            return
        old = self._sessions.get(change.previous or "")
        if old is not None:
            old.input.release()
        self._clipboard_known = None
        new = self._sessions.get(host or "")
        if new is not None:  # what the agent copied before can be pasted in the controller's browser
            new.spawn(self._send_clipboard(new.id))

    # -- clipboard ---------------------------------------------------------------------------

    async def viewer_clipboard(self, viewer: str, text: str) -> None:
        """`clipboard/set` from a viewer: the controller's browser clipboard becomes the desktop's CLIPBOARD."""
        if not self.control.holds(viewer):
            raise ControlRefused("only the controller can set the desktop's clipboard")
        if len(text) > MAX_CLIPBOARD_CHARS:
            raise ControlRefused(f"clipboard text over {MAX_CLIPBOARD_CHARS} characters is not sent to the desktop")
        try:
            session = self.desktop.session()
            with acting_as(ActionSource.STREAM):
                self.desktop.action_log.record(logged.Clipboard(len(text), viewer))
            self._clipboard_known = text
            await self.desktop.clipboard.set(session, text)
        except DomainError as exc:
            raise ControlRefused(f"the desktop's clipboard cannot be set: {exc.message}") from exc

    async def _follow_clipboard(self) -> None:
        """While the stream is on: each change of the desktop's CLIPBOARD goes to the controller."""
        with self.desktop.events.bus.subscribe({EventType.CLIPBOARD_CHANGED}) as changes:
            async for item in changes:
                if isinstance(item, Event) and self.control.host is not None:
                    await self._send_clipboard(self.control.host)

    async def _send_clipboard(self, viewer: str) -> None:
        """The desktop's CLIPBOARD text to `viewer` (`clipboard/updated`), unless its browser has it already."""
        try:
            text = await self.desktop.clipboard.get(self.desktop.session())
        except DomainError as exc:  # nobody owns it, or the owner does not answer: nothing to send
            logger.debug("clipboard not read for %s: %s", viewer, exc)
            return
        if not text or text == self._clipboard_known or not self.control.holds(viewer):
            return
        if len(text) > MAX_CLIPBOARD_CHARS:
            logger.info("clipboard of %d characters not sent to %s", len(text), viewer)
            return
        self._clipboard_known = text
        with contextlib.suppress(Exception):
            await self.send_to(viewer, "clipboard/updated", {"text": text})

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
