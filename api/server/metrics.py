"""Prometheus metrics: request latency by route, screenshot timings, and every desktop's state read at scrape time,
labelled by desktop (docs/operations.md)."""

from __future__ import annotations

import threading
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
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from desktop.screen.screenshots import Screenshot, ShotOptions
from sandbox_desktop_wire.enums import DesktopRuntimeState

if TYPE_CHECKING:
    from api.server.desktop_services import DesktopServices
    from api.server.registry import DesktopRegistry

disable_created_metrics()  # `_created` samples double the output and no dashboard reads them

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SHOT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


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
    for name in DesktopRuntimeState:
        counts.add_metric([name.value], states.count(name))
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
    # The wall's thumbnails (docs/inspector.md, "Wall"): one encode per new picture, however many walls watch.
    walls = GaugeMetricFamily("sandbox_desktop_wall_viewers", "Walls showing the desktop's thumbnails",
                              labels=["desktop"])
    thumbnails = CounterMetricFamily("sandbox_desktop_wall_thumbnails", "Thumbnails encoded for the wall",
                                     labels=["desktop"])
    # What each desktop uses, from its cgroups while it runs in a sandbox (docs/sandbox-limits.md "Usage").
    memory = GaugeMetricFamily("sandbox_desktop_memory_bytes", "Memory the desktop's cgroup is charged now, "
                               "session and apps", labels=["desktop"])
    cpu = CounterMetricFamily("sandbox_desktop_cpu_seconds", "CPU time the desktop's programs used since it "
                              "started, ended ones included", labels=["desktop"])
    tasks = GaugeMetricFamily("sandbox_desktop_pids", "Tasks (processes and threads) of the desktop",
                              labels=["desktop"])
    oom_kills = CounterMetricFamily("sandbox_desktop_oom_kills", "Programs the OOM killer ended inside the desktop",
                                    labels=["desktop"])
    for services, current in zip(desktops, states, strict=True):
        label = services.id
        up.add_metric([label], current == DesktopRuntimeState.ACTIVE)
        for name in DesktopRuntimeState:
            state.add_metric([label, name.value], name == current)
        supervisor = services.desktop.supervisor
        restarts.add_metric([label], supervisor.restart_count if supervisor else 0)
        recording.add_metric([label], services.recordings.recording)
        for event in ("started", "completed", "failed"):
            outcomes.add_metric([label, event], services.recordings.outcomes[event])
        status = services.stream.status()
        streaming.add_metric([label], status.active)
        viewers.add_metric([label], status.viewers or 0)
        fps.add_metric([label], status.fps or 0.0)
        walls.add_metric([label], services.thumbnails.subscribers)
        thumbnails.add_metric([label], services.thumbnails.encodes)
        if (usage := services.desktop.usage()) is not None:
            figures: tuple[tuple[GaugeMetricFamily | CounterMetricFamily, float | None], ...] = (
                (memory, usage.memory_bytes), (cpu, usage.cpu_seconds), (tasks, usage.pids),
                (oom_kills, usage.oom_kills))
            for family, value in figures:
                if value is not None:  # None: not measurable here, which is not 0: no sample
                    family.add_metric([label], value)
    yield from (up, state, restarts, recording, outcomes, streaming, viewers, fps, walls, thumbnails, memory, cpu,
                tasks, oom_kills)
    # One process registry serves every desktop (docs/architecture.md): a server-wide figure, unlabelled.
    running = sum(1 for proc in registry.default.desktop.processes.list() if proc.running)
    yield GaugeMetricFamily("sandbox_desktop_processes_running", "Processes the server started that run",
                            value=running)


