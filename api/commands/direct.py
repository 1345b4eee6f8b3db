"""The command socket's direct run of a JSON operation: the request gate's checks, then the operation, without the
rest of the ASGI stack (docs/websocket.md, "The direct run").

Run through the whole app, a message passed Starlette's error middleware, the request gate, the exception
middleware, the router, the route and its request wrapper before the operation parsed its body: about half of the
server's CPU for a `mouse.move` (docs/benchmarks.md, "Peers"). For an operation that takes JSON and answers JSON
(most of the table: input, windows, status...), the message is run here instead, with each check it had:

- the request gate itself (api/middleware/gate.py, the same object the middleware holds): the Host and Origin
  guard, CORS, the token and its scope on every message, the request metrics;
- the app's own router finds the route (`IndexedRouter.route_for`), so a switched-off API's catch-all, a 404 and
  a 405 are what they were; only an `OperationRoute`'s operation matched by method runs here, anything else
  (streams, uploads, images, `Range`, a switched-off API, an unknown path) goes through the whole app;
- the operation's own endpoint (`Operation.endpoint`): its query and body parsing (400/422 naming the field), its
  approval guard, its handler and its response model, given the message's body rather than a stream of it;
- the app's exception handlers (domain errors and HTTP exceptions as problem documents); anything else propagates
  as it did past Starlette's error middleware, and the socket answers it as an internal error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from api.http.operations import Operation, OperationRoute
from api.http.router import IndexedRouter
from api.middleware.gate import Gate

ExceptionHandler = Callable[[Request, Exception], Awaitable[Response]]
Found = tuple[OperationRoute, Operation, Scope]
DIRECT_MEDIA_TYPE = "application/json"
PATHS_KEPT = 1024
"""Distinct (method, path) pairs whose routing the direct run keeps; past that it starts over."""


def runs_directly(op: Operation) -> bool:
    """Whether an operation takes a JSON body (or none) and answers JSON: no upload it reads itself, no image or
    file it may send in ranges, no stream."""
    return op.media_type == DIRECT_MEDIA_TYPE and op.upload is None and not op.ranges and not op.upgrade


class DirectRun:
    """Runs a message's request straight through the gate and its operation, when its route is one."""

    def __init__(self, gate: Gate, handlers: Mapping[type[Exception], ExceptionHandler]) -> None:
        self.gate = gate
        self.handlers = handlers
        self._seen: dict[tuple[str, str], Found | None] = {}
        self._routes: tuple[int, int] = (0, -1)

    def found(self, router: IndexedRouter, scope: Scope) -> Found | None:
        """The route, operation and child scope (path parameters, endpoint) the router gives `scope`, when the
        operation runs directly; None when the whole app must answer it. Kept per method and path, as the router
        keeps its candidates: an agent sends the same few ops over and over."""
        if self._routes != (id(router.routes), len(router.routes)):  # routes added after start (tests do)
            self._routes = (id(router.routes), len(router.routes))
            self._seen = {}
        key = (scope["method"], get_route_path(scope))
        if key in self._seen:
            return self._seen[key]
        if len(self._seen) >= PATHS_KEPT:
            self._seen.clear()
        found = self._seen[key] = self.route(router, scope, key[1])
        return found

    @staticmethod
    def route(router: IndexedRouter, scope: Scope, path: str) -> Found | None:
        match = router.route_for(scope, path)
        if match is None:
            return None
        route, child = match
        if not isinstance(route, OperationRoute):
            return None
        operation = route.operations.get(scope["method"])  # a 405 (a partial match) is the app's
        if operation is None or not runs_directly(operation):
            return None
        return route, operation, child

    async def run(self, found: Found, scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
        route, operation, child = found

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            scope["route"] = route
            scope.update(child)  # as the router does: `endpoint`, `path_params` (the message's own copy)
            scope["path_params"] = dict(child["path_params"])
            request = Request(scope, receive, send)
            try:
                response = await operation.endpoint(request, body)
            except Exception as exc:
                handler = self.handler_for(exc)
                if handler is None:
                    raise
                response = await handler(request, exc)
            await response(scope, receive, send)

        await self.gate.http(scope, receive, send, app)

    def handler_for(self, exc: Exception) -> ExceptionHandler | None:
        """The app's handler for `exc`, by its class's MRO (as Starlette's exception middleware looks it up)."""
        for cls in type(exc).__mro__:
            handler = self.handlers.get(cls)
            if handler is not None:
                return handler
        return None
