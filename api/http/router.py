"""Routing by dict lookups: the route table indexed by path, so the cost of finding a route does not grow
with the number of routes (docs/architecture.md "A request")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette._utils import get_route_path
from starlette.datastructures import URL
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Host, Match, Route, Router, WebSocketRoute
from starlette.types import Receive, Scope, Send

PATHS_KEPT = 1024
"""Distinct (scope type, path) pairs whose candidate routes the router keeps; past that it starts over."""


def first_match(routes: Sequence[BaseRoute], scope: Scope) -> tuple[BaseRoute, Scope] | None:
    """What Starlette's scan picks among `routes`: the first full match, else the first that matched all but
    the method (it answers the 405); None when no route matches."""
    partial = None
    for route in routes:
        match, child_scope = route.matches(scope)
        if match is Match.FULL:
            return route, child_scope
        if match is Match.PARTIAL and partial is None:
            partial = route, child_scope
    return partial


class IndexedRouter(Router):
    """Starlette's Router, finding the routes a path can match by dict lookups rather than by trying every
    route's regex in turn.

    The scan cost ~1 µs a route, and every desktop route is there twice (`/v1/desktop/...` and
    `/v1/desktops/{desktop_id}/...`): `GET /v1/processes`, some 50 routes down, paid more for routing than
    for its handler, and each new route would have made every later one slower. Here a static path is
    looked up whole, and a parameterised one by its literal head (up to the `/` before its first parameter)
    and tail (from the first `/` after its last one). Only the routes found are tried, in table order and
    with Starlette's own `matches`, so the first match wins, a route matching all but the method answers
    405, a trailing slash redirects and anything else is a 404, exactly as with the scan.
    """

    def __init__(self, routes: Sequence[BaseRoute], **kwargs: Any) -> None:
        super().__init__(list(routes), **kwargs)
        self._indexes: dict[str, RouteIndex] = {}
        self._indexed: tuple[int, int] = (0, -1)
        self._seen: dict[tuple[str, str], list[BaseRoute]] = {}

    def candidates(self, scope: Scope, path: str) -> list[BaseRoute]:
        """The routes that may match `path` for a scope of this type, in table order.

        Kept per path once looked up (2-4 us a request otherwise): a client calls the same few paths over and
        over. Bounded, as paths come from clients."""
        if self._indexed != (id(self.routes), len(self.routes)):  # routes added after start (tests do)
            self._indexes = {kind: RouteIndex(self.routes, kind) for kind in ("http", "websocket")}
            self._indexed = (id(self.routes), len(self.routes))
            self._seen = {}
        key = (scope["type"], path)
        found = self._seen.get(key)
        if found is None:
            found = [self.routes[i] for i in self._indexes[key[0]].lookup(path)]
            if len(self._seen) >= PATHS_KEPT:
                self._seen.clear()
            self._seen[key] = found
        return found

    def route_for(self, scope: Scope, path: str) -> tuple[BaseRoute, Scope] | None:
        """The route that answers, with its child scope (`first_match` among the candidates)."""
        return first_match(self.candidates(scope, path), scope)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await super().app(scope, receive, send)
            return
        scope.setdefault("router", self)
        path = get_route_path(scope)
        found = self.route_for(scope, path)
        if found is not None:
            scope["route"] = found[0]
            scope.update(found[1])
            await found[0].handle(scope, receive, send)
            return
        if scope["type"] == "http" and self.redirect_slashes and path != "/":
            other = dict(scope, path=scope["path"].rstrip("/") if path.endswith("/") else scope["path"] + "/")
            if self.route_for(other, get_route_path(other)) is not None:
                await RedirectResponse(url=str(URL(scope=other)))(scope, receive, send)
                return
        await self.default(scope, receive, send)


class RouteIndex:
    """Where each route of one scope type (`http`, `websocket`) is found: by its whole path, by its literal
    head and tail, or (a route without a path template) on every lookup. Holds positions in the table."""

    def __init__(self, routes: Sequence[BaseRoute], kind: str) -> None:
        self.exact: dict[str, list[int]] = {}
        self.templated: dict[str, dict[str, list[int]]] = {}
        self.everywhere: list[int] = []
        skip = WebSocketRoute if kind == "http" else Route  # each matches its own scope type only
        for position, route in enumerate(routes):
            template = getattr(route, "path_format", None)
            if isinstance(route, skip):
                continue
            if isinstance(route, Host) or not isinstance(template, str):
                self.everywhere.append(position)
            elif "{" not in template:
                self.exact.setdefault(template, []).append(position)
            else:
                head = template[: template.rindex("/", 0, template.index("{")) + 1]
                tail = template[template.rindex("}") + 1:]
                tail = tail[tail.index("/"):] if "/" in tail else ""
                self.templated.setdefault(head, {}).setdefault(tail, []).append(position)

    def lookup(self, path: str) -> list[int]:
        """Positions of the routes that may match `path`, ascending."""
        # A route's regex ends in `$`, which also matches before a final newline: look such a path up without it.
        key = path[:-1] if path.endswith("\n") else path
        found = [*self.exact.get(key, ()), *self.everywhere]
        slashes = [i for i, char in enumerate(key) if char == "/"]
        for n, start in enumerate(slashes):
            tails = self.templated.get(key[: start + 1])
            if tails is not None:
                found += tails.get("", ())
                for end in slashes[n + 1:]:  # a tail starts after its head
                    found += tails.get(key[end:], ())
        found.sort()
        return found
