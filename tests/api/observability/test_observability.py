"""`/v1/metrics` (Prometheus) and the server's logs: figures that move with real work, lines a collector can parse."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess, assert_problem, launch_server, wait_for
from tests.support.pids import child_host_pid

DESKTOP = {"displayNum": 431, "width": 640, "height": 480}


def scrape(api: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, keyed by (name, sorted labels)."""
    response = api.get("/v1/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain"), response
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_the_token(srv: ServerProcess) -> None:
    assert_problem(httpx.get(srv.url + "/v1/metrics"), 401, "token_invalid")


def test_requests_are_counted_and_timed_by_route_template(srv: ServerProcess, api: httpx.Client) -> None:
    before = scrape(api)
    window = api.get("/v1/desktop/windows").json()["windows"]
    for _ in range(3):
        assert api.get("/v1/desktop/status").status_code == 200
    assert api.post("/v1/desktop/windows/0x7fffffff/focus").status_code == 404
    assert httpx.get(srv.url + "/v1/desktop/status").status_code == 401
    assert api.get("/v1/no/such/route/" + "x" * 20).status_code == 404
    after = scrape(api)
    status = {"method": "GET", "route": "/v1/desktop/status"}
    assert value(after, "sandbox_desktop_http_requests_total", status="200", **status) - \
        value(before, "sandbox_desktop_http_requests_total", status="200", **status) == 3
    assert value(after, "sandbox_desktop_http_requests_total", status="401", **status) == \
        value(before, "sandbox_desktop_http_requests_total", status="401", **status) + 1
    # Ids go into the template, not into labels: the label set stays bounded whatever clients send.
    assert value(after, "sandbox_desktop_http_requests_total", method="POST",
                 route="/v1/desktop/windows/{id}/focus", status="404") >= 1
    assert value(after, "sandbox_desktop_http_requests_total", method="GET", route="unmatched", status="404") >= 1
    assert not any("0x7fffffff" in str(labels) or "xxxx" in str(labels) for _, labels in after)
    count = value(after, "sandbox_desktop_http_request_duration_seconds_count", **status)
    assert count - value(before, "sandbox_desktop_http_request_duration_seconds_count", **status) == 4
    assert value(after, "sandbox_desktop_http_request_duration_seconds_sum", **status) > 0
    assert isinstance(window, list)


def test_screenshot_capture_and_encode_are_timed_per_format(api: httpx.Client) -> None:
    before = scrape(api)
    for fmt in ("png", "jpeg", "jpeg", "webp"):
        assert api.get("/v1/desktop/screenshot", params={"format": fmt}).status_code == 200
    after = scrape(api)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("sandbox_desktop_screenshot_capture_seconds_count", desktop="default") == 4
    assert grew("sandbox_desktop_screenshot_capture_seconds_sum", desktop="default") > 0
    assert grew("sandbox_desktop_screenshot_encode_seconds_count", desktop="default", format="jpeg") == 2
    assert grew("sandbox_desktop_screenshot_encode_seconds_count", desktop="default", format="png") == 1
    assert grew("sandbox_desktop_screenshot_encode_seconds_count", desktop="default", format="webp") == 1


def test_desktop_state_and_restarts_follow_the_desktop(api: httpx.Client) -> None:
    samples = scrape(api)
    assert value(samples, "sandbox_desktop_up", desktop="default") == 1
    assert value(samples, "sandbox_desktop_state", desktop="default", state="active") == 1
    assert value(samples, "sandbox_desktop_state", desktop="default", state="failed") == 0
    assert ("sandbox_desktop_state", (("desktop", "default"), ("state", "paused"))) in samples
    assert value(samples, "sandbox_desktop_desktops", state="active") == 1
    restarts = value(samples, "sandbox_desktop_restarts_total", desktop="default")
    os.kill(child_host_pid(api.get("/v1/desktop/status").json(), "openbox"), signal.SIGKILL)
    wait_for(lambda: value(scrape(api), "sandbox_desktop_restarts_total", desktop="default") == restarts + 1,
             "the restart counted")
    wait_for(lambda: api.get("/v1/health/ready").status_code == 200, "the desktop ready again")
    assert value(scrape(api), "process_open_fds") > 0  # the standard process collector is there too


def test_recordings_are_counted_and_the_active_one_shows(api: httpx.Client) -> None:
    before = scrape(api)
    rec = api.post("/v1/desktop/recording/start", json={})
    assert rec.status_code == 200, rec.text
    assert value(scrape(api), "sandbox_desktop_recording_active", desktop="default") == 1
    time.sleep(0.5)
    assert api.post("/v1/desktop/recording/stop").json()["status"] == "completed"
    after = scrape(api)
    assert value(after, "sandbox_desktop_recording_active", desktop="default") == 0
    for event in ("started", "completed"):
        assert value(after, "sandbox_desktop_recordings_total", desktop="default", event=event) == \
            value(before, "sandbox_desktop_recordings_total", desktop="default", event=event) + 1
    assert ("sandbox_desktop_stream_viewers", (("desktop", "default"),)) in after
    assert value(after, "sandbox_desktop_stream_viewers", desktop="default") == 0


def test_json_logs_are_one_object_a_line_with_request_fields_and_no_query(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--log-format", "json", "--log-level", "info")
    try:
        with server.client() as api:
            assert api.get("/v1/desktop/status", params={"access_token": server.token, "x": "1"}).status_code == 200
            assert httpx.get(server.url + "/v1/processes").status_code == 401
    finally:
        server.stop()
    lines = [line for line in server.log().splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in lines]
    assert entries and all({"ts", "level", "logger", "message"} <= set(e) for e in entries)
    access = [e for e in entries if e["logger"] == "sandbox_desktop.access"]
    status = next(e for e in access if e["http"]["path"] == "/v1/desktop/status")
    assert status["http"]["status"] == 200 and status["http"]["route"] == "/v1/desktop/status"
    assert status["desktop"] == "default"
    assert all("desktop" not in e for e in access if e["http"]["path"] == "/v1/processes")
    assert status["http"]["duration_ms"] >= 0 and status["http"]["client"] == "127.0.0.1"
    assert any(e["http"]["status"] == 401 for e in access)
    assert server.token and server.token not in server.log()
    assert "color_message" not in server.log()


def test_text_logs_stay_the_default(tmp_path: Path) -> None:
    server = launch_server(tmp_path, "--log-level", "info")
    try:
        with server.client() as api:
            api.get("/v1/desktop/status")
    finally:
        server.stop()
    assert " INFO sandbox_desktop.access: GET /v1/desktop/status 200 " in server.log()
    assert re.search(r"GET /v1/desktop/status 200 [0-9.]+ ms desktop=default\n", server.log())


def test_tokens_are_redacted_from_any_log_message() -> None:
    from api.server.logs import redact

    assert redact('"GET /v1/stream/signaling?access_token=s3cr-et_&x=1 HTTP/1.1"') == \
        '"GET /v1/stream/signaling?access_token=[redacted]&x=1 HTTP/1.1"'
    assert redact("headers: Authorization: Bearer abc.DEF-123") == "headers: Authorization: Bearer [redacted]"
    assert redact("nothing secret here") == "nothing secret here"



def test_the_look_for_secret_marks_passes_no_message_the_patterns_would_change() -> None:
    """`redact` skips the substitutions for a message without their marks; the marks are matched as the patterns
    match them, case and Unicode case folding included (a dotless i, the Kelvin sign), so nothing slips past."""
    from api.server.logs import SECRET, SECRET_HEADER, redact

    texts = ["ACCESS_TOKEN=abc&x=1", "to\u212aen=kelvin", "auth: beaRER\tq.w-e", "author\u0131zation: Basic eA==",
             "AUTHOR\u0130ZATION: Token t", "Proxy-Authorization: Digest d", "token = spaced", "bearer", "tokens",
             "GET /v1/desktops/dsk_1/screenshot 200 3.1 ms desktop=dsk_1", "authorization", "x-token=1; bearer y"]
    for text in texts:
        assert redact(text) == SECRET_HEADER.sub(r"\1[redacted]", SECRET.sub(r"\1[redacted]", text)), text
    assert "kelvin" not in redact("to\u212aen=kelvin") and "eA==" not in redact("author\u0131zation: Basic eA==")


def test_sigusr1_logs_where_each_request_and_thread_waits(srv: ServerProcess, api: httpx.Client) -> None:
    """The dump a failed test attaches (tests/conftest.py): a request in flight shows in its handler, the desktop's
    X thread by its name (docs/operations.md, "What is it doing?")."""
    assert api.get("/v1/desktop/screenshot").status_code == 200  # the desktop's X thread is running

    def dump_in_request() -> str | None:
        log = srv.stacks()
        dump = log[log.rindex("stack dump"):]
        return dump if "in run_process" in dump else None

    with httpx.Client(base_url=srv.url, headers=api.headers, timeout=30) as other:
        waiting = threading.Thread(target=other.post, args=("/v1/processes/run",),
                                   kwargs={"json": {"command": "sleep", "args": ["3"]}})
        waiting.start()
        try:  # each dump is a new one: the request shows in one taken while the sleep runs
            dump = wait_for(dump_in_request, "a dump showing the request's handler")
        finally:
            waiting.join(10)
    assert "--- thread x-" in dump, dump
    descriptors = dump[dump.index("--- the loop's descriptors"):dump.index("--- processes under")]
    assert "_accept_connection" in descriptors and "in the kernel's epoll set: " in descriptors, descriptors
    assert re.search(r"^ +\d+ S \S+ sleep 3$", dump, re.MULTILINE), dump  # the run's child, sleeping
    assert re.search(r"--- \d+ threads, \d+ tasks$", dump.rstrip()), dump
    assert api.get("/v1/health").status_code == 200  # the server goes on
