"""Property-based fuzzing of every API operation from the server's own OpenAPI document (schemathesis).

Each operation gets valid (positive) and invalid (negative) generated requests against a real server
with an active desktop; every response must be a non-5xx, documented status, with the documented
content type (problem+json on errors) and a JSON body valid against the documented schema.
`bench/fuzz.py` runs the same fuzzer with many more examples.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import ServerProcess  # noqa: E402

DESKTOP = {"displayNum": 353}

# Operations not fuzzed, with the reason. Everything else in the document is.
EXCLUDED: dict[tuple[str, str], str] = {
    ("POST", "/v1/desktop/start"): "restarts the desktop under test with random geometry; covered by lifecycle tests",
    ("POST", "/v1/desktop/stop"): "stops the desktop every later case needs",
    ("POST", "/v1/desktop/stream/start"): "opens a WebRTC session that outlives the request",
    ("POST", "/v1/desktop/stream/stop"): "paired with stream/start, which is excluded",
    ("POST", "/v1/desktop/recording/start"): "starts an encoder that outlives the request and fills the disk",
    ("POST", "/v1/desktop/recording/stop"): "paired with recording/start, which is excluded",
    ("POST", "/v1/desktop/open"): "hands a random target to xdg-open, which may launch arbitrary handlers",
    ("POST", "/v1/processes/config"): "random limits (e.g. 0 processes) would turn later process cases into 409s",
}

# Commands run by the process operations are pinned to this harmless one; the other fields stay random.
SAFE_COMMAND = "true"
# Waits, delays and durations (ms) above this are clamped so one case cannot take a minute.
MAX_DURATION_MS = 200
# A request slower than this counts as a hang.
REQUEST_TIMEOUT_S = 30.0

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
_FS_MUTATING = {("PUT", "/v1/fs/file"), ("DELETE", "/v1/fs/entry"), ("POST", "/v1/fs/mkdir"),
                ("POST", "/v1/fs/upload-batch"), ("POST", "/v1/fs/move")}
_DURATION_KEY = re.compile(r"(Ms|_ms|Seconds|timeout|Timeout)$")


@dataclass
class Failure:
    """One failing case: what was sent, what came back and which check said no."""

    operation: str
    mode: str
    request: str
    status: int | None
    body: str
    check: str

    def key(self) -> tuple[str, str, int | None]:
        return (self.operation, self.check.splitlines()[0][:120], self.status)

    def render(self) -> str:
        return (f"{self.operation} [{self.mode}] -> {self.status}\n  request: {self.request}\n"
                f"  response: {self.body}\n  check: {self.check}")


@dataclass
class FuzzReport:
    """Counts per operation and the distinct failures (first example of each)."""

    cases: dict[str, int] = field(default_factory=dict)
    failures: dict[tuple[str, str, int | None], Failure] = field(default_factory=dict)
    repeats: dict[tuple[str, str, int | None], int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    def add(self, failure: Failure) -> None:
        key = failure.key()
        self.failures.setdefault(key, failure)
        self.repeats[key] = self.repeats.get(key, 0) + 1

    def render(self) -> str:
        lines = [f"{self.total} cases over {len(self.cases)} operations in {self.seconds:.1f} s, "
                 f"{len(self.failures)} distinct failures"]
        for key, failure in self.failures.items():
            lines.append(f"- ({self.repeats[key]}x) {failure.render()}")
        return "\n".join(lines)


def fetch_document(server: ServerProcess) -> dict[str, Any]:
    """`GET /v1/openapi.json` with the token."""
    headers = {"Authorization": f"Bearer {server.token}"}
    response = httpx.get(server.url + "/v1/openapi.json", headers=headers, timeout=10)
    response.raise_for_status()
    return dict(response.json())


def load_schema(server: ServerProcess, document: dict[str, Any] | None = None) -> Any:
    """The server's OpenAPI document (or a given one) as a schemathesis schema bound to the server."""
    document = document if document is not None else fetch_document(server)
    schema = schemathesis.openapi.from_dict(document)
    schema.config.update(base_url=server.url)
    return schema


def operations(schema: Any) -> Iterator[Any]:
    """Every operation the document describes that is not excluded; a broken one fails loudly."""
    for result in schema.get_all_operations():
        op = result.ok()
        if (op.method.upper(), op.path) not in EXCLUDED:
            yield op


def _clamp_durations(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (min(v, MAX_DURATION_MS) if _DURATION_KEY.search(k) and isinstance(v, int | float)
                    and not isinstance(v, bool) and math.isfinite(v) else _clamp_durations(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_clamp_durations(v) for v in value]
    return value


def _confine(path: object, root: Path) -> str:
    """A generated path re-rooted under `root`: random names stay random, but never escape."""
    name = str(path).replace("/", "_").replace("\\", "_").strip() or "x"
    if name in (".", ".."):
        name = "x"
    return str(root / name[:200])


def tame(case: Any, sandbox: Path) -> None:
    """Make a generated case safe to send: pinned commands, short waits, fs writes inside `sandbox`."""
    key = (case.method.upper(), case.path)
    if isinstance(case.body, dict):
        case.body = _clamp_durations(case.body)
        if case.path in ("/v1/processes", "/v1/processes/run") and case.method.upper() == "POST":
            case.body["command"] = SAFE_COMMAND
            if "cwd" in case.body:
                case.body["cwd"] = str(sandbox)
        if key == ("POST", "/v1/fs/move"):
            for name in ("from", "to"):
                if name in case.body:
                    case.body[name] = _confine(case.body[name], sandbox)
    if isinstance(case.query, dict):
        case.query = _clamp_durations(case.query)
        if key in _FS_MUTATING and "path" in case.query:
            case.query["path"] = _confine(case.query["path"], sandbox)


def fuzz_operation(op: Any, mode: GenerationMode, max_examples: int, headers: dict[str, str], sandbox: Path,
                   report: FuzzReport) -> None:
    """`max_examples` generated cases of one operation in one mode, each sent and checked."""
    label = f"{op.method.upper()} {op.path}"

    @settings(max_examples=max_examples, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        tame(case, sandbox)
        report.cases[label] = report.cases.get(label, 0) + 1
        request = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r}"[:600]
        try:
            response = case.call(headers=headers, timeout=REQUEST_TIMEOUT_S)
        except Exception as exc:  # a hang or a dropped connection is a finding, not a crash
            report.add(Failure(label, mode.value, request, None, "", f"transport: {exc!r}"))
            return
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (FailureGroup, Exception) as exc:  # FailureGroup is a BaseExceptionGroup
            body = response.content[:400].decode("utf-8", "replace")
            report.add(Failure(label, mode.value, request, response.status_code, body, str(exc)[:800]))

    try:
        run()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        # Nothing to get wrong: no parameters and no body, so there is no invalid request.


def fuzz(server: ServerProcess, sandbox: Path, max_examples: int,
         progress: Callable[[str, int], None] | None = None) -> FuzzReport:
    """Positive and negative examples of every fuzzed operation; failures are collected, not raised."""
    schema = load_schema(server)
    report = FuzzReport()
    headers = {"Authorization": f"Bearer {server.token}"}
    started = time.monotonic()
    for op in operations(schema):
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz_operation(op, mode, max_examples, headers, sandbox, report)
        if progress is not None:
            label = f"{op.method.upper()} {op.path}"
            progress(label, report.cases.get(label, 0))
    report.seconds = time.monotonic() - started
    return report


def test_fuzz_every_operation(srv: ServerProcess, tmp_path: Path) -> None:
    report = fuzz(srv, tmp_path, max_examples=15)
    print(report.render())
    fuzzed = set(report.cases)
    assert len(fuzzed) >= 40, sorted(fuzzed)  # the document lost operations, or the loader skipped them
    assert srv.proc.poll() is None, srv.log()
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
