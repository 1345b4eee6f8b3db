"""The neko v3 signalling subset one viewer speaks over its WebSocket (docs/streaming.md).

Every text message is `{"event": ..., "payload": {...}}`. The server opens with `system/init`,
answers `signal/request` with `signal/provide` (its offer), takes `signal/answer` and trickled
`signal/candidate`s, passes control with `control/request`, `control/give`, `control/take` and
`control/release` (broadcasting `control/host`, docs/control.md), carries the clipboard
(`clipboard/set` in, `clipboard/updated` out) and ends with `system/disconnect {message}`. A control
or clipboard action the viewer may not take is answered with `system/error {event, message}`.
Unknown events, heartbeats included, are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from streaming.config import StreamConfig
from streaming.control import Access, Control, ControlRefused
from streaming.input import RemoteInput
from streaming.peer import NegotiationError, ViewerPeer
from streaming.ports import PortRangeExhausted

if TYPE_CHECKING:
    from desktop.lifecycle.runtime import Desktop

logger = logging.getLogger("sandbox_desktop.stream.signaling")

VIDEO_ID = "main"
"""The one video "pipeline" id neko would list in `webrtc.videos`."""
NEKO_SETTINGS = {"private_mode": False, "locked_logins": False, "locked_controls": False,
                 "control_protection": False, "implicit_hosting": False, "inactive_cursors": False,
                 "merciful_reconnect": False, "heartbeat_interval": 0, "plugins": {}}


class Link(Protocol):
    """The viewer's WebSocket, as the session needs it."""

    async def send(self, text: str) -> None: ...

    async def receive(self) -> str | None:
        """The next text message; None once the socket closed."""

    async def close(self, code: int, reason: str) -> None: ...


class LiveView(Protocol):
    """What a viewer's session needs of the live view it joins (streaming/manager.py's `StreamManager`)."""

    desktop: Desktop
    control: Control

    def require_config(self) -> StreamConfig: ...

    def describe(self, viewer: str) -> dict[str, Any]: ...

    def takeover_state(self) -> dict[str, Any]: ...

    def viewer_ids(self) -> list[str]: ...

    def ice_servers_for(self, viewer: str) -> list[dict[str, Any]]: ...

    def open_peer(self, on_message: Callable[[bytes | str], None], on_state: Callable[[str], None]) -> ViewerPeer: ...

    def attach(self, peer: ViewerPeer, viewer: str) -> None: ...

    def detach(self, peer: ViewerPeer) -> None: ...

    async def send_to(self, viewer: str, event: str, payload: dict[str, Any]) -> None: ...

    async def viewer_clipboard(self, viewer: str, text: str) -> None: ...


class SignalingSession:
    """One connected viewer: its WebSocket, its peer connection and its input."""

    def __init__(self, viewer_id: str, link: Link, manager: LiveView, access: Access = Access.ADMIN) -> None:
        self.id = viewer_id
        """Also the viewer's name: unique among the connected viewers (`?name=`, default `viewer_N`)."""
        self.access = access
        self.link = link
        self.peer: ViewerPeer | None = None
        self.input = RemoteInput(manager.desktop, lambda: manager.control.holds(viewer_id), self._reply,
                                 lambda: manager.control.touched(viewer_id))
        self._manager = manager
        self._send_lock = asyncio.Lock()
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "control/request": self._control_request,
            "control/release": self._control_release,
            "control/give": self._control_give,
            "control/take": self._control_take,
            "clipboard/set": self._clipboard_set,
            "signal/request": self._signal_request,
            "signal/answer": self._signal_answer,
            "signal/candidate": self._signal_candidate,
            "signal/close": self._signal_close,
        }

    async def run(self) -> None:
        """Serve the viewer until its socket closes or the stream stops."""
        await self.emit("system/init", self._init_payload())
        while not self._closing:
            text = await self.link.receive()
            if text is None:
                return
            event, payload = _parse(text)
            handler = self._handlers.get(event or "")
            if handler is None:
                continue
            try:
                await handler(payload)
            except ControlRefused as exc:
                logger.info("viewer %s: %s refused: %s", self.id, event, exc)
                await self.emit("system/error", {"event": event, "message": str(exc)})
            except Exception as exc:  # a bug or an aiortc state error: tell the viewer, do not hang it
                logger.exception("viewer %s: %s failed", self.id, event)
                await self._fail(f"{event} failed: {exc}")

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        """Send one event; a socket that is already gone is not an error."""
        text = json.dumps({"event": event, "payload": payload})
        async with self._send_lock:
            try:
                await self.link.send(text)
            except Exception as exc:  # closed under us: the receive loop ends the session
                logger.debug("viewer %s: send failed: %s", self.id, exc)

    async def disconnect(self, message: str) -> None:
        """Tell the viewer why (neko's `system/disconnect`) and close its socket."""
        if self._closing:
            return
        self._closing = True
        await self.emit("system/disconnect", {"message": message})
        with contextlib.suppress(Exception):
            await self.link.close(1001, message[:120])

    async def close_peer(self) -> None:
        peer, self.peer = self.peer, None
        if peer is not None:
            self._manager.detach(peer)
            await peer.close()

    async def finish(self) -> None:
        """Release everything the viewer had: peer, held keys and buttons, control, pending tasks."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.close_peer()
        await self.input.close()

    # -- events ------------------------------------------------------------------------------

    async def _control_request(self, payload: dict[str, Any]) -> None:
        control = self._manager.control
        if not control.request(self.id, takeover=payload.get("takeover") is True) and control.host is not None:
            # neko tells the host someone asked; the request is remembered (see streaming/control.py).
            await self._manager.send_to(control.host, "control/request", {"id": self.id})

    async def _control_release(self, payload: dict[str, Any]) -> None:
        self._manager.control.release(self.id)

    async def _control_give(self, payload: dict[str, Any]) -> None:
        target = payload.get("id")
        if not isinstance(target, str):
            raise ControlRefused("control/give needs {\"id\": <viewer>}")
        self._manager.control.give(self.id, target)

    async def _control_take(self, payload: dict[str, Any]) -> None:
        self._manager.control.take(self.id)

    async def _clipboard_set(self, payload: dict[str, Any]) -> None:
        text = payload.get("text")
        if not isinstance(text, str):
            raise ControlRefused("clipboard/set needs {\"text\": <string>}")
        await self._manager.viewer_clipboard(self.id, text)

    async def _signal_request(self, payload: dict[str, Any]) -> None:
        await self.close_peer()
        try:
            peer = self._manager.open_peer(self.input.feed, self._peer_state)
        except Exception as exc:
            await self._fail(f"cannot create a WebRTC peer: {exc}")
            return
        self.peer = peer
        try:
            sdp = await peer.offer()
        except PortRangeExhausted as exc:
            await self.close_peer()
            await self._fail(f"{exc}; close other viewers or widen webrtcPortRange")
            return
        if self.peer is not peer:  # replaced or closed while the offer was made
            return
        await self.emit("signal/provide", {
            "sdp": sdp, "iceservers": self._manager.ice_servers_for(self.id),
            "video": {"disabled": False, "id": VIDEO_ID, "video": VIDEO_ID, "auto": False},
            "audio": {"disabled": not peer.has_audio},
        })

    async def _signal_answer(self, payload: dict[str, Any]) -> None:
        sdp = payload.get("sdp")
        peer = self.peer
        if peer is None or not isinstance(sdp, str):
            return
        try:
            await peer.accept(sdp)
        except (NegotiationError, ValueError) as exc:
            await self.close_peer()
            await self.emit("signal/close", {})
            logger.info("viewer %s: answer refused: %s", self.id, exc)
            return
        if self.peer is peer:  # not closed meanwhile (its connection failed)
            self._manager.attach(peer, self.id)

    async def _signal_candidate(self, payload: dict[str, Any]) -> None:
        if self.peer is not None:
            try:
                await self.peer.add_candidate(payload)
            except (ValueError, IndexError) as exc:
                logger.debug("viewer %s: bad candidate %r: %s", self.id, payload, exc)

    async def _signal_close(self, payload: dict[str, Any]) -> None:
        await self.close_peer()

    # -- helpers -----------------------------------------------------------------------------

    def _init_payload(self) -> dict[str, Any]:
        config = self._manager.require_config()
        session = self._manager.desktop.session()  # the screen now: it may have been resized since the start
        host = self._manager.control.host
        sessions = {viewer: self._manager.describe(viewer) for viewer in self._manager.viewer_ids()}
        return {
            "session_id": self.id,
            "control_host": {"has_host": host is not None, **({"host_id": host} if host else {})},
            "control_takeover": self._manager.takeover_state(),
            "screen_size": {"width": session.width, "height": session.height, "rate": config.fps},
            "sessions": sessions,
            "settings": NEKO_SETTINGS,
            "touch_events": False,
            "screencast_enabled": False,
            "webrtc": {"videos": [VIDEO_ID]},
        }

    def _peer_state(self, state: str) -> None:
        if state in ("failed", "closed") and self.peer is not None and self.peer.state == state:
            logger.info("viewer %s: WebRTC connection %s", self.id, state)
            self.spawn(self.close_peer())

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background, owned by this session (cancelled when it ends)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _reply(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.send(data)

    async def _fail(self, message: str) -> None:
        logger.warning("viewer %s: %s", self.id, message)
        await self.disconnect(message)


def _parse(text: str) -> tuple[str | None, dict[str, Any]]:
    """`(event, payload)` of a message; anything malformed reads as no event."""
    try:
        message = json.loads(text)
    except ValueError:
        return None, {}
    if not isinstance(message, dict) or not isinstance(message.get("event"), str):
        return None, {}
    payload = message.get("payload", message.get("data"))
    return message["event"], payload if isinstance(payload, dict) else {}
