"""`/v1/wall/ws`: every desktop the token may see, live and small, on one WebSocket (docs/inspector.md, "Wall").

One socket for the whole wall rather than one per desktop: a wall of N desktops is then one connection, one
reader and one writer per browser instead of N of each, and the tiles' list (states, tags, pending approvals)
travels on the same socket as the pictures, so a desktop appears and its pictures follow in order.
- text, server → viewer: `WallDesktops` when the socket opens and whenever a tile changes; the server reads its
  own registry and approval book every `POLL_S` (in process: no request, so watching keeps no desktop from
  idling out);
- binary, server → viewer: one message per picture, `ID_LENGTH` (one byte), the desktop's id (UTF-8), then a JPEG
  of `streaming/thumbnails.py` (encoded once per desktop for every wall that watches it).
The viewer sends nothing. A viewer that reads slowly skips pictures: only each desktop's newest one waits.
A token scoped to one desktop sees that desktop only (and cannot decide approvals).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from api.http.operations import Operation
from api.http.problems import upgrade_required
from api.middleware.auth import DESKTOP_SCOPE_KEY
from api.server.desktop_services import DesktopServices
from api.server.services import ServerServices, server_of
from sandbox_desktop_wire.approvals import ApprovalStatus
from sandbox_desktop_wire.wall import WALL_SOCKET_PATH, WallDesktops, WallTile
from streaming.thumbnails import Listener, Thumbnail

POLL_S = 1.0
"""How often the wall looks for desktops that came, went or changed (a dict walk, in process)."""
ID_LENGTH = struct.Struct("!B")
MAX_POLLS = 1 << 40
"""The loops' bound (decades of polls): they end when the viewer leaves."""


def tile(services: DesktopServices, server: ServerServices) -> WallTile:
    desktop = services.desktop
    options = desktop.options
    running = options is not None and desktop.display_name is not None
    pending = server.approvals.list(ApprovalStatus.PENDING, services.id)
    return WallTile(id=services.id, state=desktop.current_state(), tags=services.lifecycle.tags,
                    width=options.width if running and options else None,
                    height=options.height if running and options else None,
                    approvals=[r.to_wire() for r in pending])


def picture_message(desktop_id: str, picture: Thumbnail) -> bytes:
    name = desktop_id.encode()
    return ID_LENGTH.pack(len(name)) + name + picture.jpeg


class Wall:
    """One viewer's wall: follows the visible desktops, subscribes to their thumbnails, sends what changed."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.server = server_of(websocket)
        self.scope: str | None = websocket.scope.get(DESKTOP_SCOPE_KEY)
        self._watched: dict[str, DesktopServices] = {}
        self._listeners: dict[str, Listener] = {}
        self._pictures: dict[str, Thumbnail] = {}
        """Each desktop's newest picture not sent yet: a slow viewer skips the ones in between."""
        self._ready = asyncio.Event()
        self._last: str | None = None

    def visible(self) -> list[DesktopServices]:
        return [s for s in self.server.desktops.list() if self.scope is None or s.id == self.scope]

    async def run(self) -> None:
        sender = asyncio.ensure_future(self._send_pictures())
        gone = asyncio.ensure_future(self.websocket.receive())  # the viewer sends nothing: this tells it left
        try:
            for _ in range(MAX_POLLS):
                await self._update()
                await asyncio.wait((gone, sender), timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED)
                if gone.done() or sender.done():
                    return
        finally:
            gone.cancel()
            sender.cancel()
            await asyncio.gather(gone, sender, return_exceptions=True)
            for desktop_id in list(self._watched):
                await self._unwatch(desktop_id)

    async def _update(self) -> None:
        visible = self.visible()
        message = WallDesktops(desktops=[tile(s, self.server) for s in visible], can_decide=self.scope is None,
                               scope=self.scope).to_json().decode()
        if message != self._last:
            self._last = message
            await self.websocket.send_text(message)
        for services in visible:
            if self._watched.get(services.id) is not services:
                await self._unwatch(services.id)
                self._watch(services)
        for desktop_id in set(self._watched) - {s.id for s in visible}:
            await self._unwatch(desktop_id)

    def _watch(self, services: DesktopServices) -> None:
        desktop_id = services.id

        def on_picture(picture: Thumbnail) -> None:
            self._pictures[desktop_id] = picture
            self._ready.set()

        self._watched[desktop_id] = services
        self._listeners[desktop_id] = on_picture
        services.thumbnails.subscribe(on_picture)

    async def _unwatch(self, desktop_id: str) -> None:
        services = self._watched.pop(desktop_id, None)
        listener = self._listeners.pop(desktop_id, None)
        self._pictures.pop(desktop_id, None)
        if services is not None and listener is not None:
            await services.thumbnails.unsubscribe(listener)

    async def _send_pictures(self) -> None:
        for _ in range(MAX_POLLS):
            await self._ready.wait()
            self._ready.clear()
            while self._pictures:
                desktop_id = next(iter(self._pictures))
                picture = self._pictures.pop(desktop_id)
                await self.websocket.send_bytes(picture_message(desktop_id, picture))


async def wall_socket(websocket: WebSocket) -> None:
    await websocket.accept()
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # the viewer left mid-send
        await Wall(websocket).run()


OPERATIONS = [
    Operation("GET", WALL_SOCKET_PATH, upgrade_required,
              "Every desktop the token may see, live and small: the tiles' list (state, tags, pending approvals) "
              "as JSON text, and a JPEG thumbnail of each (2 a second at most, 320 px wide) as binary messages "
              "(docs/inspector.md, \"Wall\")",
              upgrade=True, tags=("desktops",), operation_id="wall_websocket"),
]

WEBSOCKET_ROUTES = [WebSocketRoute(WALL_SOCKET_PATH, wall_socket)]
