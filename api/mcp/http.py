"""`/v1/mcp`: the tools of `sandbox-desktop mcp`, served by the server itself over MCP's streamable HTTP
transport, so an agent framework connects with a URL instead of starting a process (docs/mcp.md, "Over HTTP").

The tools are the stdio server's own (api/mcp/server.py `build_server`: same list, allow-list, schemas and
per-call timeout). They drive the server through its own HTTP API, in-process (api/mcp/transport.py): the
request goes through the same middleware and routes as one from `sandbox-desktop mcp` over the network, so
results and errors are the same, word for word; only the socket is skipped.

Importing this module imports neither the `mcp` SDK (it is optional, and takes a third of a second to import)
nor httpx and the client: the session manager starts at the first request to /v1/mcp and stops with the app's
lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import json
import logging
from collections.abc import AsyncIterator
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

import anyio
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http.problems import problem_body, problem_response
from api.mcp import server as mcp_server
from api.server.config import McpOptions

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/v1/mcp"
METHODS = ["GET", "POST", "DELETE"]
TIMEOUT_FLAG = "--mcp-timeout"
# What the endpoint needs of the SDK besides what the stdio server does; a partial install is as unusable as none.
MODULES = ("mcp", "mcp.types", "mcp.server.lowlevel", "mcp.server.streamable_http_manager")


def sdk_installed() -> bool:
    """Whether the `mcp` package is there, without importing it (the API document mentions /v1/mcp only then)."""
    return find_spec("mcp") is not None


class McpEndpoint:
    """The ASGI app at /v1/mcp: the SDK's session manager, started by the first request within the app's
    lifespan (`run`) and stopped when it ends, sessions and their calls in flight with it."""

    def __init__(self, options: McpOptions, token: str | None, port: int | None) -> None:
        self.options = options
        self.token = token
        # A loopback Host on the bound port: one every Host policy accepts (api/middleware/browser_guard.py).
        self.url = f"http://127.0.0.1:{port or 80}"
        self._app: ASGIApp | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._host: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            manager = await self._started()
        except ImportError as e:
            body = problem_body(501, "mcp_unavailable", "MCP Unavailable", f"{PATH} needs the mcp package ({e}): "
                                "pip install 'sandbox-desktop[mcp]'", "mcp_unavailable")
            await problem_response(body)(scope, receive, send)
            return
        if manager is None:
            body = problem_body(503, "mcp_unavailable", "MCP Unavailable", "the server is not running (starting "
                                "or shutting down)", "mcp_unavailable")
            await problem_response(body)(scope, receive, send)
            return
        started = finished = False

        async def watched(message: Message) -> None:
            nonlocal started, finished
            started = started or message["type"] == "http.response.start"
            finished = finished or (message["type"] == "http.response.body" and not message.get("more_body"))
            await send(message)

        await manager.handle_request(scope, receive, watched)
        if started and not finished:
            # An event stream ended by the server's SIGTERM: the SDK's streams (sse-starlette) stop on uvicorn's
            # exit signal, so open sessions do not hold shutdown up, but leave the response unterminated.
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    @contextlib.asynccontextmanager
    async def run(self, app: ASGIApp) -> AsyncIterator[None]:
        """The app's lifespan: sessions may start within it; at its end every session is closed."""
        self._app, self._stop, self._lock = app, asyncio.Event(), asyncio.Lock()
        try:
            yield
        finally:
            self._app = None
            self._stop.set()
            if self._host is not None:
                await asyncio.gather(self._host, return_exceptions=True)
                self._host = None

    async def _started(self) -> StreamableHTTPSessionManager | None:
        if self._manager is not None or self._app is None:
            return self._manager
        async with self._lock:
            if self._manager is None and self._app is not None:
                for name in MODULES:
                    importlib.import_module(name)
                ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                # A context of its own: the sessions must not carry the first request's context variables.
                self._host = asyncio.create_task(self._serve(self._app, ready), context=contextvars.Context())
                await ready
        return self._manager

    async def _serve(self, app: ASGIApp, ready: asyncio.Future[None]) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from api.mcp.transport import InProcess  # httpx and the client: loaded with the first session
        from sandbox_desktop_client import AsyncClient

        quiet_sdk_logs()
        try:
            allowed = set(self.options.allow or mcp_server.TOOL_NAMES)
            tools = [t for t in mcp_server.TOOLS if t.name in allowed]
            # The server's own token ("" for none: never one a local server announced, docs/security.md).
            async with AsyncClient(self.url, token=self.token or "", transport=InProcess(app)) as client:
                server = mcp_server.build_server(client, tools, self.options.timeout, self.url,
                                                 timeout_flag=TIMEOUT_FLAG)
                manager = StreamableHTTPSessionManager(server)
                async with manager.run():
                    self._manager = manager
                    ready.set_result(None)
                    try:
                        await self._stop.wait()
                    finally:
                        self._manager = None
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e) if isinstance(e, Exception) else ready.cancel()
            raise


class QuietClosedStream(logging.Filter):
    """Drops the SDK's traceback for a session ended while its GET stream is open (every session of the official
    client, which keeps one open, at its DELETE): the SDK closes the stream its writer still reads. Nothing failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.msg == "Error in standalone SSE writer" and isinstance(error, anyio.ClosedResourceError))


def quiet_sdk_logs() -> None:
    sdk = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, QuietClosedStream) for f in sdk.filters):
        sdk.addFilter(QuietClosedStream())


def routes(endpoint: McpEndpoint) -> list[Route]:
    return [Route(PATH, endpoint, methods=METHODS)]


# The OpenAPI document: /v1/mcp is not an Operation (api/http/operations.py), whose endpoint answers one request with
# one response and whose errors are problem documents; the transport streams (SSE) and answers its own errors
# with JSON-RPC error bodies, as MCP clients expect. So its operations are written here, as they are.

JSONRPC = {"type": "object", "required": ["jsonrpc"], "description": "A JSON-RPC 2.0 message of the Model Context "
           "Protocol (https://modelcontextprotocol.io/specification/2025-06-18/basic/transports)", "properties": {
               "jsonrpc": {"type": "string", "enum": ["2.0"]}, "id": {"type": ["string", "integer"]},
               "method": {"type": "string"}, "params": {"type": "object"}, "result": {"type": "object"},
               "error": {"type": "object", "properties": {"code": {"type": "integer"},
                                                          "message": {"type": "string"}}}}}
SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def _rpc_error(why: str) -> dict[str, Any]:
    return {"description": why, "content": {"application/json": {"schema": JSONRPC}}}


def _operation(method: str, summary: str, responses: dict[str, Any], session: bool) -> dict[str, Any]:
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    header = {"name": "Mcp-Session-Id", "in": "header", "required": session, "schema": {"type": "string"},
              "description": "The session, from the `Mcp-Session-Id` header of the answer to `initialize`"}
    return {"summary": summary, "operationId": f"mcp{method.title()}", "tags": ["mcp"], "parameters": [header],
            "responses": {**responses,
                          "400": _rpc_error("Not a JSON-RPC message, or no session id where one is needed"),
                          "401": {"description": "Missing or wrong token", "content": problem},
                          "403": {"description": "A scoped token (`token_scope`), a foreign Origin "
                                  "(`origin_not_allowed`), or switched off (`--no-mcp-api`)", "content": problem},
                          "404": _rpc_error("No such session (ended, or idle for 30 minutes): initialize again"),
                          "405": _rpc_error("Not supported in this session"),
                          "406": _rpc_error("`Accept` lacks application/json or text/event-stream")},
            "security": [{"bearer": []}]}


def path_item() -> dict[str, Any]:
    post = _operation("POST", "MCP streamable HTTP: send a message (initialize first, without a session id)", {
        "200": {"description": "The answer, as JSON or as an event stream", "content": {
            "application/json": {"schema": JSONRPC}, **SSE}},
        "202": {"description": "A notification or response accepted"},
        "413": {"description": "Body over 4 MiB"},
        "415": _rpc_error("Not `Content-Type: application/json`")}, session=False)
    post["requestBody"] = {"required": True, "content": {"application/json": {"schema": JSONRPC}}}
    get = _operation("GET", "MCP streamable HTTP: the session's stream of server messages", {
        "200": {"description": "Events", "content": SSE},
        "409": _rpc_error("The session's stream is open already")}, session=True)
    delete = _operation("DELETE", "MCP streamable HTTP: end the session", {
        "200": {"description": "Ended"}}, session=True)
    return {"post": post, "get": get, "delete": delete}


def document(openapi: bytes) -> bytes:
    """The API document with /v1/mcp in it."""
    parsed = json.loads(openapi)
    parsed["paths"][PATH] = path_item()
    return json.dumps(parsed, indent=None).encode()
