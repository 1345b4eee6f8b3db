"""The command WebSocket as an httpx transport (docs/websocket.md): `Client(url, transport="websocket")` sends each
request as one message on `/v1/desktop/ws` and turns its answer back into an `httpx.Response`, so every method
parses it exactly as over HTTP: the same return types, the same `ApiError`s.

A message names its request by method and target (`{"id": 7, "method": "POST", "target": "/v1/desktop/mouse/click",
"body": {...}}`), which the server accepts besides op names: the transport sees httpx requests, not operations.
An endless event stream (`events()`, sent with `Accept: text/event-stream`) is the one request the socket cannot
answer; it goes over HTTP, as without this transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from typing import Any
from urllib.parse import urlencode

import httpx

try:
    from websockets.asyncio.client import ClientConnection as AsyncConnection
    from websockets.asyncio.client import connect as async_connect
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import ClientConnection, connect
except ImportError as exc:  # an optional dependency: the client's own are httpx and pydantic only
    raise ImportError("transport=\"websocket\" needs the websockets package: "
                      "pip install 'sandbox-desktop-client[websocket]'") from exc

SOCKET_PATH = "/v1/desktop/ws"
FORWARDED = ("accept", "prefer", "range", "if-range", "content-type")
"""The request headers a message carries: those an operation reads (the server ignores any other)."""
STREAM = "text/event-stream"


def socket_url(url: str) -> str:
    base = url.rstrip("/")
    return ("wss" + base[5:] if base.startswith("https") else "ws" + base.removeprefix("http")) + SOCKET_PATH


def message(ident: int, method: str, target: str, headers: dict[str, str], json_body: str | None,
            content: bytes | None) -> tuple[str, bytes | None]:
    """A request's text frame and, for a raw body (a file's bytes), the binary frame after it."""
    members: dict[str, Any] = {"id": ident, "method": method, "target": target}
    if headers:
        members["headers"] = headers
    if content:
        members["binary"] = True
    text = json.dumps(members, separators=(",", ":"), ensure_ascii=False)
    if json_body is not None:  # JSON already: put in as it is, not parsed and written again
        return text[:-1] + ',"body":' + json_body + "}", None
    return text, content or None


def encode(request: httpx.Request, ident: int, prefix: str) -> tuple[str, bytes | None]:
    """The message for an httpx request."""
    target = request.url.raw_path.decode("ascii")[len(prefix):] or "/"
    headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
    if headers.get("accept") == "*/*":  # httpx's default, which no operation reads
        del headers["accept"]
    content = request.content
    if content and headers.get("content-type", "").split(";")[0] == "application/json":
        del headers["content-type"]
        return message(ident, request.method, target, headers, content.decode(), None)
    return message(ident, request.method, target, headers, None, content)


def call_target(path: str, params: dict[str, Any]) -> str:
    """A `Call`'s path and query string, each value as httpx writes it (`true`, repeated keys for a list)."""
    if not params:
        return path
    pairs = [(key, one) for key, value in params.items() for one in (value if isinstance(value, list) else [value])]
    return path + "?" + urlencode([(key, "true" if one is True else "false" if one is False else
                                    "" if one is None else str(one)) for key, one in pairs])


def split_answer(text: str) -> tuple[dict[str, Any], bytes | None]:
    """An answer's members and its JSON body's text. The server writes `body` last, so its text is cut out
    rather than parsed here and written again for httpx: `,"body":` cannot occur earlier, where every quote
    inside a string is escaped."""
    at = text.find(',"body":')
    if at < 0:
        return json.loads(text), None
    return json.loads(text[:at] + "}"), text[at + 8:-1].encode()


def decode(answer: dict[str, Any], content: bytes | None, request: httpx.Request | None) -> httpx.Response:
    return httpx.Response(answer["status"], headers=answer.get("headers", {}), content=content or b"",
                          request=request)


def call_message(ident: int, method: str, path: str, params: dict[str, Any], body: Any,
                 content: bytes | None) -> tuple[str, bytes | None]:
    """The message for a client's `Call` (_base.py): what `send_call` sends, without an httpx request."""
    json_body = None if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return message(ident, method, call_target(path, params), {}, json_body, content)


def read_timeout(request: httpx.Request) -> float | None:
    timeout = request.extensions.get("timeout", {})
    return timeout.get("read") if isinstance(timeout, dict) else None




class AsyncWebSocketTransport(httpx.AsyncBaseTransport):
    """One socket per client, opened at the first request: any number of requests in flight on it, each answered
    by its id (the server answers in order). `send_call` is the clients' own way in, past httpx's request
    machinery (most of a call's client-side CPU); other requests come through httpx as to any transport."""

    def __init__(self, url: str, token: str | None, **http_options: Any) -> None:
        self._url = socket_url(url)
        self._prefix = httpx.URL(url).raw_path.decode("ascii").rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncHTTPTransport(**http_options)
        self._ids = itertools.count(1)
        self._socket: AsyncConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[tuple[dict[str, Any], bytes | None]]] = {}
        self._opening = asyncio.Lock()
        self._sending = asyncio.Lock()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("accept") == STREAM:
            return await self._http.handle_async_request(request)
        await request.aread()
        ident = next(self._ids)
        answer, content = await self._exchange(ident, *encode(request, ident, self._prefix), read_timeout(request),
                                               request)
        return decode(answer, content, request)

    async def send_call(self, method: str, path: str, params: dict[str, Any], body: Any, content: bytes | None,
                        timeout: float | None) -> httpx.Response:
        """A client's call (its method, path, query, JSON or raw body), answered as an `httpx.Response`."""
        ident = next(self._ids)
        answer, found = await self._exchange(ident, *call_message(ident, method, path, params, body, content),
                                             timeout, None)
        return decode(answer, found, None)

    async def _exchange(self, ident: int, text: str, binary: bytes | None, timeout: float | None,
                        request: httpx.Request | None) -> tuple[dict[str, Any], bytes | None]:
        socket = await self._open(request)
        answer: asyncio.Future[tuple[dict[str, Any], bytes | None]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = answer
        try:
            async with self._sending:  # a body's binary frame must follow its own message
                await socket.send(text)
                if binary is not None:
                    await socket.send(binary)
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer to message {ident} in {timeout} s", request=request) from exc
        except WebSocketException as exc:
            raise httpx.ReadError(f"command socket: {exc}", request=request) from exc
        finally:
            self._waiting.pop(ident, None)

    async def _open(self, request: httpx.Request | None) -> AsyncConnection:
        async with self._opening:
            if self._socket is None:
                try:
                    self._socket = await async_connect(self._url, additional_headers=self._headers, max_size=None,
                                                       compression=None)
                except (OSError, WebSocketException) as exc:
                    raise httpx.ConnectError(f"command socket {self._url}: {exc}", request=request) from exc
                self._reader = asyncio.create_task(self._read(self._socket))
            return self._socket

    async def _read(self, socket: AsyncConnection) -> None:
        """Answers to their waiting requests; when the socket ends, each still waiting fails (and the next
        request opens a new one)."""
        error: Exception = httpx.ReadError("the command socket closed")
        try:
            while True:
                frame = await socket.recv()
                answer, content = split_answer(frame if isinstance(frame, str) else frame.decode())
                if answer.get("binary") is not None:
                    binary = await socket.recv()
                    content = binary if isinstance(binary, bytes) else binary.encode()
                waiting = self._waiting.get(answer.get("id", 0))
                if waiting is not None and not waiting.done():
                    waiting.set_result((answer, content))
        except (WebSocketException, ValueError, OSError) as exc:
            error = httpx.ReadError(f"the command socket closed: {exc}")
        finally:
            if self._socket is socket:
                self._socket = None
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(error)

    async def aclose(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        await self._http.aclose()


class WebSocketTransport(httpx.BaseTransport):
    """`AsyncWebSocketTransport` for the sync client: one request at a time per socket (threads take turns)."""

    def __init__(self, url: str, token: str | None, **http_options: Any) -> None:
        self._url = socket_url(url)
        self._prefix = httpx.URL(url).raw_path.decode("ascii").rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.HTTPTransport(**http_options)
        self._ids = itertools.count(1)
        self._socket: ClientConnection | None = None
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("accept") == STREAM:
            return self._http.handle_request(request)
        request.read()
        ident = next(self._ids)
        answer, content = self._exchange(ident, *encode(request, ident, self._prefix), read_timeout(request),
                                         request)
        return decode(answer, content, request)

    def send_call(self, method: str, path: str, params: dict[str, Any], body: Any, content: bytes | None,
                  timeout: float | None) -> httpx.Response:
        """A client's call (its method, path, query, JSON or raw body), answered as an `httpx.Response`."""
        ident = next(self._ids)
        answer, found = self._exchange(ident, *call_message(ident, method, path, params, body, content), timeout,
                                       None)
        return decode(answer, found, None)

    def _exchange(self, ident: int, text: str, binary: bytes | None, timeout: float | None,
                  request: httpx.Request | None) -> tuple[dict[str, Any], bytes | None]:
        with self._lock:
            socket = self._open(request)
            try:
                socket.send(text)
                if binary is not None:
                    socket.send(binary)
                while True:  # answers of requests that timed out before come first: skipped
                    frame = socket.recv(timeout)
                    answer, content = split_answer(frame if isinstance(frame, str) else frame.decode())
                    if answer.get("binary") is not None:
                        image = socket.recv(timeout)
                        content = image if isinstance(image, bytes) else image.encode()
                    if answer.get("id") == ident:
                        return answer, content
            except TimeoutError as exc:
                raise httpx.ReadTimeout(f"no answer to message {ident} in {timeout} s", request=request) from exc
            except (WebSocketException, OSError) as exc:
                self._socket = None
                raise httpx.ReadError(f"command socket: {exc}", request=request) from exc

    def _open(self, request: httpx.Request | None) -> ClientConnection:
        if self._socket is None:
            try:
                # As a context manager: the one way every websockets version from 12 supports without a warning.
                self._socket = self._stack.enter_context(connect(
                    self._url, additional_headers=self._headers, max_size=None, compression=None))
            except (OSError, WebSocketException) as exc:
                raise httpx.ConnectError(f"command socket {self._url}: {exc}", request=request) from exc
        return self._socket

    def close(self) -> None:
        with self._lock:
            self._stack.close()
            self._socket = None
        self._http.close()
