"""The command socket's endpoint: read JSON messages, run each through the app as the HTTP request it stands for,
answer in order (docs/websocket.md has the protocol).

Each message becomes an ASGI `http` scope, handed to the whole app (`scope["app"]`): its middleware (the token
and its scope, the Host and Origin checks, the request metrics), its router (a switched-off API's 403, a 404, a
405) and the operation's own parsing, approval guard and handler. So an answer is the HTTP answer, status and
headers and body, and nothing here knows any one operation. What this saves over HTTP is the connection's work:
no HTTP parsing, no per-request connection bookkeeping in the client, and a client may send many messages
without waiting (they run one after another, in order, as a person's input would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.routing import WebSocketRoute, compile_path
from starlette.types import ASGIApp, Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from api.commands.direct import DirectRun
from api.commands.names import STREAMING_MEDIA_TYPES, CommandTable
from api.http.desktop_paths import SINGLE_PREFIX, desktop_path, many_path
from api.http.operations import Operation
from api.http.problems import PROBLEM_MEDIA_TYPE, problem_document, upgrade_required
from api.http.router import IndexedRouter
from api.middleware.auth import presented_token
from desktop.core.errors import DomainError, FieldError, InvalidRequest, NotFound

logger = logging.getLogger("sandbox_desktop.api")

COMMAND_SOCKET_PATH = SINGLE_PREFIX + "/ws"
LIST_OP = "ops"
"""The one op that is not an operation: it answers the list of ops (`CommandTable.listing`)."""
MAX_QUEUED = 256
"""Messages read ahead of the one running; past this the socket is not read, so a client that sends without
end is slowed by TCP rather than growing the server's memory."""
MESSAGE_HEADERS = frozenset({"accept", "prefer", "range", "if-range", "content-type"})
"""Request headers a message may set: those an operation reads. The credentials, Host and Origin are the
handshake's, checked once by the middleware and again on every message."""
HANDSHAKE_ONLY = frozenset({b"connection", b"upgrade", b"authorization", b"content-length", b"content-type",
                            b"transfer-encoding"})
JSON_TYPES = ("application/json", PROBLEM_MEDIA_TYPE)
ANSWER_SKIPS = frozenset({"content-length", "vary"})
"""Response headers an answer leaves out: its frame has its length, and there is no HTTP cache to vary."""

OPERATIONS = [
    Operation("GET", COMMAND_SOCKET_PATH, upgrade_required,
              "Every operation as JSON messages on one WebSocket (`{\"id\": 1, \"op\": \"mouse.click\", \"body\": "
              "{...}}`), answered in order with the HTTP status, headers and body; `{\"op\": \"ops\"}` lists the "
              "ops. Images come as a JSON header then one binary frame (docs/websocket.md)", upgrade=True,
              tags=("websocket",)),
]


@dataclass
class Item:
    """One message read: its id and the request it stands for, or the problem that refuses it."""

    id: Any
    method: str = "GET"
    target: str = "/"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    error: DomainError | None = None
    listing: bool = False


class Streams:
    """Whether a path is one of the table's endless streams (events), which one message cannot answer."""

    def __init__(self, operations: list[Operation]) -> None:
        paths = [op.path for op in operations if op.media_type in STREAMING_MEDIA_TYPES]
        paths += [many for path in paths if (many := many_path(path)) is not None]
        self.patterns = [compile_path(path)[0] for path in paths]

    def match(self, path: str) -> bool:
        return any(pattern.match(path) for pattern in self.patterns)


def shape_error(field_name: str, message: str) -> FieldError:
    return FieldError([{"location": "message", "field": field_name, "message": message, "type": "message_shape"}],
                      wrong_shape=True)


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
            item.body = json.dumps(message["body"], separators=(",", ":"), ensure_ascii=False).encode()
            if not any(name == b"content-type" for name, _ in item.headers):
                item.headers.append((b"content-type", b"application/json"))
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


class Connection:
    """One client's socket: a reader that queues messages, and one worker that answers them in order."""

    def __init__(self, commands: CommandSocket, websocket: WebSocket) -> None:
        self.commands = commands
        self.websocket = websocket
        self.desktop_id: str | None = websocket.path_params.get("desktop_id")
        self.queue: asyncio.Queue[Item] = asyncio.Queue(MAX_QUEUED)
        self.closed = asyncio.Event()
        scope = websocket.scope
        token = presented_token(scope)
        self.base_headers = [(k, v) for k, v in scope["headers"] if k not in HANDSHAKE_ONLY and
                             not k.startswith(b"sec-websocket-")]
        if token is not None:  # a browser's `?access_token=` too: each message is checked with it
            self.base_headers.append((b"authorization", b"Bearer " + token.encode("latin-1")))
        self.base_scope = {"type": "http", "asgi": scope.get("asgi", {"version": "3.0"}), "http_version": "1.1",
                           "scheme": "https" if scope.get("scheme") == "wss" else "http",
                           "root_path": scope.get("root_path", ""), "client": scope.get("client"),
                           "server": scope.get("server")}
        self.app: ASGIApp = scope["app"]
        self.state = scope.get("state")
        router = scope.get("router")
        self.router = router if isinstance(router, IndexedRouter) and commands.direct is not None else None

    async def run(self) -> None:
        reader, worker = asyncio.create_task(self.read()), asyncio.create_task(self.work())
        try:
            # The reader ends when the client leaves; the worker only when sending fails (it left) or on a bug.
            await asyncio.wait((reader, worker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.closed.set()  # a running operation that watches for its client leaving sees it go
            for task in (reader, worker):
                task.cancel()
            for outcome in await asyncio.gather(reader, worker, return_exceptions=True):
                if isinstance(outcome, Exception) and not isinstance(outcome, (WebSocketDisconnect, OSError)):
                    logger.error("command socket failed", exc_info=outcome)
                    with contextlib.suppress(Exception):
                        await self.websocket.close(1011, "internal error")

    async def read(self) -> None:
        while True:
            try:
                frame = await self.websocket.receive()
            except RuntimeError:  # received after the disconnect (the worker saw it first)
                return
            if frame["type"] == "websocket.disconnect":
                return
            text = frame.get("text")
            if text is None:
                item = Item(None, error=shape_error("message", "a JSON text frame (a binary frame only follows "
                                                               "a message with \"binary\": true)"))
            else:
                try:
                    message = json.loads(text)
                except ValueError as exc:
                    item = Item(None, error=FieldError([{"location": "message", "field": "message",
                                                         "message": f"malformed JSON: {exc}",
                                                         "type": "json_invalid"}]))
                else:
                    item = self.commands.read(message, self.desktop_id)
                    if isinstance(message, dict) and message.get("binary") is True:
                        # The raw body (a file's bytes) is the next frame, as an answer's image is.
                        body = await self.websocket.receive()
                        if body["type"] == "websocket.disconnect":
                            return
                        if body.get("bytes") is None and item.error is None:
                            item.error = shape_error("binary", "the body's binary frame must follow the message")
                        item.body = body.get("bytes") or b""
            await self.queue.put(item)

    async def work(self) -> None:
        while True:
            item = await self.queue.get()
            if item.listing:
                await self.websocket.send_text(answer_text(item.id, 200, {"content-type": "application/json"},
                                                           json.dumps(self.commands.table.listing())))
                continue
            if item.error is not None:
                await self.send_error(item.id, item.error)
                continue
            try:
                status, headers, body = await self.dispatch(item)
            except Exception as exc:  # a bug below: answered as the HTTP request's would be, the socket kept
                logger.exception("command %s %s failed", item.method, item.target)
                await self.send_error(item.id, DomainError(f"internal error: {exc}"))
                continue
            await self.answer(item.id, status, headers, body)

    async def send_error(self, ident: Any, error: DomainError) -> None:
        document = problem_document(error)
        await self.websocket.send_text(answer_text(ident, document["status"], {"content-type": PROBLEM_MEDIA_TYPE},
                                                   json.dumps(document, ensure_ascii=False)))

    async def answer(self, ident: Any, status: int, headers: dict[str, str], body: bytes) -> None:
        """JSON inline in the answer; any other body (an image, a file) as one binary frame right after it."""
        media_type = headers.get("content-type", "").split(";")[0].strip()
        if not body:
            await self.websocket.send_text(answer_text(ident, status, headers, None))
        elif media_type in JSON_TYPES or media_type.endswith("+json"):
            await self.websocket.send_text(answer_text(ident, status, headers, body.decode("utf-8", "replace")))
        else:
            await self.websocket.send_text(answer_text(ident, status, headers, None, binary=len(body)))
            await self.websocket.send_bytes(body)

    async def dispatch(self, item: Item) -> tuple[int, dict[str, str], bytes]:
        """Run the item through the app as an HTTP request; its status, headers and whole body."""
        raw_path, _, query = item.target.partition("?")
        headers = [*self.base_headers, *item.headers]
        if item.body:
            headers.append((b"content-length", str(len(item.body)).encode()))
        scope = {**self.base_scope, "method": item.method, "path": unquote(raw_path),
                 "raw_path": raw_path.encode("latin-1", "replace"), "query_string": query.encode("latin-1", "replace"),
                 "headers": headers}
        if self.state is not None:
            scope["state"] = dict(self.state)
        direct = self.commands.direct
        found = direct.found(self.router, scope) if direct is not None and self.router is not None else None
        status = 500
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": item.body, "more_body": False}
            await self.closed.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", []):
                    key = name.decode("latin-1").lower()
                    if key not in ANSWER_SKIPS:
                        text = value.decode("latin-1")
                        answer_headers[key] = f"{answer_headers[key]}, {text}" if key in answer_headers else text
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        if found is not None and direct is not None:
            scope["app"], scope["router"] = self.app, self.router
            await direct.run(found, scope, receive, send, item.body)
        else:
            await self.app(scope, receive, send)
        return status, answer_headers, b"".join(chunks)


def answer_text(ident: Any, status: int, headers: dict[str, str], body: str | None, binary: int | None = None) -> str:
    """An answer's text frame; a JSON body goes in as the server wrote it, not parsed and written again."""
    head: dict[str, Any] = {"id": ident, "status": status, "headers": headers}
    if binary is not None:
        head["binary"] = binary
    text = json.dumps(head, separators=(",", ":"), ensure_ascii=False)
    return text if body is None else text[:-1] + ',"body":' + body + "}"
