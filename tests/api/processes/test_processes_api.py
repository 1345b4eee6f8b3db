"""`/v1/processes` over HTTP against a real server: runs, logs over SSE, signals, input, terminals."""

from __future__ import annotations

import base64
import json
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem

DEFAULT_CONFIG = {"maxConcurrentProcesses": 64, "defaultRunTimeoutMs": 30000, "maxRunTimeoutMs": 300000,
                  "maxOutputBytes": 1048576, "maxLogBytesPerProcess": 10485760,
                  "maxInputBytesPerRequest": 65536, "maxExitedProcesses": 100}


def sh(script: str, **extra: Any) -> dict[str, Any]:
    return {"command": "sh", "args": ["-c", script], **extra}


def create(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/processes", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def wait_exited(client: httpx.Client, process_id: str, timeout: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.get(f"/v1/processes/{process_id}").json()
        if info["status"] == "exited":
            return dict(info)
        time.sleep(0.02)
    raise AssertionError(f"{process_id} still running after {timeout} s")


def sse_events(lines: Iterator[str], stop: Callable[[list[dict[str, Any]]], bool] | None = None,
               ) -> list[dict[str, Any]]:
    """Parse server-sent events until the stream ends (or `stop(events)` says enough)."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if current:
                events.append(current)
                current = {}
                if stop is not None and stop(events):
                    break
        elif line.startswith(":"):
            events.append({"comment": line[1:].strip()})
        else:
            key, _, value = line.partition(":")
            current[key] = value.removeprefix(" ")
    return events


def error_fields(problem: dict[str, object]) -> list[str]:
    """The fields a validation problem names."""
    errors = problem.get("errors")
    assert isinstance(errors, list), problem
    return [str(e["field"]) for e in errors]


def decoded(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(base64.b64decode(e["data"]) for e in entries)


# -- run ---------------------------------------------------------------------------------------


def test_run_returns_output_exit_code_and_duration(client: httpx.Client) -> None:
    response = client.post("/v1/processes/run", json=sh("printf out; printf err >&2; exit 5"))
    assert response.status_code == 200, response.text
    body = response.json()
    assert {k: v for k, v in body.items() if k != "durationMs"} == {
        "exitCode": 5, "timedOut": False, "stdout": "out", "stderr": "err",
        "stdoutTruncated": False, "stderrTruncated": False}
    assert 0 <= body["durationMs"] < 2000


def test_run_timeout_and_truncation(client: httpx.Client) -> None:
    started = time.monotonic()
    body = client.post("/v1/processes/run", json={"command": "sleep", "args": ["10"], "timeoutMs": 300}).json()
    assert body["timedOut"] is True and "exitCode" not in body and body["exitSignal"] == 9
    assert 250 <= body["durationMs"] < 2000 and time.monotonic() - started < 3
    body = client.post("/v1/processes/run", json={"command": "head", "args": ["-c", "5000", "/dev/zero"],
                                                  "maxOutputBytes": 100}).json()
    assert len(body["stdout"]) == 100 and body["stdoutTruncated"] is True and body["exitCode"] == 0


def test_run_and_create_validate_their_bodies(client: httpx.Client) -> None:
    problem = assert_problem(client.post("/v1/processes/run", json={"command": "  "}), 400)
    assert error_fields(problem) == ["command"]
    problem = assert_problem(client.post("/v1/processes/run", json={"command": "true", "timeoutMs": -1}), 400)
    assert error_fields(problem) == ["timeoutMs"]
    assert_problem(client.post("/v1/processes", json={"args": []}), 422)
    assert_problem(client.post("/v1/processes", content=b"{}"), 415)
    problem = assert_problem(client.post("/v1/processes", json={"command": "no-such-command-xyz"}), 422,
                             "command_not_found")
    assert "no-such-command-xyz" in str(problem["detail"])
    # Optional fields accept null, as the reference's clients send them.
    nulls = {"args": None, "cwd": None, "env": None, "tty": None, "interactive": None}
    made = client.post("/v1/processes", json={"command": "true", **nulls})
    assert made.status_code == 200 and made.json()["tty"] is False, made.text
    wait_exited(client, made.json()["id"])
    client.delete(f"/v1/processes/{made.json()['id']}")
    ran = client.post("/v1/processes/run", json={"command": "true", "args": None, "timeoutMs": None})
    assert ran.status_code == 200 and ran.json()["exitCode"] == 0, ran.text


# -- create, list, logs ------------------------------------------------------------------------


def test_create_and_follow_logs_over_sse(client: httpx.Client, server: ServerProcess, procs: list[str]) -> None:
    info = create(client, sh("for i in 1 2 3; do echo line$i; sleep 0.1; done; echo oops >&2"))
    procs.append(info["id"])
    assert info["owner"] == "user" and info["status"] == "running" and info["pid"] > 0
    assert {"tty": False, "interactive": False}.items() <= info.items()
    started = time.monotonic()
    with client.stream("GET", f"/v1/processes/{info['id']}/logs", params={"follow": "true"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_lines())
    assert 0.2 < time.monotonic() - started < 5  # live, and it ends after the exit
    logs = [e for e in events if e.get("event") == "log"]
    assert [e["id"] for e in logs] == ["1", "2", "3", "4"]
    entries = [json.loads(e["data"]) for e in logs]
    assert [e["sequence"] for e in entries] == [1, 2, 3, 4]
    assert [e["stream"] for e in entries] == ["stdout", "stdout", "stdout", "stderr"]
    assert decoded(entries) == b"line1\nline2\nline3\noops\n"
    assert set(entries[0]) == {"sequence", "stream", "timestampMs", "data", "encoding"}
    exited = client.get(f"/v1/processes/{info['id']}").json()
    assert exited["status"] == "exited" and exited["exitCode"] == 0 and "pid" not in exited


def test_logs_filters_and_last_event_id_resume(client: httpx.Client, procs: list[str]) -> None:
    info = create(client, sh("echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; sleep 0.05; echo d >&2"))
    procs.append(info["id"])
    wait_exited(client, info["id"])
    url = f"/v1/processes/{info['id']}/logs"
    body = client.get(url).json()
    assert body["processId"] == info["id"] and body["stream"] == "combined"
    assert [e["sequence"] for e in body["entries"]] == [1, 2, 3, 4]
    assert decoded(client.get(url, params={"stream": "stderr"}).json()["entries"]) == b"b\nd\n"
    assert [e["sequence"] for e in client.get(url, params={"tail": 2}).json()["entries"]] == [3, 4]
    assert [e["sequence"] for e in client.get(url, params={"since": 2}).json()["entries"]] == [3, 4]
    # An SSE client reconnecting with Last-Event-ID gets only what it has not seen...
    with client.stream("GET", url, params={"follow": "true"}, headers={"Last-Event-ID": "2"}) as response:
        assert [e["id"] for e in sse_events(response.iter_lines())] == ["3", "4"]
    # ...and the larger of `since` and the header wins.
    with client.stream("GET", url, params={"follow": "true", "since": 3},
                       headers={"Last-Event-ID": "1"}) as response:
        assert [e["id"] for e in sse_events(response.iter_lines())] == ["4"]
    problem = assert_problem(client.get(url, headers={"Last-Event-ID": "abc"}), 400)
    assert error_fields(problem) == ["Last-Event-ID"]
    problem = assert_problem(client.get(url, params={"stream": "both"}), 400)
    assert error_fields(problem) == ["stream"]


def test_list_is_numeric_and_filters_by_owner(client: httpx.Client, procs: list[str]) -> None:
    made = [create(client, {"command": "true"})["id"] for _ in range(3)]
    procs.extend(made)
    assert client.post("/v1/processes", json={"command": "no-such-command-xyz"}).status_code == 422
    after = create(client, {"command": "true"})["id"]
    procs.append(after)
    numbers = [int(i.removeprefix("proc_")) for i in [*made, after]]
    assert numbers == list(range(numbers[0], numbers[0] + 4))  # the failed spawn took no id
    listed = client.get("/v1/processes").json()["processes"]
    listed_numbers = [int(p["id"].removeprefix("proc_")) for p in listed]
    assert listed_numbers == sorted(listed_numbers)
    assert {p["owner"] for p in client.get("/v1/processes", params={"owner": "user"}).json()["processes"]} \
        == {"user"}
    problem = assert_problem(client.get("/v1/processes", params={"owner": "bogus"}), 400)
    assert error_fields(problem) == ["owner"]
    assert "owner" in str(problem["detail"])


def test_unknown_process_is_a_404_problem(client: httpx.Client) -> None:
    calls = [("GET", ""), ("POST", "/stop"), ("POST", "/kill"), ("DELETE", ""), ("GET", "/logs")]
    for method, suffix in calls:
        problem = assert_problem(client.request(method, f"/v1/processes/proc_999999{suffix}"), 404, "not_found")
        assert problem["details"] == {"resource": "process", "id": "proc_999999"}
    for suffix, body in (("/input", {"data": ""}), ("/terminal/resize", {"cols": 80, "rows": 24})):
        assert_problem(client.post(f"/v1/processes/proc_999999{suffix}", json=body), 404, "not_found")


# -- stop, kill, delete ------------------------------------------------------------------------


def test_stop_kill_and_delete(client: httpx.Client, procs: list[str]) -> None:
    stopped = create(client, {"command": "sleep", "args": ["30"]})
    killed = create(client, {"command": "sleep", "args": ["30"]})
    procs += [stopped["id"], killed["id"]]
    problem = assert_problem(client.delete(f"/v1/processes/{stopped['id']}"), 409, "conflict")
    assert "stop or kill it before delete" in str(problem["detail"])
    info = client.post(f"/v1/processes/{stopped['id']}/stop").json()
    assert info["status"] == "exited" and info["exitSignal"] == 15
    assert "pid" not in info and "exitCode" not in info and info["exitedAtMs"] >= info["createdAtMs"]
    info = client.post(f"/v1/processes/{killed['id']}/kill", params={"waitMs": 2000}).json()
    assert info["status"] == "exited" and info["exitSignal"] == 9
    for process in (stopped, killed):
        response = client.delete(f"/v1/processes/{process['id']}")
        assert response.status_code == 204 and response.content == b""
        assert_problem(client.get(f"/v1/processes/{process['id']}"), 404)
    problem = assert_problem(client.post(f"/v1/processes/{killed['id']}/stop", params={"waitMs": -1}), 400)
    assert error_fields(problem) == ["waitMs"]


def test_stop_reaches_the_children_of_a_shell(client: httpx.Client, procs: list[str]) -> None:
    info = create(client, sh("sleep 30 & echo $!; wait"))
    procs.append(info["id"])
    with client.stream("GET", f"/v1/processes/{info['id']}/logs", params={"follow": "true"}) as response:
        first = sse_events(response.iter_lines(), stop=lambda events: any("data" in e for e in events))
    grandchild = int(base64.b64decode(json.loads(first[-1]["data"])["data"]).split()[0])
    client.post(f"/v1/processes/{info['id']}/stop")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.02)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- input and terminals -----------------------------------------------------------------------


def test_input_to_an_interactive_cat(client: httpx.Client, procs: list[str]) -> None:
    cat = create(client, {"command": "cat", "interactive": True})
    procs.append(cat["id"])
    url = f"/v1/processes/{cat['id']}"
    assert client.post(url + "/input", json={"data": "héllo\n", "encoding": "utf8"}).json() == {"bytesWritten": 7}
    assert client.post(url + "/input", json={"data": base64.b64encode(b"\x00bin\n").decode()}).json() == {
        "bytesWritten": 5}
    with client.stream("GET", url + "/logs", params={"follow": "true"}) as response:
        def seen(events: list[dict[str, Any]]) -> bool:
            return b"bin\n" in decoded([json.loads(e["data"]) for e in events if "data" in e])
        events = sse_events(response.iter_lines(), stop=seen)
    assert decoded([json.loads(e["data"]) for e in events if "data" in e]) == "héllo\n".encode() + b"\x00bin\n"
    problem = assert_problem(client.post(url + "/input", json={"data": "x", "encoding": "latin1"}), 400)
    assert error_fields(problem) == ["encoding"]
    problem = assert_problem(client.post(url + "/input", json={"data": "not base64!"}), 400)
    assert error_fields(problem) == ["data"]
    problem = assert_problem(client.post(url + "/input", json={"data": "x" * 65537, "encoding": "text"}), 413)
    assert "maxInputBytesPerRequest" in str(problem["detail"])
    client.post(url + "/kill")
    problem = assert_problem(client.post(url + "/input", json={"data": "x", "encoding": "text"}), 409)
    assert "not running" in str(problem["detail"])
    quiet = create(client, {"command": "sleep", "args": ["30"]})
    procs.append(quiet["id"])
    problem = assert_problem(client.post(f"/v1/processes/{quiet['id']}/input",
                                         json={"data": "x", "encoding": "text"}), 409)
    assert "interactive" in str(problem["detail"])


def test_tty_process_resize_and_pty_logs(client: httpx.Client, procs: list[str]) -> None:
    term = create(client, sh("stty size; read x; stty size", tty=True))
    procs.append(term["id"])
    url = f"/v1/processes/{term['id']}"
    assert term["tty"] is True
    with client.stream("GET", url + "/logs", params={"follow": "true"}) as response:
        sse_events(response.iter_lines(), stop=lambda events: b"\n" in decoded(
            [json.loads(e["data"]) for e in events if "data" in e]))
    assert client.post(url + "/terminal/resize", json={"cols": 100, "rows": 40}).json() == {"cols": 100, "rows": 40}
    problem = assert_problem(client.post(url + "/terminal/resize", json={"cols": 0, "rows": 40}), 400)
    assert error_fields(problem) == ["cols"]
    client.post(url + "/input", json={"data": "\n", "encoding": "text"})
    wait_exited(client, term["id"])
    body = client.get(url + "/logs").json()
    assert body["stream"] == "pty" and {e["stream"] for e in body["entries"]} == {"pty"}
    output = decoded(body["entries"])
    assert output.startswith(b"24 80\r\n") and output.endswith(b"40 100\r\n")
    plain = create(client, {"command": "sleep", "args": ["30"]})
    procs.append(plain["id"])
    problem = assert_problem(client.post(f"/v1/processes/{plain['id']}/terminal/resize",
                                         json={"cols": 80, "rows": 24}), 409)
    assert "tty" in str(problem["detail"])


# -- config and limits -------------------------------------------------------------------------


def test_config_defaults_validation_and_clamp(client: httpx.Client) -> None:
    assert client.get("/v1/processes/config").json() == DEFAULT_CONFIG
    try:
        problem = assert_problem(client.post("/v1/processes/config",
                                             json={**DEFAULT_CONFIG, "maxOutputBytes": 0}), 400)
        assert error_fields(problem) == ["maxOutputBytes"]
        applied = client.post("/v1/processes/config", json={
            **DEFAULT_CONFIG, "defaultRunTimeoutMs": 9000, "maxRunTimeoutMs": 400}).json()
        assert applied["defaultRunTimeoutMs"] == 400 and applied["maxRunTimeoutMs"] == 400
        body = client.post("/v1/processes/run", json={"command": "sleep", "args": ["5"]}).json()
        assert body["timedOut"] is True and body["durationMs"] < 2000
    finally:
        assert client.post("/v1/processes/config", json=DEFAULT_CONFIG).status_code == 200
    assert client.get("/v1/processes/config").json() == DEFAULT_CONFIG


def test_concurrency_limit_says_how_to_raise_it(client: httpx.Client, procs: list[str]) -> None:
    running = [p for p in client.get("/v1/processes", params={"owner": "user"}).json()["processes"]
               if p["status"] == "running"]
    try:
        client.post("/v1/processes/config", json={**DEFAULT_CONFIG, "maxConcurrentProcesses": len(running) + 1})
        procs.append(create(client, {"command": "sleep", "args": ["30"]})["id"])
        problem = assert_problem(client.post("/v1/processes", json={"command": "sleep", "args": ["30"]}), 409)
        assert "maxConcurrentProcesses" in str(problem["detail"])
    finally:
        client.post("/v1/processes/config", json=DEFAULT_CONFIG)


@pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("openbox") is None,
                    reason="needs Xvfb and openbox")
def test_desktop_processes_are_protected(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory()
    with srv.client() as api:
        started = api.post("/v1/desktop/start", json={})
        assert started.status_code == 200, started.text
        try:
            desktop = api.get("/v1/processes", params={"owner": "desktop"}).json()["processes"]
            xvfb = next(p for p in desktop if p["command"] == "Xvfb" and p["status"] == "running")
            for method, suffix in (("POST", "/stop"), ("POST", "/kill"), ("DELETE", "")):
                problem = assert_problem(api.request(method, f"/v1/processes/{xvfb['id']}{suffix}"), 409)
                assert "use POST /v1/desktop/stop" in str(problem["detail"])
            assert api.get(f"/v1/processes/{xvfb['id']}").json()["status"] == "running"
            # User processes get the desktop's DISPLAY.
            display = api.get("/v1/desktop/status").json()["display"]
            run = api.post("/v1/processes/run", json=sh("echo $DISPLAY")).json()
            assert run["stdout"].strip() == display
        finally:
            api.post("/v1/desktop/stop")


def test_sigterm_ends_open_log_follows_promptly(server_factory: Callable[..., ServerProcess]) -> None:
    """An open `follow=true` stream must not hold the server's shutdown for the graceful timeout."""
    import threading

    srv = server_factory()
    with srv.client() as api:
        proc = api.post("/v1/processes", json={"command": "sleep", "args": ["60"]}).json()
        opened = threading.Event()

        def follow() -> None:
            with srv.client() as c, c.stream("GET", f"/v1/processes/{proc['id']}/logs",
                                              params={"follow": "true"}) as response:
                opened.set()
                for _ in response.iter_bytes():
                    pass

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert opened.wait(10)
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(20)
        elapsed = time.monotonic() - started
        reader.join(10)
    print(f"\nSIGTERM with an open follow stream -> exit after {elapsed * 1000:.0f} ms")
    assert not reader.is_alive()
    assert elapsed < 4, "shutdown waited for the follow stream"
