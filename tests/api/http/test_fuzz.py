"""Fuzzing of every API operation (the harness is tests/support/fuzzing.py): valid and invalid generated requests
against a real server with an active desktop; no 5xx (docs/errors.md), only documented statuses, content
types and bodies.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

pytest.importorskip("schemathesis")

from schemathesis import GenerationMode
from schemathesis.core import NotSet

from tests.conftest import ServerProcess
from tests.support.fuzz_inputs import MAX_START_DIMENSION, STATEFUL_DISPLAY, _confine_start, _port_range
from tests.support.fuzzing import (
    FUZZ_DESKTOP,
    OPENED_LOG,
    STATEFUL,
    FuzzReport,
    _expect,
    fetch_document,
    fuzz,
    fuzz_operation,
    fuzz_stateful,
    load_schema,
    op_label,
    operations,
    server_error,
    stateful_server,
)

DESKTOP = FUZZ_DESKTOP


def test_fuzz_every_operation(srv: ServerProcess, tmp_path: Path) -> None:
    report = fuzz(srv, tmp_path, max_examples=12)
    print(report.render())
    fuzzed = set(report.cases)
    assert len(fuzzed) >= 40, sorted(fuzzed)  # the document lost operations, or the loader skipped them
    assert fuzzed == {op_label(op) for op in operations(load_schema(srv))}, sorted(fuzzed)
    assert srv.proc.poll() is None, srv.log()
    assert not report.failures, report.render()
    for label in ("POST /v1/processes", "POST /v1/processes/run"):  # the mistakes were sent, and were 4xx
        refused = {code for status, code in report.answers[label] if status == 422}
        assert {"command_not_found", "command_not_executable"} <= refused, report.answers[label]


def test_fuzz_stateful_operations(tmp_path: Path) -> None:
    """Every operation the main phase leaves out, from each of its states, with a reset after each case."""
    with stateful_server(tmp_path) as server:
        report = fuzz_stateful(server, tmp_path, max_examples=5)
        print(report.render())
        with server.client() as api:  # the stub, not a real handler, is what opens targets
            opened = _expect(api.post("/v1/desktop/open", json={"target": "https://fuzz.invalid/x"}), 200).json()
            missing = api.post("/v1/desktop/open", json={"target": "no-such-file.txt"})
            option = api.post("/v1/desktop/open", json={"target": "-x"})
        alive = server.proc.poll() is None
        log = server.log()
    assert set(report.cases) == {f"{method} {path}" for method, path in STATEFUL}, sorted(report.cases)
    started_on = {int(num) for log in tmp_path.rglob("desktop-runtime.log")
                  for num in re.findall(r"desktop runtime active on :(\d+)", log.read_text())}
    assert started_on and started_on <= set(range(STATEFUL_DISPLAY, STATEFUL_DISPLAY + 10)), started_on
    assert opened["exitCode"] in (0, None), opened
    assert "https://fuzz.invalid/x" in (tmp_path / OPENED_LOG).read_text().splitlines(), opened
    # The stub fails as xdg-open does, so the cases reach the server's 4xx answers to a failed open.
    assert (missing.status_code, missing.json()["code"]) == (422, "target_not_found"), missing.text
    assert (option.status_code, option.json()["code"]) == (422, "app_exited"), option.text
    assert alive, log
    assert not report.failures, report.render()


def test_fuzzer_reports_a_schema_violation(srv: ServerProcess, tmp_path: Path) -> None:
    """The checks bite: a document demanding a field the server never sends yields a failure."""
    document = fetch_document(srv)
    ok = document["paths"]["/v1/desktop/status"]["get"]["responses"]["200"]
    ok["content"]["application/json"]["schema"] = {"type": "object", "required": ["noSuchField"]}
    op = next(o for o in operations(load_schema(srv, document)) if o.path == "/v1/desktop/status")
    report = FuzzReport()
    fuzz_operation(op, GenerationMode.POSITIVE, 3, {"Authorization": f"Bearer {srv.token}"}, tmp_path, report)
    assert [f.status for f in report.failures.values()] == [200], report.render()


def test_only_the_machines_faults_may_be_a_5xx() -> None:
    """The no-5xx rule: a caller's mistake answered 5xx is a finding; the two documented exceptions are not."""
    def answer(status: int, code: str) -> httpx.Response:
        return httpx.Response(status, json={"status": status, "code": code})

    assert server_error("POST", "/v1/processes", answer(502, "stream_error")) is not None
    assert server_error("POST", "/v1/desktop/open", answer(500, "internal_error")) is not None
    assert server_error("GET", "/v1/desktop/status", answer(503, "desktop_runtime_failed")) is not None
    assert server_error("GET", "/v1/desktop/status", httpx.Response(502, text="bad gateway")) is not None
    assert server_error("POST", "/v1/processes", answer(422, "command_not_found")) is None
    assert server_error("get", "/v1/health/ready", answer(503, "desktop_not_ready")) is None
    assert server_error("GET", "/v1/health/ready", answer(500, "internal_error")) is not None
    assert server_error("POST", "/v1/desktop/start", answer(503, "desktop_dependencies_missing")) is None


def test_random_starts_are_confined(tmp_path: Path) -> None:
    """A generated start cannot pick another display, a huge screen, outside ports or state elsewhere."""
    body = _confine_start({"width": 8192, "height": 100, "displayNum": 99, "stateDir": "/etc",
                           "webrtcPortRange": "1024-65535"}, tmp_path)
    assert body == {"width": MAX_START_DIMENSION, "height": 100, "displayNum": STATEFUL_DISPLAY,
                    "stateDir": str(tmp_path / "_etc"), "webrtcPortRange": "59494-59495"}
    assert _confine_start(NotSet(), tmp_path) == {"displayNum": STATEFUL_DISPLAY}  # `{}` would mean display 99
    assert _confine_start({"displayNum": None}, tmp_path) == {"displayNum": STATEFUL_DISPLAY}
    assert _confine_start(b" \n", tmp_path) == {"displayNum": STATEFUL_DISPLAY}  # blank reads as `{}` too
    raw = _confine_start(b'{"width": 5000}', tmp_path)
    assert raw == {"width": MAX_START_DIMENSION, "displayNum": STATEFUL_DISPLAY}
    for malformed in (b"\x00{", b"[1]", "null"):  # refused before anything starts
        assert _confine_start(malformed, tmp_path) == malformed
    assert _port_range("59050-59070") == "59490-59490"
    for invalid in ("80-90", "2000-1999", "²-³", "x"):  # left for the server to refuse
        assert _port_range(invalid) == invalid
