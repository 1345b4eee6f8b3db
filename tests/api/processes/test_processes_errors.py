"""`/v1/processes` refusing what a request gets wrong: 4xx problems naming the field, against a real server
(docs/processes.md, Errors; docs/errors.md, Caller mistakes). Continues tests/api/processes/test_processes_api.py."""

from __future__ import annotations

import asyncio
import base64
import errno
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.problems import status_of
from desktop.core.errors import StreamError
from desktop.processes import ProcessManager, SpawnError
from desktop.processes.spawn_errors import spawn_error
from tests.conftest import assert_problem


def error_fields(problem: dict[str, object]) -> list[str]:
    errors = problem.get("errors")
    assert isinstance(errors, list), problem
    return [str(e["field"]) for e in errors]


def mistakes(tmp: Path) -> list[tuple[dict[str, Any], str, str, str]]:
    """Bodies naming what cannot be started: (body, code, the field named, what the detail says)."""
    plain, script, loader = tmp / "notes.txt", tmp / "no-shebang", tmp / "no-interpreter.sh"
    plain.write_text("echo hi\n")
    script.write_text("echo hi\n")
    loader.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    loader.chmod(0o755)
    return [({"command": "no-such-command-xyz"}, "command_not_found", "command", "was not found on PATH"),
            ({"command": "/no/such/program"}, "command_not_found", "command", "does not exist"),
            ({"command": str(plain)}, "command_not_executable", "command", "lacks the execute permission"),
            ({"command": str(tmp)}, "command_not_executable", "command", "is a directory"),
            ({"command": str(script)}, "command_not_executable", "command", "neither a binary"),
            ({"command": str(loader)}, "command_not_executable", "command", "interpreter '/no/such/interpreter'"),
            ({"command": "true", "cwd": "/no/such/dir"}, "cwd_not_found", "cwd", "does not exist"),
            ({"command": "true", "cwd": str(plain)}, "cwd_not_directory", "cwd", "is not a directory"),
            ({"command": "true", "cwd": f"{plain}/sub"}, "cwd_not_directory", "cwd", "is not a directory"),
            ({"command": "echo", "args": ["x" * 200_000]}, "arguments_too_long", "args", "128 KiB per argument")]


@pytest.mark.parametrize("path", ["/v1/processes/run", "/v1/processes"])
def test_what_cannot_be_started_is_a_422_naming_the_field(client: httpx.Client, tmp_path: Path, path: str) -> None:
    """A caller's mistake, not a server fault (docs/processes.md, Errors): never the 502 it used to be."""
    for body, code, field, says in mistakes(tmp_path):
        for extra in ({}, {"tty": True}) if path == "/v1/processes" else ({},):
            problem = assert_problem(client.post(path, json={**body, **extra}), 422, code)
            detail = str(problem["detail"])
            assert error_fields(problem) == [field] and says in detail, (body, problem)
            named = body["command"] if field == "args" else body[field]  # "args of 'echo' ..."
            assert detail.startswith(f"{field} ") and repr(named) in detail, problem
    busy = tmp_path / "being-written.sh"
    busy.write_text("#!/bin/sh\n")
    busy.chmod(0o755)
    with busy.open("a"):  # open for writing: the kernel refuses to execute it (ETXTBSY)
        problem = assert_problem(client.post(path, json={"command": str(busy)}), 409, "command_busy")
    assert error_fields(problem) == ["command"]


def test_input_the_process_does_not_read_is_a_409(client: httpx.Client, procs: list[str]) -> None:
    """Not a server fault: the process is not reading (docs/processes.md, Input); once a 504."""
    made = client.post("/v1/processes", json={"command": "sleep", "args": ["30"], "interactive": True})
    assert made.status_code == 200, made.text
    idle = made.json()
    procs.append(idle["id"])
    url = f"/v1/processes/{idle['id']}/input"
    assert client.post(url, json={"data": base64.b64encode(bytes(65536)).decode()}).json() == {"bytesWritten": 65536}
    problem = assert_problem(client.post(url, json={"data": "x", "encoding": "text"}), 409, "timeout")
    assert "did not read its input within 5 s" in str(problem["detail"])


def test_failed_starts_take_no_id(client: httpx.Client, procs: list[str], tmp_path: Path) -> None:
    first = client.post("/v1/processes", json={"command": "true"}).json()["id"]
    for body, code, _, _ in mistakes(tmp_path):
        assert_problem(client.post("/v1/processes", json=body), 422, code)
    second = client.post("/v1/processes", json={"command": "true"}).json()["id"]
    procs.extend([first, second])
    assert int(second.removeprefix("proc_")) == int(first.removeprefix("proc_")) + 1


def test_the_desktops_own_programs_failing_to_start_is_a_server_fault() -> None:
    """Xvfb or openbox missing is the machine's fault (a 5xx), unlike a command a client named."""
    async def body() -> None:
        manager = ProcessManager()
        try:
            with pytest.raises(StreamError, match="failed to start 'no-such-xvfb': command 'no-such-xvfb' was"):
                await manager.spawn("no-such-xvfb", owner="desktop", protected=True)
            with pytest.raises(SpawnError) as refused:
                await manager.spawn("no-such-xvfb", owner="desktop")
            assert status_of(refused.value) == 422
        finally:
            await manager.shutdown()
    asyncio.run(body())


def test_spawn_errors_root_cannot_provoke() -> None:
    """The mapping for what a root test server never meets: a cwd it may not enter is the caller's
    mistake; no process slot or memory is the machine's fault, and stays a 5xx."""
    def failed(code: int, filename: str) -> OSError:
        return OSError(code, os.strerror(code), filename)

    denied = spawn_error("true", "/srv/private", None, failed(errno.EACCES, "/srv/private"))
    assert (status_of(denied), denied.code, denied.message) == (
        422, "cwd_not_accessible", "cwd '/srv/private' cannot be entered by the server's user (Permission denied)")
    for code in (errno.EAGAIN, errno.ENOMEM, errno.EMFILE):
        fault = spawn_error("true", None, None, failed(code, "true"))
        assert isinstance(fault, StreamError) and status_of(fault) == 502, fault
