"""Every HTTP request counted and timed by route template, and one structured access-log line each
(docs/operations.md); the figures themselves live in api/server/metrics.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from api.http.desktop_paths import DEFAULT_DESKTOP_ID, desktop_path

access_log = logging.getLogger("sandbox_desktop.access")


class RequestFigures(Protocol):
    """The request metrics the middleware moves (api/server/metrics.py's `Metrics` has them)."""

    @property
    def requests(self) -> Counter: ...

    @property
    def latency(self) -> Histogram: ...

    @property
    def in_flight(self) -> Gauge: ...

    def follow_desktop(self, desktop_id: str) -> None:
        """Time the screenshots of the desktop a request is about, before its handler runs."""


UNMATCHED = "unmatched"
"""The route label of requests no route matches, so scanners cannot explode the label set."""


LABEL_CACHE_SIZE = 1024
"""Request label sets whose metric children the middleware keeps at hand."""


PATH_CACHE_SIZE = 1024
"""Unrouted (method, path) pairs whose route template the middleware keeps, so a refused request is matched once."""


def desktop_in_path(path: str) -> str | None:
    """The id of the desktop a request path is about, or None for server-wide paths (`/v1/desktops` itself)."""
    about = desktop_path(path)
    return about[0] if about is not None else None


class RequestMetrics:
    """Counts and times every HTTP request by route template, and writes one structured access-log line; the
    request gate (api/middleware/gate.py) calls `begin` before anything else and `end` after the answer.

    Every call pays for this, so the per-request path does no work twice: the metric children of a label
    set and the template of an unrouted path are looked up once and kept (both caches bounded, since
    methods and paths come from clients), and the access-log record is built only when it is written. The
    requests in flight are a plain count the gauge reads at scrape time (a Gauge's inc and dec take a lock each:
    about 1 us per request)."""

    def __init__(self, metrics: RequestFigures, routes: Sequence[BaseRoute]) -> None:
        self.metrics = metrics
        self.routes = routes
        self.templates: dict[object, str] = {route.endpoint: route.path for route in routes if isinstance(route, Route)}
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._unrouted: dict[tuple[str, str], str] = {}
        self.in_flight = 0
        metrics.in_flight.set_function(lambda: self.in_flight)

    def begin(self, scope: Scope) -> None:
        """A request arrived: it is in flight, and the desktop its path names is followed."""
        desktop_id = desktop_in_path(scope["path"])
        if desktop_id is not None and desktop_id != DEFAULT_DESKTOP_ID:
            self.metrics.follow_desktop(desktop_id)
        self.in_flight += 1

    def end(self, scope: Scope, status: int, elapsed: float) -> None:
        """A request was answered with `status` (500 if it raised first), its headers `elapsed` seconds after
        `begin`."""
        self.in_flight -= 1
        method: str = scope["method"]
        route = self.route_of(scope)
        requests, latency = self.children(method, route, status)
        requests.inc()
        latency.observe(elapsed)
        if access_log.isEnabledFor(logging.INFO):
            path: str = scope["path"]
            desktop_id = desktop_in_path(path)
            # The query string is left out: a browser puts `access_token` there.
            fields: dict[str, object] = {
                "http": {"method": method, "route": route, "path": path, "status": status,
                         "duration_ms": round(elapsed * 1000, 2),
                         "client": (scope.get("client") or ("", 0))[0]}}
            text, args = "%s %s %d %.1f ms", [method, path, status, elapsed * 1000]
            if desktop_id is not None:
                # Top level, as in the registry's lifecycle lines: one field to follow a desktop through the logs.
                fields["desktop"] = desktop_id
                text += " desktop=%s"
                args.append(desktop_id)
            access_log.info(text, *args, extra=fields)

    def children(self, method: str, route: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter and latency histogram of one label set (`labels()` validates and locks each call)."""
        key = (method, route, status)
        found = self._children.get(key)
        if found is None:
            found = (self.metrics.requests.labels(method, route, str(status)),
                     self.metrics.latency.labels(method, route))
            if len(self._children) >= LABEL_CACHE_SIZE:
                self._children.clear()  # a client inventing methods only costs the lookups again
            self._children[key] = found
        return found

    def route_of(self, scope: Scope) -> str:
        """The matched route's path template; routing did not run for a request the token check refused."""
        template = self.templates.get(scope.get("endpoint", UNMATCHED))
        if template is not None:
            return template
        key = (scope["method"], scope["path"])
        template = self._unrouted.get(key)
        if template is None:
            template = UNMATCHED
            for route in self.routes:
                match, _ = route.matches(scope)
                if match is Match.FULL:
                    template = str(getattr(route, "path", UNMATCHED))
                    break
            if len(self._unrouted) >= PATH_CACHE_SIZE:
                self._unrouted.clear()  # scanners' paths are all different: keep the cache bounded
            self._unrouted[key] = template
        return template
