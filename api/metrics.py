"""Prometheus metrics: request latency by route, screenshot timings, and the desktop's state read at scrape time."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

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
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desktop.screen import Screenshot, ShotOptions

if TYPE_CHECKING:
    from desktop.runtime import Desktop
    from recording.manager import RecordingManager
    from streaming.manager import StreamManager

access_log = logging.getLogger("sandbox_desktop.access")
disable_created_metrics()  # `_created` samples double the output and no dashboard reads them

DESKTOP_STATES = ("inactive", "install_required", "starting", "active", "stopping", "failed")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SHOT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
UNMATCHED = "unmatched"
"""The route label of requests no route matches, so scanners cannot explode the label set."""


class Metrics:
    """One registry per app (several apps in one process, as in tests, must not share counters)."""

    def __init__(self, desktop: Desktop, recordings: RecordingManager, stream: StreamManager) -> None:
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
                                 "Time grabbing a screenshot's pixels from the X server",
                                 buckets=SHOT_BUCKETS, registry=self.registry)
        self.encode = Histogram("sandbox_desktop_screenshot_encode_seconds",
                                "Time scaling and encoding a screenshot, by format",
                                ["format"], buckets=SHOT_BUCKETS, registry=self.registry)
        self.registry.register(StateCollector(desktop, recordings, stream))
        desktop.screen.observers.append(self.observe_screenshot)

    def observe_screenshot(self, options: ShotOptions, shot: Screenshot) -> None:
        self.capture.observe(shot.capture_seconds)
        self.encode.labels(options.format).observe(shot.encode_seconds)

    def exposition(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_latest(self.registry)


class StateCollector(Collector):
    """Desktop, recording and live-view figures, read from the live objects at each scrape."""

    def __init__(self, desktop: Desktop, recordings: RecordingManager, stream: StreamManager) -> None:
        self.desktop = desktop
        self.recordings = recordings
        self.stream = stream

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        state = self.desktop.state
        yield GaugeMetricFamily("sandbox_desktop_up", "1 while the desktop is active", value=state == "active")
        states = GaugeMetricFamily("sandbox_desktop_state", "The desktop's state (1 for the current one)",
                                   labels=["state"])
        for name in DESKTOP_STATES:
            states.add_metric([name], name == state)
        yield states
        supervisor = self.desktop.supervisor
        yield CounterMetricFamily("sandbox_desktop_restarts", "Restarts of Xvfb and openbox since the desktop "
                                  "started (resets when it is started again)",
                                  value=supervisor.restart_count if supervisor else 0)
        yield GaugeMetricFamily("sandbox_desktop_recording_active", "1 while a recording runs",
                                value=self.recordings.recording)
        outcomes = CounterMetricFamily("sandbox_desktop_recordings", "Recordings started, and ended by status",
                                       labels=["event"])
        for event in ("started", "completed", "failed"):
            outcomes.add_metric([event], self.recordings.outcomes[event])
        yield outcomes
        status = self.stream.status()
        yield GaugeMetricFamily("sandbox_desktop_stream_active", "1 while the live view is on", value=status.active)
        yield GaugeMetricFamily("sandbox_desktop_stream_viewers", "Connected live-view viewers",
                                value=status.viewers or 0)
        yield GaugeMetricFamily("sandbox_desktop_stream_fps", "Frames per second sent to viewers",
                                value=status.fps or 0.0)
        running = sum(1 for proc in self.desktop.processes.list() if proc.running)
        yield GaugeMetricFamily("sandbox_desktop_processes_running", "Processes the server started that run",
                                value=running)


class RequestMetricsMiddleware:
    """Counts and times every HTTP request by route template, and writes one structured access-log line."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.templates: dict[object, str] = {route.endpoint: route.path for route in routes if isinstance(route, Route)}

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

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_timed)
        finally:
            self.metrics.in_flight.dec()
            elapsed = (headers_sent or time.perf_counter()) - began
            route = self.route_of(scope)
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            # The query string is left out: a browser puts `access_token` there.
            access_log.info("%s %s %d %.1f ms", method, scope["path"], status, elapsed * 1000, extra={
                "http": {"method": method, "route": route, "path": scope["path"], "status": status,
                         "duration_ms": round(elapsed * 1000, 2),
                         "client": (scope.get("client") or ("", 0))[0]}})

    def route_of(self, scope: Scope) -> str:
        """The matched route's path template; routing did not run for a request the token check refused."""
        template = self.templates.get(scope.get("endpoint", UNMATCHED))
        if template is not None:
            return template
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path", UNMATCHED))
        return UNMATCHED
