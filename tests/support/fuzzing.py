"""The fuzzer behind tests/api/http/test_fuzz.py and bench/fuzz.py: every API operation from the server's own
OpenAPI document, with generated requests (schemathesis).

Each operation gets valid (positive) and invalid (negative) generated requests against a real server
with an active desktop; every response must be a documented status, with the documented content type
(problem+json on errors) and a JSON body valid against the documented schema, and never a 5xx but the
two `server_error` allows: whatever a request gets wrong is the caller's mistake, a 4xx
(docs/errors.md). Process cases carry mistakes on purpose (tests/support/fuzz_inputs.py).
The operations that change state later cases need (`STATEFUL`) run in a phase of their own, on a
second server whose xdg-open is a stub: each case starts from a set-up state and is followed by a reset.
`tests/api/http/test_fuzz.py` runs it with a few examples per operation, `bench/fuzz.py` with many more.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from desktop.lifecycle.options import MAX_DIMENSION
from sandbox_desktop_wire.enums import AudioCodec, VideoCodec
from tests.conftest import ServerProcess, launch_server
from tests.support.fuzz_inputs import CONFIG, START, STATEFUL_DISPLAY, STATEFUL_PORTS, tame

FUZZ_DESKTOP = {"displayNum": 353}

# The states a stateful case can start from: the phase's desktop with nothing running, the same with
# the live view armed and a recording running, and no desktop at all.
IDLE, BUSY, INACTIVE = "idle", "busy", "inactive"
# Operations that change state later cases need, and the states each is fuzzed from. Fuzzed on a
# server of their own (`stateful_server`); every other operation in the document runs in the main phase.
STATEFUL: dict[tuple[str, str], tuple[str, ...]] = {
    START: (IDLE, INACTIVE),
    ("POST", "/v1/desktop/stop"): (IDLE, BUSY, INACTIVE),
    ("POST", "/v1/desktop/stream/start"): (IDLE, BUSY, INACTIVE),
    ("POST", "/v1/desktop/stream/stop"): (IDLE, BUSY, INACTIVE),
    ("POST", "/v1/desktop/recording/start"): (IDLE, BUSY, INACTIVE),
    ("POST", "/v1/desktop/recording/stop"): (IDLE, BUSY, INACTIVE),
    ("POST", "/v1/desktop/open"): (IDLE, INACTIVE),
    CONFIG: (IDLE,),
}
# The stateful phase's desktop (random starts are pinned to its display and ports: tests/support/fuzz_inputs.py).
STATEFUL_DESKTOP = {"displayNum": STATEFUL_DISPLAY, "width": 640, "height": 480,
                    "webrtcPortRange": f"{STATEFUL_PORTS[0]}-{STATEFUL_PORTS[1]}"}
# The start request states its ranges only in prose. As schema bounds (in the phase's copy of the
# document) they make positive cases real starts, where random integers almost never are a valid
# geometry, and negative cases probe the edges.
START_RANGES: dict[str, dict[str, Any]] = {
    "width": {"minimum": 64, "maximum": MAX_DIMENSION},
    "height": {"minimum": 64, "maximum": MAX_DIMENSION},
    "dpi": {"minimum": 1, "maximum": 1000},
    "streamFrameRate": {"minimum": 1, "maximum": 60},
    "recordingFps": {"minimum": 1, "maximum": 60},
    "streamVideoCodec": {"enum": [c.value for c in VideoCodec]},
    "streamAudioCodec": {"enum": [c.value for c in AudioCodec]},
    "webrtcPortRange": {"pattern": "^[0-9]{4,5}-[0-9]{4,5}$"},
}
# What the stub xdg-open of the stateful server appends every target it is given to.
OPENED_LOG = "xdg-open.log"
XDG_OPEN_STUB = """#!/bin/sh
# Stands in for xdg-open on the stateful phase's server: records what it is asked to open, opens nothing.
# Like xdg-open (docs/apps.md) it refuses an option (exit 1) and a file that does not exist (exit 2).
printf '%s\\n' "$*" >> {log}
case "$1" in -*) echo "xdg-open: unexpected option '$1'" >&2; exit 1;; esac
file=$1
case "$file" in file:///*) file=${{file#file://}};; esac
if [ "$file" = "$1" ] && printf '%s' "$1" | grep -Eq '^[[:alpha:]+.-]+:'; then exit 0; fi
[ -e "$file" ] || {{ echo "xdg-open: file '$file' does not exist" >&2; exit 2; }}
"""

# A request slower than this counts as a hang.
REQUEST_TIMEOUT_S = 30.0

# `server_error` stands in for schemathesis's not_a_server_error, which allows no exception at all.
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
# The only 5xx a generated request may get (docs/errors.md): the readiness probe's documented "not
# ready", and a desktop whose packages are missing, both about the machine rather than the request.
ALLOWED_5XX_OPERATIONS = {("GET", "/v1/health/ready"): 503}
ALLOWED_5XX_CODES = {"desktop_dependencies_missing": 503}


def problem_code(response: Any) -> str | None:
    """The problem `code` of an error response (httpx's or schemathesis's), if it has one."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    return body.get("code") if isinstance(body, dict) and isinstance(body.get("code"), str) else None


def server_error(method: str, path: str, response: Any) -> str | None:
    """Why this answer breaks the no-5xx rule, or None if it keeps it."""
    status, code = response.status_code, problem_code(response)
    if status < 500 or ALLOWED_5XX_OPERATIONS.get((method.upper(), path)) == status:
        return None
    if code is not None and ALLOWED_5XX_CODES.get(code) == status:
        return None
    return (f"server error: {status} {code or 'without a code'}; a generated request must get a 4xx for "
            "what it gets wrong, a 5xx only for the machine's faults (docs/errors.md)")


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
    answers: dict[str, set[tuple[int, str | None]]] = field(default_factory=dict)
    """Per operation, every (status, problem code) it answered."""
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


# Uploads (`PUT /v1/fs/file`, `POST /v1/fs/upload-batch`) take raw bytes in the media types their operations
# name: generated binary bodies are sent as they are, as the built-in octet-stream serializer sends them.
schemathesis.serializer.alias(["application/x-tar", "application/gzip"], "application/octet-stream")


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


def with_start_ranges(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of `document` whose desktop start request carries `START_RANGES` on its non-null branches."""
    document = copy.deepcopy(document)
    properties = document["components"]["schemas"]["DesktopStartRequest"]["properties"]
    for name, bounds in START_RANGES.items():
        next(branch for branch in properties[name]["anyOf"] if branch.get("type") != "null").update(bounds)
    return document


def op_key(op: Any) -> tuple[str, str]:
    return (op.method.upper(), op.path)


def op_label(op: Any) -> str:
    return f"{op.method.upper()} {op.path}"


def operations(schema: Any, stateful: bool = False) -> Iterator[Any]:
    """The main phase's operations (or the stateful phase's); a broken one fails loudly."""
    for result in schema.get_all_operations():
        op = result.ok()
        if (op_key(op) in STATEFUL) == stateful:
            yield op


class StateError(Exception):
    """Setting up a stateful case's state, or resetting after it, went wrong."""


def fuzz_operation(op: Any, mode: GenerationMode, max_examples: int, headers: dict[str, str], sandbox: Path,
                   report: FuzzReport, around: Callable[[], AbstractContextManager[None]] | None = None,
                   context: str = "") -> None:
    """`max_examples` generated cases of one operation in one mode, each sent and checked.

    `around` wraps each sent case (set up the state before, reset after); `context` names that state.
    """
    label = op_label(op)
    how = f"{mode.value}, {context}" if context else mode.value

    def send(case: Any, request: str) -> None:
        try:
            response = case.call(headers=headers, timeout=REQUEST_TIMEOUT_S)
        except Exception as exc:  # a hang or a dropped connection is a finding, not a crash
            report.add(Failure(label, how, request, None, "", f"transport: {exc!r}"))
            return
        code = problem_code(response) if response.status_code >= 400 else None
        report.answers.setdefault(label, set()).add((response.status_code, code))
        if (problem := server_error(case.method, case.path, response)) is not None:
            body = response.content[:400].decode("utf-8", "replace")
            report.add(Failure(label, how, request, response.status_code, body, problem))
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (FailureGroup, Exception) as exc:  # FailureGroup is a BaseExceptionGroup
            body = response.content[:400].decode("utf-8", "replace")
            report.add(Failure(label, how, request, response.status_code, body, str(exc)[:800]))

    @settings(max_examples=max_examples, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        tame(case, sandbox)
        report.cases[label] = report.cases.get(label, 0) + 1
        request = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r}"[:600]
        try:
            with around() if around is not None else contextlib.nullcontext():
                send(case, request)
        except StateError as exc:  # later cases would start from the wrong state: a failure of its own
            report.add(Failure(label, how, request, None, "", f"state: {exc}"))

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
            progress(op_label(op), report.cases.get(op_label(op), 0))
    report.seconds = time.monotonic() - started
    return report


def _expect(response: httpx.Response, *statuses: int) -> httpx.Response:
    if response.status_code not in statuses:
        raise StateError(f"{response.request.method} {response.request.url.path} -> "
                         f"{response.status_code}: {response.text[:300]}")
    return response


class StatefulPhase:
    """Puts the state a stateful case starts from in place, and the phase's state back after it."""

    def __init__(self, api: httpx.Client) -> None:
        self.api = api
        self.config = _expect(api.get("/v1/processes/config"), 200).json()
        self.baseline = self._desktop()
        if self.baseline[0] != "active":
            raise StateError(f"the phase's desktop is not active: {self.baseline}")

    def _desktop(self) -> tuple[Any, ...]:
        """What later cases depend on (the display may move within the phase's range: they don't care)."""
        status = _expect(self.api.get("/v1/desktop/status"), 200).json()
        return (status["state"], status.get("resolution"), status.get("stateDir"))

    @contextlib.contextmanager
    def case(self, state: str) -> Iterator[None]:
        """Around one case: set up `state` before it, reset after it (also when sending failed)."""
        if state == BUSY:
            _expect(self.api.post("/v1/desktop/stream/start"), 200)
            _expect(self.api.post("/v1/desktop/recording/start", json={"fps": 5}), 200)
        elif state == INACTIVE:
            _expect(self.api.post("/v1/desktop/stop"), 200)
        try:
            yield
        finally:
            self.reset(restart=state == INACTIVE)

    def reset(self, restart: bool) -> None:
        """The phase's desktop with nothing running, no recordings and the original process limits."""
        if restart or self._desktop() != self.baseline:
            # A random start may be running with options the status does not show: stop it either way.
            _expect(self.api.post("/v1/desktop/stop"), 200)
            _expect(self.api.post("/v1/desktop/start", json=STATEFUL_DESKTOP), 200)
            if (now := self._desktop()) != self.baseline:
                raise StateError(f"the desktop came back as {now}, not {self.baseline}")
        _expect(self.api.post("/v1/desktop/stream/stop"), 200)
        _expect(self.api.post("/v1/desktop/recording/stop"), 200, 409)  # 409: none was running
        for recording in _expect(self.api.get("/v1/desktop/recordings"), 200).json()["recordings"]:
            _expect(self.api.delete(f"/v1/desktop/recordings/{recording['id']}"), 204)
        if (config := _expect(self.api.post("/v1/processes/config", json=self.config), 200).json()) != self.config:
            raise StateError(f"the process limits came back as {config}, not {self.config}")


@contextlib.contextmanager
def stateful_server(root: Path) -> Iterator[ServerProcess]:
    """A server for the stateful phase, its desktop started; its xdg-open is a stub logging to `root/OPENED_LOG`.

    The stub comes first on the server's PATH (the rest stays, for Xvfb and openbox), so the dependency
    check and `POST /v1/desktop/open` find it and no random target reaches a real handler.
    """
    stub_dir = root / "stub-bin"
    stub_dir.mkdir()
    stub = stub_dir / "xdg-open"
    stub.write_text(XDG_OPEN_STUB.format(log=shlex.quote(str(root / OPENED_LOG))))
    stub.chmod(0o755)
    server = launch_server(root, env={"PATH": f"{stub_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"})
    try:
        with server.client() as api:
            body = api.post("/v1/desktop/start", json=STATEFUL_DESKTOP).json()
            if body.get("state") != "active":
                raise StateError(f"the stateful phase's desktop did not start: {body}")
        yield server
    finally:
        server.stop()


def fuzz_stateful(server: ServerProcess, root: Path, max_examples: int,
                  progress: Callable[[str, int], None] | None = None) -> FuzzReport:
    """Positive and negative examples of every stateful operation from each of its states, reset after each."""
    schema = load_schema(server, with_start_ranges(fetch_document(server)))
    report = FuzzReport()
    headers = {"Authorization": f"Bearer {server.token}"}
    states_root = root / "states"  # where random desktop starts keep their state
    started = time.monotonic()
    with server.client() as api:
        phase = StatefulPhase(api)
        for op in operations(schema, stateful=True):
            for state in STATEFUL[op_key(op)]:
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                    fuzz_operation(op, mode, max_examples, headers, states_root, report,
                                   around=functools.partial(phase.case, state), context=f"from {state}")
            if progress is not None:
                progress(op_label(op), report.cases.get(op_label(op), 0))
    report.seconds = time.monotonic() - started
    return report
