"""The command socket's endpoint: JSON messages read as the HTTP requests they stand for, each run through the
app's checks and operation and answered in order (docs/websocket.md has the protocol; api/commands/connection.py
runs them).

What this saves over HTTP is the connection's work: no HTTP parsing, no per-request connection bookkeeping in the
client, and a client may send many messages without waiting (they run one after another, in order, as a person's
input would).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.routing import WebSocketRoute, compile_path
from starlette.websockets import WebSocket

from api.commands.connection import Connection
from api.commands.direct import DirectRun
from api.commands.messages import COMPACT_JSON, Item, shape_error
from api.commands.names import STREAMING_MEDIA_TYPES, CommandTable
from api.http.desktop_paths import SINGLE_PREFIX, desktop_path, many_path
from api.http.operations import Operation
from api.http.problems import upgrade_required
from desktop.core.errors import DomainError, InvalidRequest, NotFound

COMMAND_SOCKET_PATH = SINGLE_PREFIX + "/ws"
LIST_OP = "ops"
"""The one op that is not an operation: it answers the list of ops (`CommandTable.listing`)."""
MESSAGE_HEADERS = frozenset({"accept", "prefer", "range", "if-range", "content-type"})
"""Request headers a message may set: those an operation reads. The credentials, Host and Origin are the
handshake's, checked once by the middleware and again on every message."""

OPERATIONS = [
    Operation("GET", COMMAND_SOCKET_PATH, upgrade_required,
              "Every operation as JSON messages on one WebSocket (`{\"id\": 1, \"op\": \"mouse.click\", \"body\": "
              "{...}}`), answered in order with the HTTP status, headers and body; `{\"op\": \"ops\"}` lists the "
              "ops. Images come as a JSON header then one binary frame (docs/websocket.md)", upgrade=True,
              tags=("websocket",)),
]


class Streams:
    """Whether a path is one of the table's endless streams (events), which one message cannot answer."""

    def __init__(self, operations: list[Operation]) -> None:
        paths = [op.path for op in operations if op.media_type in STREAMING_MEDIA_TYPES]
        paths += [many for path in paths if (many := many_path(path)) is not None]
        self.patterns = [compile_path(path)[0] for path in paths]

    def match(self, path: str) -> bool:
        return any(pattern.match(path) for pattern in self.patterns)


def query_string(query: Any) -> str:
    """A message's `query` object as a query string: booleans as `true`/`false`, a list as repeated keys."""
    if not isinstance(query, dict):
        raise shape_error("query", "an object of parameters")
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, bool):
                pairs.append((key, "true" if one else "false"))
            elif isinstance(one, (str, int, float)):
                pairs.append((key, str(one)))
            elif one is not None:
                raise shape_error(f"query.{key}", "a string, number or boolean")
    return urlencode(pairs)


class CommandSocket:
    """The endpoint of `/v1/desktop/ws` and `/v1/desktops/{desktop_id}/ws`."""

    def __init__(self, operations: list[Operation]) -> None:
        self.table = CommandTable(operations)
        self.streams = Streams(operations)
        self.direct: DirectRun | None = None
        """Set by the app (api/app.py) once its request gate is built: JSON operations then skip the ASGI stack."""

    def routes(self) -> list[WebSocketRoute]:
        """The `/v1/desktop/ws` route; api/app.py copies it under every desktop as for the other sockets."""
        return [WebSocketRoute(COMMAND_SOCKET_PATH, self.serve)]

    async def serve(self, websocket: WebSocket) -> None:
        await websocket.accept()
        await Connection(self, websocket).run()

    def read(self, message: dict[str, Any], desktop_id: str | None) -> Item:
        """The request a message stands for; its problem (a bad shape, an unknown op) as the item's error."""
        item = Item(message.get("id") if isinstance(message, dict) else None)
        try:
            self._read(message, item, desktop_id)
        except DomainError as exc:
            item.error = exc
        return item

    def _read(self, message: Any, item: Item, desktop_id: str | None) -> None:
        if not isinstance(message, dict):
            raise shape_error("message", "a JSON object")
        if isinstance(item.id, bool) or not isinstance(item.id, (int, str)):
            raise shape_error("id", "field required: a number or string the answer repeats")
        op = message.get("op")
        if op == LIST_OP:
            item.listing = True
            return
        if op is not None:
            if not isinstance(op, str):
                raise shape_error("op", "an op name")
            command = self.table.get(op)
            if command is None:
                raise NotFound("op", op, f"no op {op!r}; {{\"op\": \"ops\"}} lists them")
            params = message.get("path", {})
            if not isinstance(params, dict):
                raise shape_error("path", "an object of path parameters")
            item.method, item.target = command.method, command.target(params)
        else:
            method, target = message.get("method"), message.get("target")
            if not isinstance(method, str) or not isinstance(target, str) or not target.startswith("/"):
                raise shape_error("op", "field required: an op, or a method and a target path")
            item.method, item.target = method.upper(), target
        if "query" in message:
            query = query_string(message["query"])
            if query:
                item.target += ("&" if "?" in item.target else "?") + query
        if desktop_id is not None:
            item.target = self.within(item.target, desktop_id)
        headers = message.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise shape_error("headers", "an object of header strings")
        item.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
                        if k.lower() in MESSAGE_HEADERS]
        if message.get("body") is not None:
            item.body = COMPACT_JSON.encode(message["body"]).encode()
            if not any(name == b"content-type" for name, _ in item.headers):
                item.headers.append((b"content-type", b"application/json"))
        if op is None:  # an op is never a stream (the table leaves them out), a target may be
            path = unquote(item.target.partition("?")[0])
            if self.streams.match(path):
                raise InvalidRequest(f"{path} streams without end: read it over HTTP or its own WebSocket")

    @staticmethod
    def within(target: str, desktop_id: str) -> str:
        """A target on a desktop's socket: `/v1/desktop/...` is that desktop; any other desktop, or the
        server's own paths, are refused (that socket drives its desktop only)."""
        if target == SINGLE_PREFIX or target.startswith((SINGLE_PREFIX + "/", SINGLE_PREFIX + "?")):
            target = f"/v1/desktops/{quote(desktop_id, safe='')}" + target.removeprefix(SINGLE_PREFIX)
        about = desktop_path(unquote(target.partition("?")[0]))
        if about is None or about[0] != desktop_id:
            raise InvalidRequest(f"this socket drives desktop {desktop_id!r} only: {target} is not one of its paths",
                                 desktopId=desktop_id)
        return target
