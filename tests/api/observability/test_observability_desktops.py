"""Metrics and logs of a server holding many desktops: every desktop figure labelled by its id, label sets that
come and go with the desktops, routes labelled by template, log lines naming the desktop (docs/operations.md)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.server.metrics import LATENCY_BUCKETS
from tests.api.observability.test_observability import scrape, value
from tests.conftest import ServerProcess, launch_server, wait_for

SIZE = {"width": 640, "height": 480}
DISPLAYS = itertools.count(640)
"""Display numbers of this module's desktops: other servers on the machine (other test modules, running at the same
time) take theirs from :100 up, and an X server whose lock file we cannot see would refuse ours."""
PER_DESKTOP_FAMILIES = ("sandbox_desktop_up", "sandbox_desktop_state", "sandbox_desktop_restarts_total",
                        "sandbox_desktop_recording_active", "sandbox_desktop_recordings_total",
                        "sandbox_desktop_stream_active", "sandbox_desktop_stream_viewers",
                        "sandbox_desktop_stream_fps")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module, logging JSON at info so its access and lifecycle lines can be read back."""
    server = launch_server(tmp_path_factory.mktemp("observability_desktops"), "--log-format", "json",
                           "--log-level", "info")
    yield server
    server.stop()


def create(api: httpx.Client, **extra: Any) -> str:
    response = api.post("/v1/desktops", json={**SIZE, "displayNum": next(DISPLAYS), **extra})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def delete(api: httpx.Client, desktop_id: str) -> None:
    assert api.delete(f"/v1/desktops/{desktop_id}").status_code == 204


def labelled(samples: Samples, desktop_id: str) -> set[str]:
    """The sample names that carry `desktop=desktop_id`."""
    return {name for name, labels in samples if ("desktop", desktop_id) in labels}


def log_entries(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def test_every_desktop_has_its_own_samples_until_it_is_deleted(api: httpx.Client) -> None:
    first, second = create(api), create(api)
    samples = scrape(api)
    for desktop_id in (first, second):
        assert set(PER_DESKTOP_FAMILIES) <= labelled(samples, desktop_id)
        assert value(samples, "sandbox_desktop_up", desktop=desktop_id) == 1
        assert value(samples, "sandbox_desktop_state", desktop=desktop_id, state="active") == 1
        assert value(samples, "sandbox_desktop_state", desktop=desktop_id, state="paused") == 0
        assert value(samples, "sandbox_desktop_recordings_total", desktop=desktop_id, event="started") == 0
    # The default desktop is listed too (not started in this module), each desktop once in the counts.
    assert value(samples, "sandbox_desktop_up", desktop="default") == 0
    assert value(samples, "sandbox_desktop_state", desktop="default", state="inactive") == 1
    assert value(samples, "sandbox_desktop_desktops", state="active") == 2
    assert value(samples, "sandbox_desktop_desktops", state="inactive") == 1
    assert value(samples, "sandbox_desktop_max_desktops") == 16
    assert ("sandbox_desktop_processes_running", ()) in samples  # server-wide: one process registry

    delete(api, first)
    after = scrape(api)
    assert not labelled(after, first), "a deleted desktop's label sets are gone"
    assert set(PER_DESKTOP_FAMILIES) <= labelled(after, second)
    assert value(after, "sandbox_desktop_desktops", state="active") == 1
    delete(api, second)
    assert not labelled(scrape(api), second)


def test_a_paused_desktop_shows_paused_and_is_logged_with_its_id(srv: ServerProcess, api: httpx.Client) -> None:
    desktop_id = create(api, idleTimeoutSeconds=1, onIdle="pause")
    wait_for(lambda: value(scrape(api), "sandbox_desktop_state", desktop=desktop_id, state="paused") == 1,
             "the idle desktop paused", timeout=15)
    samples = scrape(api)
    assert value(samples, "sandbox_desktop_up", desktop=desktop_id) == 0
    assert value(samples, "sandbox_desktop_desktops", state="paused") == 1
    paused = [e for e in log_entries(srv) if e["logger"] == "sandbox_desktop.desktops" and " paused" in e["message"]]
    assert any(e.get("desktop") == desktop_id and e["reason"].startswith("idle_timeout") for e in paused), paused
    delete(api, desktop_id)
    assert value(scrape(api), "sandbox_desktop_desktops", state="paused") == 0


def test_screenshots_are_timed_per_desktop_and_forgotten_with_it(api: httpx.Client) -> None:
    first, second = create(api), create(api)
    before = scrape(api)
    for fmt in ("png", "png"):
        assert api.get(f"/v1/desktops/{first}/screenshot", params={"format": fmt}).status_code == 200
    assert api.get(f"/v1/desktops/{second}/screenshot", params={"format": "jpeg"}).status_code == 200
    # A batch's screenshot is timed too, under the desktop it ran on.
    batch = api.post(f"/v1/desktops/{first}/actions",
                     json={"actions": [{"type": "cursor_position"}], "screenshot": {"format": "webp"}})
    assert batch.status_code == 200, batch.text
    after = scrape(api)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    capture, encode = "sandbox_desktop_screenshot_capture_seconds", "sandbox_desktop_screenshot_encode_seconds"
    assert grew(capture + "_count", desktop=first) == 3
    assert grew(capture + "_sum", desktop=first) > 0
    assert grew(encode + "_count", desktop=first, format="png") == 2
    assert grew(encode + "_count", desktop=first, format="webp") == 1
    assert grew(capture + "_count", desktop=second) == 1
    assert grew(encode + "_count", desktop=second, format="jpeg") == 1
    assert grew(capture + "_count", desktop="default") == 0
    bucket = (capture + "_bucket", tuple(sorted({"desktop": first, "le": "+Inf"}.items())))
    assert after[bucket] == value(after, capture + "_count", desktop=first)

    delete(api, first)
    delete(api, second)
    gone = scrape(api)
    assert not labelled(gone, first) and not labelled(gone, second)


def test_route_label_is_the_template_whatever_the_id(api: httpx.Client) -> None:
    desktop_id = create(api)
    unknown = [f"dsk_{uuid.uuid4().hex[:12]}" for _ in range(20)]
    assert api.get(f"/v1/desktops/{desktop_id}/screenshot").status_code == 200
    assert api.get(f"/v1/desktops/{desktop_id}/status").status_code == 200
    before = scrape(api)
    for bogus in unknown:
        assert api.get(f"/v1/desktops/{bogus}/screenshot").status_code == 404
        assert api.get(f"/v1/desktops/{bogus}/no/such/route").status_code == 404
    after = scrape(api)
    template = "/v1/desktops/{desktop_id}/screenshot"
    requests = "sandbox_desktop_http_requests_total"
    assert value(after, requests, method="GET", route=template, status="200") >= 1
    assert value(after, requests, method="GET", route=template, status="404") - \
        value(before, requests, method="GET", route=template, status="404") == 20
    assert value(after, requests, method="GET", route="/v1/desktops/{desktop_id}/status", status="200") >= 1
    assert value(after, requests, method="GET", route="unmatched", status="404") - \
        value(before, requests, method="GET", route="unmatched", status="404") == 20
    # Forty requests with twenty ids add at most two label sets (404 on the template, and unmatched): a counter
    # sample and a latency histogram (its buckets, +Inf, _count and _sum) each.
    assert len(after) - len(before) <= 2 * (1 + len(LATENCY_BUCKETS) + 3)
    for _, labels in after:
        for name, label in labels:
            assert not any(bogus in label for bogus in unknown), (name, label)
            assert name == "desktop" or desktop_id not in label, (name, label)
    delete(api, desktop_id)


def test_json_logs_name_the_desktop_of_each_request_and_lifecycle_event(srv: ServerProcess,
                                                                       api: httpx.Client) -> None:
    desktop_id = create(api, tags={"agent": "a1"})
    assert api.get(f"/v1/desktops/{desktop_id}/screenshot").status_code == 200
    assert httpx.get(f"{srv.url}/v1/desktops/{desktop_id}/status").status_code == 401  # refused: named too
    assert api.get("/v1/desktops").status_code == 200
    delete(api, desktop_id)

    def logged() -> list[dict[str, Any]] | None:
        # The access line is written once the response is sent: the DELETE's may follow its answer.
        entries = log_entries(srv)
        done = any(e["logger"] == "sandbox_desktop.access" and e["http"]["method"] == "DELETE"
                   and e.get("desktop") == desktop_id for e in entries)
        return entries if done else None

    entries = wait_for(logged, "the DELETE's access line")
    access = [e for e in entries if e["logger"] == "sandbox_desktop.access"]
    shot = next(e for e in access if e["http"]["path"] == f"/v1/desktops/{desktop_id}/screenshot")
    assert shot["desktop"] == desktop_id and shot["message"].endswith(f" desktop={desktop_id}")
    assert shot["http"]["route"] == "/v1/desktops/{desktop_id}/screenshot"
    refused = next(e for e in access if e["http"]["path"] == f"/v1/desktops/{desktop_id}/status")
    assert refused["http"]["status"] == 401 and refused["desktop"] == desktop_id
    assert all("desktop" not in e for e in access if e["http"]["path"] == "/v1/desktops")
    removal = next(e for e in access if e["http"]["method"] == "DELETE" and desktop_id in e["http"]["path"])
    assert removal["desktop"] == desktop_id
    lifecycle = [e for e in entries if e["logger"] == "sandbox_desktop.desktops" and e.get("desktop") == desktop_id]
    created = next(e for e in lifecycle if " created" in e["message"])
    assert created["tags"] == {"agent": "a1"} and created["display"].startswith(":")
    deleted = next(e for e in lifecycle if " deleted" in e["message"])
    assert deleted["reason"] == "deleted"


def test_text_logs_end_the_access_line_with_the_desktop(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--log-level", "info")
    try:
        with server.client() as api:
            desktop_id = create(api)
            assert api.get(f"/v1/desktops/{desktop_id}/status").status_code == 200
            delete(api, desktop_id)
    finally:
        server.stop()
    log = server.log()
    assert f"sandbox_desktop.access: GET /v1/desktops/{desktop_id}/status 200 " in log
    line = next(t for t in log.splitlines() if f"GET /v1/desktops/{desktop_id}/status 200" in t)
    assert line.endswith(f" ms desktop={desktop_id}"), line
