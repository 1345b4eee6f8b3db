"""`/v1/desktop/stream`: the live view's lifecycle, its signalling WebSocket and its WebSocket transport
(docs/streaming.md)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from api.http.operations import Operation
from api.http.problems import refuse_websocket, upgrade_required
from api.middleware.auth import ROLE_SCOPE_KEY
from api.server.services import desktop_services
from desktop.core.errors import DomainError
from sandbox_desktop_wire.enums import TokenRole
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.stream import DesktopStreamStatusResponse
from streaming.control import Access
from streaming.manager import StreamManager, StreamStatus, viewer_name

SIGNALING_PATH = "/v1/desktop/stream/signaling"
MEDIA_SOCKET_PATH = "/v1/desktop/stream/ws"


def stream_of(request: Request | WebSocket) -> StreamManager:
    """The live view of the request's desktop."""
    return desktop_services(request).stream


def status_model(status: StreamStatus) -> DesktopStreamStatusResponse:
    ports = status.port_range
    return DesktopStreamStatusResponse(
        active=status.active, codec=status.codec, frame_rate=status.frame_rate, fps=status.fps,
        bitrate=status.bitrate, viewers=status.viewers, controller=status.controller, takeover=status.takeover,
        takeover_mode=status.takeover_mode,
        webrtc_port_range=f"{ports[0]}-{ports[1]}" if ports else None, encoders=status.encoders,
        keyframes=status.keyframes,
    )


async def start(request: Request) -> DesktopStreamStatusResponse:
    return status_model(await stream_of(request).start_stream())


async def stop(request: Request) -> DesktopStreamStatusResponse:
    return status_model(await stream_of(request).stop_stream())


async def status(request: Request) -> DesktopStreamStatusResponse:
    return status_model(stream_of(request).status())


class WebSocketLink:
    """The viewer session's view of a Starlette WebSocket: text in, text out, close; binary both ways for the
    WebSocket transport."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.on_binary: Callable[[bytes], None] | None = None
        """Where binary messages go (the WebSocket transport's input); dropped while None (signalling)."""

    async def send(self, text: str) -> None:
        await self.websocket.send_text(text)

    async def send_bytes(self, data: bytes) -> None:
        await self.websocket.send_bytes(data)

    async def receive(self) -> str | None:
        """The next text message, binary ones handed to `on_binary` meanwhile; None once closed."""
        for _ in range(1 << 40):  # one iteration per message: ends when the socket closes
            if self.websocket.client_state != WebSocketState.CONNECTED:
                return None
            try:
                message = await self.websocket.receive()
            except (WebSocketDisconnect, RuntimeError):
                return None
            if message["type"] == "websocket.disconnect":
                return None
            if message.get("text") is not None:
                return str(message["text"])
            if message.get("bytes") is not None and self.on_binary is not None:
                self.on_binary(message["bytes"])
        return None

    async def close(self, code: int, reason: str) -> None:
        if self.websocket.application_state == WebSocketState.CONNECTED:
            await self.websocket.close(code, reason)


def access_of(websocket: WebSocket) -> Access:
    """The server token is the admin; a scoped token's role says the rest (docs/control.md, "Roles")."""
    match websocket.scope.get(ROLE_SCOPE_KEY):
        case TokenRole.VIEW:
            return Access.VIEW
        case TokenRole.CONTROL:
            return Access.CONTROL
        case _:
            return Access.ADMIN


async def signaling(websocket: WebSocket) -> None:
    """neko's signalling protocol; before the upgrade, a 409 problem when streaming is not active and a 400
    naming `name` for an unusable `?name=`."""
    await serve_viewer(websocket, media=False)


async def media_socket(websocket: WebSocket) -> None:
    """The WebSocket transport: the signalling session with the video, sound and input on the socket."""
    await serve_viewer(websocket, media=True)


async def serve_viewer(websocket: WebSocket, media: bool) -> None:
    manager = stream_of(websocket)
    given = websocket.query_params.get("name")
    try:
        manager.require_config()
        name = viewer_name(given) if given is not None else None
    except DomainError as exc:
        await refuse_websocket(websocket, exc)
        return
    await websocket.accept()
    link = WebSocketLink(websocket)
    await manager.serve(link, access_of(websocket), name, media_link=link if media else None)


OPERATIONS = [
    Operation("POST", "/v1/desktop/stream/start", start,
              "Arm the live view (WebRTC, in-process; idempotent while active)",
              response=DesktopStreamStatusResponse, invalid_code=ProblemCode.DESKTOP_INVALID_ACTION,
              errors=(400, 409, 502, 503), tags=("stream",)),
    Operation("POST", "/v1/desktop/stream/stop", stop, "Stop the live view and disconnect every viewer",
              response=DesktopStreamStatusResponse, tags=("stream",)),
    Operation("GET", "/v1/desktop/stream/status", status, "Whether the live view is on, its viewers and rates",
              response=DesktopStreamStatusResponse, tags=("stream",)),
    Operation("GET", SIGNALING_PATH, upgrade_required,
              "Live-view signalling over a WebSocket (neko v3 events; ?access_token= for browsers, ?name= the "
              "viewer's name; docs/control.md)",
              upgrade=True, errors=(400, 409), tags=("stream",)),
    Operation("GET", MEDIA_SOCKET_PATH, upgrade_required,
              "The live view over one WebSocket on this port, for viewers UDP does not reach: H.264 (or JPEG) and "
              "Opus as binary messages, input and control as on the signalling socket (docs/streaming.md)",
              upgrade=True, errors=(400, 409), tags=("stream",), operation_id="stream_websocket"),
]

WEBSOCKET_ROUTES = [WebSocketRoute(SIGNALING_PATH, signaling), WebSocketRoute(MEDIA_SOCKET_PATH, media_socket)]
