"""One client's command socket: its messages read, run in order and answered (docs/websocket.md).

Each message becomes an ASGI `http` scope. An operation that takes and answers JSON runs straight through the
request gate and its endpoint (api/commands/direct.py); any other request is handed to the whole app
(`scope["app"]`): its middleware (the token and its scope, the Host and Origin checks, the request metrics), its
router (a switched-off API's 403, a 404, a 405) and the operation's own parsing, approval guard and handler. Either
way an answer is the HTTP answer, status and headers and body, and nothing here knows any one operation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from typing import Any, Protocol
from urllib.parse import unquote

from starlette.types import ASGIApp, Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from api.commands.direct import DirectRun
from api.commands.messages import COMPACT_JSON, Item, shape_error
from api.commands.names import CommandTable
from api.http.problems import PROBLEM_MEDIA_TYPE, problem_document
from api.http.router import IndexedRouter
from api.middleware.auth import presented_token
from desktop.core.errors import DomainError, FieldError

logger = logging.getLogger("sandbox_desktop.api")

MAX_QUEUED = 256
"""Messages read ahead of the one running; past this the socket is not read, so a client that sends without
end is slowed by TCP rather than growing the server's memory."""
HANDSHAKE_ONLY = frozenset({b"connection", b"upgrade", b"authorization", b"content-length", b"content-type",
                            b"transfer-encoding"})
JSON_TYPES = ("application/json", PROBLEM_MEDIA_TYPE)
ANSWER_SKIPS = frozenset({"content-length", "vary"})
"""Response headers an answer leaves out: its frame has its length, and there is no HTTP cache to vary."""


class Commands(Protocol):
    """What a connection needs of the command socket (api/commands/socket.py)."""

    @property
    def table(self) -> CommandTable: ...

    @property
    def direct(self) -> DirectRun | None: ...

    def read(self, message: dict[str, Any], desktop_id: str | None) -> Item: ...


class Connection:
    """One client's socket: two tasks that take turns reading its messages and answering them in order."""

    def __init__(self, commands: Commands, websocket: WebSocket) -> None:
        self.commands = commands
        self.websocket = websocket
        self.desktop_id: str | None = websocket.path_params.get("desktop_id")
        self.items: deque[Item] = deque()
        """Messages read while another one runs, in order."""
        self.reading = False
        self.running = False
        self.turn = asyncio.Event()
        """Set when the tasks' roles may change: a message done, the reading handed over."""
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
        tasks = (asyncio.create_task(self.pump()), asyncio.create_task(self.pump()))
        try:
            # A task ends when it reads the client leaving, or when sending fails (it left) or on a bug.
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.closed.set()  # a running operation that watches for its client leaving sees it go
            for task in tasks:
                task.cancel()
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception) and not isinstance(outcome, (WebSocketDisconnect, OSError)):
                    logger.error("command socket failed", exc_info=outcome)
                    with contextlib.suppress(Exception):
                        await self.websocket.close(1011, "internal error")

    async def pump(self) -> None:
        """What each of the connection's two tasks does. A message read while none runs is run at once by the task
        that read it, and the other task takes over the reading: no hop from a reader to a worker before it starts
        (that hop was a turn of the event loop and two queue operations on each message). A message read while
        another runs is queued behind it (up to MAX_QUEUED), and whichever task is free next runs the first one
        queued. So messages are read ahead while one runs (a client leaving is seen at once), and run and answered
        one at a time, in the order read."""
        while True:
            if self.items and not self.running:
                await self.handle(self.items.popleft())
            elif not self.reading and len(self.items) < MAX_QUEUED:
                self.reading = True
                try:
                    item = await self.read()
                finally:
                    self.reading = False
                if item is None:
                    return  # the client left
                if self.running or self.items:
                    self.items.append(item)
                else:
                    self.turn.set()  # the other task reads on
                    await self.handle(item)
            else:  # the other task reads (or the queue is full while it runs one): wait for a change of roles
                self.turn.clear()
                await self.turn.wait()

    async def handle(self, item: Item) -> None:
        self.running = True
        try:
            await self.work(item)
        finally:
            self.running = False
            self.turn.set()

    async def read(self) -> Item | None:
        """The next message, None when the client has left."""
        try:
            frame = await self.websocket.receive()
        except RuntimeError:  # received after the disconnect (the other task saw it first)
            return None
        if frame["type"] == "websocket.disconnect":
            return None
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
                        return None
                    if body.get("bytes") is None and item.error is None:
                        item.error = shape_error("binary", "the body's binary frame must follow the message")
                    item.body = body.get("bytes") or b""
        return item

    async def work(self, item: Item) -> None:
        """Run one message and send its answer."""
        if item.listing:
            await self.websocket.send_text(answer_text(item.id, 200, {"content-type": "application/json"},
                                                       json.dumps(self.commands.table.listing())))
            return
        if item.error is not None:
            await self.send_error(item.id, item.error)
            return
        try:
            status, headers, body = await self.dispatch(item)
        except Exception as exc:  # a bug below: answered as the HTTP request's would be, the socket kept
            logger.exception("command %s %s failed", item.method, item.target)
            await self.send_error(item.id, DomainError(f"internal error: {exc}"))
            return
        await self.answer(item.id, status, headers, body)

    async def send_error(self, ident: Any, error: DomainError) -> None:
        document = problem_document(error)
        await self.websocket.send_text(answer_text(ident, document["status"], {"content-type": PROBLEM_MEDIA_TYPE},
                                                   COMPACT_JSON.encode(document)))

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
    text = COMPACT_JSON.encode(head)
    return text if body is None else text[:-1] + ',"body":' + body + "}"
