"""The one place the application is assembled: route tables, middleware, error handlers, lifespan."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from api.auth import TokenAuthMiddleware
from api.browser_guard import BrowserGuardMiddleware, HostPolicy, OriginPolicy
from api.cors import CorsMiddleware, CorsPolicy
from api.metrics import Metrics, RequestMetricsMiddleware
from api.openapi import build_openapi
from api.operations import Operation
from api.problems import handle_http_exception, handle_service_error, handle_unexpected, refuse_websocket
from api.routes.stream import WEBSOCKET_ROUTES as STREAM_WEBSOCKETS
from api.routes.terminal import WEBSOCKET_ROUTES as TERMINAL_WEBSOCKETS
from api.routes.ui import ROUTES as UI_ROUTES
from desktop.errors import PermissionDenied, ServiceError
from desktop.options import StartOptions
from desktop.runtime import Desktop
from recording.manager import RecordingManager
from sandbox_desktop_client import local_servers
from streaming.manager import StreamManager

logger = logging.getLogger("sandbox_desktop.api")

VERSION = "0.1.0"

# Route modules, in the order their operations appear in the OpenAPI document.
ROUTE_MODULES = (
    "api.routes.health",
    "api.routes.desktop",
    "api.routes.screenshot",
    "api.routes.mouse",
    "api.routes.keyboard",
    "api.routes.windows",
    "api.routes.clipboard",
    "api.routes.apps",
    "api.routes.recording",
    "api.routes.stream",
    "api.routes.processes",
    "api.routes.terminal",
    "api.routes.fs",
    "api.routes.actions",
    "api.routes.vendors",
    "api.routes.metrics",
)

# APIs a deployment may switch off (`ServerConfig.disabled_apis`): name -> (path prefix, server flag).
OPTIONAL_APIS = {
    "processes": ("/v1/processes", "--no-process-api"),
    "fs": ("/v1/fs", "--no-file-api"),
}
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@dataclass(frozen=True)
class ServerConfig:
    """Everything the server was started with that the app needs."""

    token: str | None = None
    cors: CorsPolicy = field(default_factory=CorsPolicy)
    hosts: HostPolicy = field(default_factory=HostPolicy)
    """The Host names the server answers to (`--allowed-host`; enforced on loopback binds)."""
    state_dir: Path | None = None
    start_desktop: StartOptions | None = None
    """Start a desktop with these options when the server starts."""
    url: str = "http://127.0.0.1:2468"
    """Where the server is reachable, for the messages it prints."""
    disabled_apis: frozenset[str] = frozenset()
    """Names from OPTIONAL_APIS whose routes answer 403 and are left out of the API document."""
    webrtc_public_addresses: tuple[str, ...] = ()
    """IP addresses a 1:1 NAT forwards the live view's UDP ports from (`--webrtc-public-address`)."""
    announce: tuple[int, Path] | None = None
    """(port, token file) of a generated token, announced to local clients while the server runs."""


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
    return [Route(path, _dispatcher(methods), methods=list(methods)) for path, methods in by_path.items()]


def _dispatcher(methods: dict[str, Operation]) -> Callable[[Request], Awaitable[Response]]:
    if len(methods) == 1:
        return next(iter(methods.values())).endpoint

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await methods[method].endpoint(request)

    return dispatch


def is_disabled(path: str, disabled: frozenset[str]) -> bool:
    return any(path == OPTIONAL_APIS[name][0] or path.startswith(OPTIONAL_APIS[name][0] + "/") for name in disabled)


def disabled_routes(disabled: frozenset[str]) -> list[BaseRoute]:
    """Routes that answer every request (and WebSocket handshake) under a switched-off API with a 403 naming
    the flag."""
    routes: list[BaseRoute] = []
    for name in sorted(disabled):
        prefix, flag = OPTIONAL_APIS[name]
        error = PermissionDenied(f"{prefix} is disabled on this server (started with {flag})", code="api_disabled")

        async def refuse(request: Request, error: PermissionDenied = error) -> Response:
            raise error

        async def refuse_socket(websocket: WebSocket, error: PermissionDenied = error) -> None:
            await refuse_websocket(websocket, error)

        routes += [Route(prefix, refuse, methods=ALL_METHODS),
                   Route(prefix + "/{rest:path}", refuse, methods=ALL_METHODS),
                   WebSocketRoute(prefix + "/{rest:path}", refuse_socket)]
    return routes


def create_app(config: ServerConfig, desktop: Desktop | None = None) -> Starlette:
    """Build the ASGI app around a Desktop (a new one unless given)."""
    desktop = desktop or Desktop(state_dir=config.state_dir)
    # recording/ and streaming/ build on desktop/ (never the reverse): they finalise through its stop hooks.
    recordings = RecordingManager(desktop)
    stream = StreamManager(desktop, config.webrtc_public_addresses)
    desktop.add_stop_hook(recordings.on_desktop_stop)
    desktop.add_stop_hook(stream.on_desktop_stop)
    # A failed desktop shows nothing new: viewers are told why, the recording ends where the screen did.
    desktop.add_failure_hook(recordings.on_desktop_failure)
    desktop.add_failure_hook(stream.on_desktop_failure)
    metrics = Metrics(desktop, recordings, stream)
    operations = [op for op in collect_operations() if not is_disabled(op.path, config.disabled_apis)]
    openapi = build_openapi(operations, VERSION)

    async def openapi_document(request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if config.announce is not None:
            local_servers.announce(config.announce[0], config.url, config.announce[1])
        await recordings.start()
        await stream.start()
        if config.start_desktop is not None:
            snapshot = await desktop.start(config.start_desktop)
            print(f"sandbox-desktop: desktop {snapshot.display} active ({snapshot.width}x{snapshot.height}); "
                  f"status: {config.url}/v1/desktop/status, screenshot: {config.url}/v1/desktop/screenshot",
                  file=sys.stderr, flush=True)
        try:
            yield
        finally:
            if config.announce is not None:
                local_servers.withdraw(config.announce[0])
            await desktop.shutdown()
            await stream.shutdown()
            await recordings.shutdown()

    # Switched-off APIs come first: their catch-all routes must win over the WebSocket routes below them.
    routes = [*disabled_routes(config.disabled_apis), *build_routes(operations), *STREAM_WEBSOCKETS,
              *TERMINAL_WEBSOCKETS, *UI_ROUTES, Route("/v1/openapi.json", openapi_document, methods=["GET"])]
    app = Starlette(
        routes=routes,
        middleware=[
            # Outermost, so refused (401) and failed (500) requests are counted too.
            Middleware(RequestMetricsMiddleware, metrics=metrics, routes=routes),
            # Before CORS and the token: a page we do not serve gets nothing, not even a preflight.
            Middleware(BrowserGuardMiddleware, hosts=config.hosts, origins=OriginPolicy.from_cors(config.cors.origins)),
            Middleware(CorsMiddleware, policy=config.cors),
            Middleware(TokenAuthMiddleware, token=config.token),
        ],
        exception_handlers={
            ServiceError: handle_service_error,
            HTTPException: handle_http_exception,
            Exception: handle_unexpected,
        },
        lifespan=lifespan,
    )
    app.state.desktop = desktop
    app.state.recordings = recordings
    app.state.stream = stream
    app.state.metrics = metrics
    app.state.config = config
    app.state.version = VERSION
    return app
