"""The one place the application is assembled: route tables, middleware, error handlers, lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from importlib import import_module
from pathlib import Path
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from api.approvals import gate as approval_policy
from api.commands.direct import DirectRun, ExceptionHandler
from api.commands.socket import OPERATIONS as COMMAND_OPERATIONS
from api.commands.socket import CommandSocket
from api.convert.sandbox import SandboxSettings
from api.http.desktop_paths import per_desktop, per_desktop_websockets
from api.http.openapi import build_openapi
from api.http.operations import Operation, OperationRoute
from api.http.problems import handle_domain_error, handle_http_exception, handle_unexpected, refuse_websocket
from api.http.router import IndexedRouter
from api.mcp import http as mcp_http
from api.middleware.auth import TokenCheck, tokens_match
from api.middleware.browser_guard import BrowserGuard, OriginPolicy
from api.middleware.cors import Cors
from api.middleware.gate import Gate, RequestGate
from api.middleware.request_metrics import RequestMetrics
from api.routes.events import WEBSOCKET_ROUTES as EVENTS_WEBSOCKETS
from api.routes.stream import WEBSOCKET_ROUTES as STREAM_WEBSOCKETS
from api.routes.terminal import DESKTOP_WEBSOCKET_ROUTES as DESKTOP_TERMINAL_WEBSOCKETS
from api.routes.terminal import WEBSOCKET_ROUTES as TERMINAL_WEBSOCKETS
from api.routes.ui import ROUTES as UI_ROUTES
from api.routes.wall import WEBSOCKET_ROUTES as WALL_WEBSOCKETS
from api.server.config import VERSION, ServerConfig
from api.server.desktop_services import DesktopServices, Lifecycle, build_desktop_services
from api.server.metrics import Metrics
from api.server.registry import DesktopRegistry
from api.server.scoped_tokens import TokenStore
from api.server.services import ServerServices
from desktop.accessibility import peer_socket
from desktop.core.dependencies import DependencyChecker
from desktop.core.errors import ApiDisabled, DomainError
from desktop.files import calls as file_calls
from desktop.lifecycle import options as options_module
from desktop.processes import ProcessManager
from desktop.sandbox.host import SandboxHost
from desktop.x11 import xlib_poll
from sandbox_desktop_client import local_servers
from sandbox_desktop_wire.enums import TokenRole
from streaming.coturn import LocalTurnServer

logger = logging.getLogger("sandbox_desktop.api")


# Route modules, in the order their operations appear in the OpenAPI document.
ROUTE_MODULES = (
    "api.routes.health",
    "api.routes.desktop",
    "api.routes.display",
    "api.routes.desktops",
    "api.routes.screenshot",
    "api.routes.mouse",
    "api.routes.keyboard",
    "api.routes.windows",
    "api.routes.window_capture",
    "api.routes.clipboard",
    "api.routes.files_into_apps",
    "api.routes.apps",
    "api.routes.recording",
    "api.routes.trajectory",
    "api.routes.stream",
    "api.routes.wall",
    "api.routes.approvals",
    "api.routes.processes",
    "api.routes.terminal",
    "api.routes.fs",
    "api.routes.actions",
    "api.routes.events",
    "api.routes.accessibility",
    "api.routes.vendors",
    "api.routes.metrics",
)

# APIs a deployment may switch off (`ServerConfig.disabled_apis`): name -> (path prefix, server flag).
OPTIONAL_APIS = {
    "processes": ("/v1/processes", "--no-process-api"),
    "fs": ("/v1/fs", "--no-file-api"),
    "mcp": (mcp_http.PATH, "--no-mcp-api"),
}
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def collect_operations(modules: Sequence[str] = ROUTE_MODULES) -> list[Operation]:
    """Every module's OPERATIONS table; a module not written yet is skipped with a log line."""
    operations: list[Operation] = []
    for name in modules:
        try:
            module = import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            logger.debug("route module %s not present", name)
            continue
        operations.extend(module.OPERATIONS)
    return operations


def build_routes(operations: Sequence[Operation]) -> list[Route]:
    """One Starlette route per path, dispatching on method (so a wrong method is a 405 with Allow)."""
    by_path: dict[str, dict[str, Operation]] = {}
    for op in operations:
        by_path.setdefault(op.path, {})[op.method] = op
    return [OperationRoute(path, methods) for path, methods in by_path.items()]


def is_disabled(path: str, disabled: frozenset[str]) -> bool:
    return any(path == OPTIONAL_APIS[name][0] or path.startswith(OPTIONAL_APIS[name][0] + "/") for name in disabled)


def disabled_routes(disabled: frozenset[str]) -> list[BaseRoute]:
    """Routes that answer every request (and WebSocket handshake) under a switched-off API with a 403 naming
    the flag."""
    routes: list[BaseRoute] = []
    for name in sorted(disabled):
        prefix, flag = OPTIONAL_APIS[name]
        error = ApiDisabled(f"{prefix} is disabled on this server (started with {flag})")

        async def refuse(request: Request, error: ApiDisabled = error) -> Response:
            raise error

        async def refuse_socket(websocket: WebSocket, error: ApiDisabled = error) -> None:
            await refuse_websocket(websocket, error)

        routes += [Route(prefix, refuse, methods=ALL_METHODS),
                   Route(prefix + "/{rest:path}", refuse, methods=ALL_METHODS),
                   WebSocketRoute(prefix + "/{rest:path}", refuse_socket)]
    return routes


def create_app(config: ServerConfig) -> Starlette:
    """Build the ASGI app: the server's services (docs/architecture.md), its routes and middleware."""
    # Its X connections work past descriptor 1023, where python-xlib's select() fails (desktop/x11/xlib_poll.py).
    xlib_poll.install()
    processes = ProcessManager()
    dependencies = DependencyChecker()
    default_state_dir = config.state_dir or options_module.default_state_dir()
    # Each desktop's sandbox (docs/security.md): the zygote, the network hub and the cgroups, opened with the server;
    # the zygote preloads the file calls a desktop's file API runs in its sandbox (api/server/file_scope.py), and
    # the connect that reaches an app's own accessibility socket from there (desktop/accessibility/peer_socket.py).
    sandboxes = SandboxHost(config.isolation, config.xauthority or default_state_dir / "xauthority",
                            server_ports=(config.hosts.port,) if config.hosts.port else (), shared=config.shared,
                            hidden=(default_state_dir,), preload=(file_calls.__name__, peer_socket.__name__),
                            uids=config.sandbox_uids)

    # The live view's TURN relay (docs/streaming-turn.md): servers run elsewhere, or coturn run by the lifespan.
    local_turn = (LocalTurnServer(config.local_turn, processes, default_state_dir / "turn")
                  if config.local_turn is not None else None)
    turn = local_turn.relays() if local_turn is not None else config.turn

    def build(desktop_id: str, state_dir: Path, lifecycle: Lifecycle) -> DesktopServices:
        return build_desktop_services(desktop_id, state_dir, processes, dependencies,
                                      config.webrtc_public_addresses, lifecycle, takeover=config.takeover,
                                      sandboxes=sandboxes, hidden=(default_state_dir,),
                                      guest_hosts=(config.bind_host, urlsplit(config.url).hostname or "127.0.0.1"),
                                      authorize=controls, turn=turn)

    def controls(desktop_id: str, given: str) -> bool:
        """Whether a token controls a desktop: the server's, or a `control` token scoped to it."""
        if config.token is not None and tokens_match(given, config.token):
            return True
        scoped = tokens.find(given)
        return scoped is not None and scoped.desktop_id == desktop_id and scoped.role is TokenRole.CONTROL

    tokens = TokenStore()
    desktops = DesktopRegistry(build, default_state_dir / "desktops", default_state_dir, config.max_desktops,
                               on_deleted=tokens.revoke)
    default = desktops.default
    # The default desktop is held to the server's policy too: its network rules and limits (it has no timers).
    imposed = SandboxSettings().within(config.desktop_policy, creating=True)
    default.desktop.network_rules = imposed.network or default.desktop.network_rules
    default.desktop.limits = imposed.limits or default.desktop.limits
    metrics = Metrics(desktops)
    services = ServerServices(config=config, processes=processes, desktops=desktops, metrics=metrics,
                              tokens=tokens, version=VERSION, sandboxes=sandboxes)
    every = [*collect_operations(), *COMMAND_OPERATIONS]
    single = [op for op in every if not is_disabled(op.path, config.disabled_apis)]
    # The command socket (docs/websocket.md) names every operation, a switched-off one too: its messages answer
    # the 403 an HTTP request would.
    commands = CommandSocket(every)
    # The approval gate: a guard on each operation a policy may hold (api/approvals/gate.py).
    operations = approval_policy.guarded([*single, *per_desktop(single)])
    # MCP over HTTP (docs/mcp.md) is an ASGI app of its own rather than an Operation: it streams, and answers its
    # errors the way MCP clients expect (api/mcp/http.py). Its sessions live within the lifespan below.
    mcp = mcp_http.McpEndpoint(config.mcp, config.token, config.hosts.port)
    mcp_routes = [] if "mcp" in config.disabled_apis else mcp_http.routes(mcp)

    def document() -> bytes:
        openapi = build_openapi(operations, VERSION)
        return mcp_http.document(openapi) if mcp_routes and mcp_http.sdk_installed() else openapi

    # Built when first asked for, off the event loop: the JSON schemas of every model are a third of the
    # server's start otherwise (and most servers, a test run's for one, are never asked).
    openapi: list[bytes] = []
    building = asyncio.Lock()

    async def openapi_document(request: Request) -> Response:
        async with building:
            if not openapi:
                openapi.append(await asyncio.to_thread(document))
        return Response(openapi[0], media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if local_turn is not None:  # first: a server that cannot start it stops before anything else opened
            await local_turn.start()
        if config.announce is not None:
            local_servers.announce(config.announce[0], config.url, config.announce[1])
        await sandboxes.open()
        if sandboxes.enabled and os.environ.get("XAUTHORITY") != str(sandboxes.xauthority):
            # The server's own X clients (screenshots, input...) read $XAUTHORITY: the process that runs the app
            # names the file there (the `server` command does); an app embedded elsewhere warns instead of
            # changing the environment of a process it does not own.
            logger.warning("$XAUTHORITY is not %s: this process's X clients will not open sandboxed displays",
                           sandboxes.xauthority)
        await default.open()
        desktops.start_reaper()
        if config.start_desktop is not None:
            snapshot = await default.desktop.start(config.start_desktop)
            print(f"sandbox-desktop: desktop {snapshot.display} active ({snapshot.width}x{snapshot.height}); "
                  f"status: {config.url}/v1/desktop/status, screenshot: {config.url}/v1/desktop/screenshot",
                  file=sys.stderr, flush=True)
        try:
            async with mcp.run(app):  # MCP sessions end before the desktops they drive
                yield
        finally:
            if config.announce is not None:
                local_servers.withdraw(config.announce[0])
            await desktops.shutdown()
            if local_turn is not None:
                await local_turn.stop()
            await processes.shutdown()
            await sandboxes.close()

    # Switched-off APIs come first: their catch-all routes must win over the WebSocket routes below them.
    sockets = [*STREAM_WEBSOCKETS, *EVENTS_WEBSOCKETS, *DESKTOP_TERMINAL_WEBSOCKETS, *commands.routes()]
    routes = [*disabled_routes(config.disabled_apis), *build_routes(operations), *sockets,
              *per_desktop_websockets(sockets), *TERMINAL_WEBSOCKETS, *WALL_WEBSOCKETS, *UI_ROUTES, *mcp_routes,
              Route("/v1/openapi.json", openapi_document, methods=["GET"])]
    # Metrics first, so refused (401) and failed (500) requests are counted too; the guard before CORS and the
    # token: a page we do not serve gets nothing, not even a preflight. One layer (api/middleware/gate.py).
    gate = Gate(RequestMetrics(metrics, routes),
                BrowserGuard(config.hosts, OriginPolicy.from_cors(config.cors.origins)), Cors(config.cors),
                TokenCheck(config.token, tokens))
    handlers: dict[type[Exception], ExceptionHandler] = {DomainError: handle_domain_error,
                                                         HTTPException: handle_http_exception}
    # The command socket runs JSON operations through the same gate and handlers, past the rest of the stack.
    commands.direct = DirectRun(gate, handlers)
    app = Starlette(middleware=[Middleware(RequestGate, gate=gate)],
                    exception_handlers={**handlers, Exception: handle_unexpected})
    app.router = IndexedRouter(routes, lifespan=lifespan)
    # The one untyped hop: routes read it back through api.services.server_of, typed.
    app.state.services = services
    return app

