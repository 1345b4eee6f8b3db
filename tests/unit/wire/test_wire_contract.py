"""The wire contract in one place (sandbox_desktop_wire): enums, limits and problem codes.

Checks that the Literal spellings kept for type hints list their enum's values, that the models state the
limits in their schemas, that every domain exception names a code of the one table and is rendered with
its status and title, and that docs/errors.md lists that table as it is.
"""

from __future__ import annotations

import enum
import re
from typing import Any, get_args

import pytest

import desktop.core.errors as domain
from api.http.problems import problem_document, problem_headers, status_of
from desktop.processes.child import InputNotRead
from sandbox_desktop_wire import enums, limits
from sandbox_desktop_wire.desktop import DesktopStartRequest, DesktopState
from sandbox_desktop_wire.mouse import Button, MouseClickRequest
from sandbox_desktop_wire.problems import PROBLEMS, ProblemCode, problem_type
from sandbox_desktop_wire.processes import Owner
from sandbox_desktop_wire.recording import RecordingStatus
from sandbox_desktop_wire.screenshot import ImageFormat
from tests.support.paths import DOCS

DOC = DOCS / "errors.md"
BEGIN, END = "<!-- problem codes: begin (tests/unit/wire/test_wire_contract.py) -->", "<!-- problem codes: end -->"


@pytest.mark.parametrize(("alias", "members"), [
    (Button, enums.MouseButton), (ImageFormat, enums.ScreenshotFormat), (Owner, enums.ProcessOwner),
    (DesktopState, enums.DesktopRuntimeState), (RecordingStatus, enums.RecordingState),
])
def test_literal_aliases_list_their_enum(alias: Any, members: type[enum.StrEnum]) -> None:
    assert list(get_args(alias)) == [m.value for m in members]


def test_models_state_the_limits_in_their_schema() -> None:
    width = next(b for b in DesktopStartRequest.model_json_schema(by_alias=True)["properties"]["width"]["anyOf"]
                 if b.get("type") == "integer")
    assert (width["minimum"], width["maximum"]) == (limits.MIN_DIMENSION, limits.MAX_DIMENSION)
    count = MouseClickRequest.model_json_schema(by_alias=True)["properties"]["clickCount"]
    assert count["maximum"] == limits.MAX_CLICKS


def _domain_classes() -> list[type[domain.DomainError]]:
    found = [c for c in vars(domain).values() if isinstance(c, type) and issubclass(c, domain.DomainError)]
    return [*found, InputNotRead]


@pytest.mark.parametrize("cls", _domain_classes(), ids=lambda c: c.__name__)
def test_every_domain_exception_names_a_code_of_the_table(cls: type[domain.DomainError]) -> None:
    assert cls.code in PROBLEMS


@pytest.mark.parametrize(("exc", "status", "title", "detail", "headers"), [
    (domain.DesktopInactive("no desktop"), 409, "Desktop Runtime Inactive", "no desktop", {}),
    (domain.WindowNotFound("Window 7 not found"), 404, "Window Not Found", "Window 7 not found", {}),
    (domain.DesktopFailed("restarting", retry_after=1), 503, "Desktop Runtime Failed", "restarting",
     {"Retry-After": "1"}),
    (domain.Conflict("busy"), 409, "Conflict", "conflict: busy", {}),
    (domain.DesktopAlreadyActive("1440"), 409, "Conflict", "conflict: 1440", {}),
    (domain.PermissionDenied("off", code="api_disabled"), 403, "Permission Denied", "permission denied: off", {}),
    (domain.PayloadTooLarge("big"), 413, "Payload Too Large", "invalid request: big", {}),
    (domain.NotFound("process", "proc_9"), 404, "Not Found", "not found: process proc_9", {}),
    (domain.CommandBusy("command", "a", "busy", message="busy"), 409, "Command Busy", "busy", {}),
    (domain.WorkingDirectoryNotFound("cwd", "b", "gone", message="gone"), 422, "Cwd Not Found", "gone", {}),
    (InputNotRead("slow"), 409, "Conflict", "timeout: slow", {}),
    (domain.Timeout("slow"), 504, "Timeout", "timeout: slow", {}),
    (domain.RangeNotSatisfiable("outside", size=9), 416, "Range Not Satisfiable", "outside",
     {"Content-Range": "bytes */9"}),
    (domain.ScreenshotFailed("no grab", retry_after=1), 502,
     "Desktop Screenshot Failed", "no grab", {"Retry-After": "1"}),
    (domain.FieldError([{"location": "body", "field": "x", "message": "m", "type": "missing"}], wrong_shape=True),
     422, "Unprocessable Entity", "invalid x: m", {}),
    (domain.FieldError([{"location": "body", "field": "x", "message": "m", "type": "t"}],
                       code="desktop_invalid_action"), 400, "Desktop Invalid Action", "invalid x: m", {}),
])
def test_api_renders_each_exception_as_before(exc: domain.DomainError, status: int, title: str, detail: str,
                                              headers: dict[str, str]) -> None:
    body = problem_document(exc)
    assert (status_of(exc), body["status"], body["title"], body["detail"]) == (status, status, title, detail)
    assert body["type"] == problem_type(exc.code) and body["code"] == exc.code
    assert problem_headers(exc) == headers


def test_each_desktop_problem_is_raised_by_its_own_class() -> None:
    # A desktop problem is raised by name (`DesktopPaused(message)`): one class per code, so that
    # catching a class means catching one code, and the problem code is not a positional argument.
    named = [c for c in _domain_classes() if issubclass(c, domain.DesktopError) and "code" in vars(c)]
    assert len({c.code for c in named}) == len(named)
    assert domain.DesktopPaused("paused").code == ProblemCode.DESKTOP_PAUSED
    with pytest.raises(TypeError):
        domain.DesktopError("desktop_paused", "paused")  # type: ignore[misc]


def render_table() -> str:
    """docs/errors.md's table of every code, from the one table."""
    rows = ["| code | status | title | when |", "|---|---|---|---|"]
    for code, spec in PROBLEMS.items():
        status = ", ".join(str(s) for s in (spec.status, *spec.also))
        title = "; ".join([spec.title, *(f"{s}: {t}" for s, t in spec.also.items())])
        rows.append(f"| `{code}` | {status} | {title} | {spec.when} |")
    return "\n".join(rows)


def test_errors_doc_lists_every_code_as_the_table_has_it() -> None:
    text = DOC.read_text()
    match = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    assert match is not None, f"docs/errors.md lacks the {BEGIN!r} ... {END!r} section"
    assert match.group(1) == render_table(), "docs/errors.md disagrees with sandbox_desktop_wire/problems.py; " \
        "replace its table with:\n" + render_table()


def test_problem_codes_are_unique_snake_case() -> None:
    assert all(re.fullmatch(r"[a-z_]+", code) for code in ProblemCode)
