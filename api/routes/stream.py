"""`/v1/desktop/stream`: the live view's lifecycle and its signalling WebSocket (docs/streaming.md)."""

from __future__ import annotations

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
    """The signalling session's view of a Starlette WebSocket: text in, text out, close."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def send(self, text: str) -> None:
        await self.websocket.send_text(text)

    async def receive(self) -> str | None:
        """The next text message (binary frames are not part of the protocol); None once closed."""
        for _ in range(1_000_000):  # skips at most this many binary frames in a row
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
    manager = stream_of(websocket)
    given = websocket.query_params.get("name")
    try:
        manager.require_config()
        name = viewer_name(given) if given is not None else None
    except DomainError as exc:
        await refuse_websocket(websocket, exc)
        return
    await websocket.accept()
    await manager.serve(WebSocketLink(websocket), access_of(websocket), name)


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
]

WEBSOCKET_ROUTES = [WebSocketRoute(SIGNALING_PATH, signaling)]
