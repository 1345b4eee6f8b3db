"""Prometheus metrics: request latency by route, screenshot timings, and every desktop's state read at scrape time,
labelled by desktop (docs/operations.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.services import DEFAULT_DESKTOP_ID, desktop_path
from desktop.screen import Screenshot, ShotOptions
from sandbox_desktop_wire.desktop import DesktopState

if TYPE_CHECKING:
    from api.registry import DesktopRegistry
    from api.services import DesktopServices

access_log = logging.getLogger("sandbox_desktop.access")
disable_created_metrics()  # `_created` samples double the output and no dashboard reads them

DESKTOP_STATES: tuple[str, ...] = get_args(DesktopState)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SHOT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
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


class Metrics:
    """One registry per app (several apps in one process, as in tests, must not share counters)."""

    def __init__(self, desktops: DesktopRegistry) -> None:
        self.desktops = desktops
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.requests = Counter("sandbox_desktop_http_requests", "HTTP requests answered, by route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("sandbox_desktop_http_request_duration_seconds",
                                 "Time from request to response headers, by route",
                                 ["method", "route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.in_flight = Gauge("sandbox_desktop_http_requests_in_flight", "HTTP requests being answered",
                               registry=self.registry)
        self.capture = Histogram("sandbox_desktop_screenshot_capture_seconds",
                                 "Time grabbing a screenshot's pixels from the X server, by desktop",
                                 ["desktop"], buckets=SHOT_BUCKETS, registry=self.registry)
        self.encode = Histogram("sandbox_desktop_screenshot_encode_seconds",
                                "Time scaling and encoding a screenshot, by desktop and format",
                                ["desktop", "format"], buckets=SHOT_BUCKETS, registry=self.registry)
        self._shot_labels: dict[str, set[str]] = {}
        """Desktop id -> formats observed: the label sets to remove once the desktop is deleted."""
        self._state = StateCollector()
        self.registry.register(self._state)
        self._scrape = threading.Lock()
        for services in desktops.list():
            self.follow(services)

    # -- screenshots: every desktop's Screen tells us of its shots, under the desktop's id ----------------------------

    def follow(self, services: DesktopServices) -> None:
        """Time `services`' screenshots from now on (once per desktop; on the event loop)."""
        observers = services.desktop.screen.observers
        if any(isinstance(o, ShotTimer) and o.metrics is self for o in observers):
            return
        observers.append(ShotTimer(self, services.id))
        self.forget_ended({s.id for s in self.desktops.list()})

    def follow_desktop(self, desktop_id: str) -> None:
        """Follow the desktop a request is about (the id its path names) before its handler runs, so its first
        screenshot is timed.

        A created desktop's screenshots are all taken by requests under its own path (docs/desktops.md);
        an unknown id follows nothing, so it adds no label set."""
        services = next((s for s in self.desktops.list() if s.id == desktop_id), None)
        if services is not None:
            self.follow(services)

    def observe_screenshot(self, desktop_id: str, options: ShotOptions, shot: Screenshot) -> None:
        self.capture.labels(desktop_id).observe(shot.capture_seconds)
        self.encode.labels(desktop_id, options.format).observe(shot.encode_seconds)
        self._shot_labels.setdefault(desktop_id, set()).add(options.format)

    def forget_ended(self, live: set[str]) -> None:
        """Drop the screenshot label sets of deleted desktops, so created and deleted ids never pile up."""
        for desktop_id in [d for d in self._shot_labels if d not in live]:
            self.capture.remove(desktop_id)
            for fmt in self._shot_labels.pop(desktop_id):
                self.encode.remove(desktop_id, fmt)

    # -- scraping ------------------------------------------------------------------------------------------------------

    def read_state(self) -> list[Metric]:
        """Every desktop's figures, read on the event loop: the registry and the desktops change only there
        (docs/architecture.md), so a scrape never sees a dict changing under it."""
        desktops = self.desktops.list()
        for services in desktops:
            self.follow(services)
        self.forget_ended({s.id for s in desktops})
        return list(desktop_families(desktops, self.desktops))

    def exposition(self, state: list[Metric] | None = None) -> bytes:
        """The text exposition format of every metric; `state` from `read_state` (read now without it)."""
        families = self.read_state() if state is None else state
        with self._scrape:  # one scrape at a time shows its own snapshot
            self._state.families = families
            return generate_latest(self.registry)


class ShotTimer:
    """A Screen observer that times one desktop's screenshots under its id."""

    def __init__(self, metrics: Metrics, desktop_id: str) -> None:
        self.metrics = metrics
        self.desktop_id = desktop_id

    def __call__(self, options: ShotOptions, shot: Screenshot) -> None:
        self.metrics.observe_screenshot(self.desktop_id, options, shot)


class StateCollector(Collector):
    """Yields the desktop families `Metrics.read_state` built for the scrape in progress."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def desktop_families(desktops: Sequence[DesktopServices], registry: DesktopRegistry) -> Iterator[Metric]:
    """Server-wide desktop counts, then one sample per desktop (label `desktop`) of each desktop family."""
    states = [s.desktop.state for s in desktops]
    counts = GaugeMetricFamily("sandbox_desktop_desktops", "Desktops of the server by state (`default` included)",
                               labels=["state"])
    for name in DESKTOP_STATES:
        counts.add_metric([name], states.count(name))
    yield counts
    yield GaugeMetricFamily("sandbox_desktop_max_desktops", "Desktops the server holds at once (--max-desktops)",
                            value=registry.max_desktops)
    up = GaugeMetricFamily("sandbox_desktop_up", "1 while the desktop is active", labels=["desktop"])
    state = GaugeMetricFamily("sandbox_desktop_state", "The desktop's state (1 for the current one)",
                              labels=["desktop", "state"])
    restarts = CounterMetricFamily("sandbox_desktop_restarts", "Restarts of Xvfb and openbox since the desktop "
                                   "started (resets when it is started again)", labels=["desktop"])
    recording = GaugeMetricFamily("sandbox_desktop_recording_active", "1 while a recording runs",
                                  labels=["desktop"])
    outcomes = CounterMetricFamily("sandbox_desktop_recordings", "Recordings started, and ended by status",
                                   labels=["desktop", "event"])
    streaming = GaugeMetricFamily("sandbox_desktop_stream_active", "1 while the live view is on",
                                  labels=["desktop"])
    viewers = GaugeMetricFamily("sandbox_desktop_stream_viewers", "Connected live-view viewers",
                                labels=["desktop"])
    fps = GaugeMetricFamily("sandbox_desktop_stream_fps", "Frames per second sent to viewers", labels=["desktop"])
    for services, current in zip(desktops, states, strict=True):
        label = services.id
        up.add_metric([label], current == "active")
        for name in DESKTOP_STATES:
            state.add_metric([label, name], name == current)
        supervisor = services.desktop.supervisor
        restarts.add_metric([label], supervisor.restart_count if supervisor else 0)
        recording.add_metric([label], services.recordings.recording)
        for event in ("started", "completed", "failed"):
            outcomes.add_metric([label, event], services.recordings.outcomes[event])
        status = services.stream.status()
        streaming.add_metric([label], status.active)
        viewers.add_metric([label], status.viewers or 0)
        fps.add_metric([label], status.fps or 0.0)
    yield from (up, state, restarts, recording, outcomes, streaming, viewers, fps)
    # One process registry serves every desktop (docs/architecture.md): a server-wide figure, unlabelled.
    running = sum(1 for proc in registry.default.desktop.processes.list() if proc.running)
    yield GaugeMetricFamily("sandbox_desktop_processes_running", "Processes the server started that run",
                            value=running)


class RequestMetricsMiddleware:
    """Counts and times every HTTP request by route template, and writes one structured access-log line.

    Every call pays for this, so the per-request path does no work twice: the metric children of a label
    set and the template of an unrouted path are looked up once and kept (both caches bounded, since
    methods and paths come from clients), and the access-log record is built only when it is written."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.templates: dict[object, str] = {route.endpoint: route.path for route in routes if isinstance(route, Route)}
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._unrouted: dict[tuple[str, str], str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # what the server answers when the app raises before starting a response
        headers_sent = 0.0

        async def send_timed(message: Message) -> None:
            nonlocal status, headers_sent
            if message["type"] == "http.response.start":
                status, headers_sent = message["status"], time.perf_counter()
            await send(message)

        path: str = scope["path"]
        desktop_id = desktop_in_path(path)
        if desktop_id is not None and desktop_id != DEFAULT_DESKTOP_ID:
            self.metrics.follow_desktop(desktop_id)
        in_flight = self.metrics.in_flight
        in_flight.inc()
        try:
            await self.app(scope, receive, send_timed)
        finally:
            in_flight.dec()
            elapsed = (headers_sent or time.perf_counter()) - began
            method: str = scope["method"]
            route = self.route_of(scope)
            requests, latency = self.children(method, route, status)
            requests.inc()
            latency.observe(elapsed)
            if access_log.isEnabledFor(logging.INFO):
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
