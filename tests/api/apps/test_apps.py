"""Launch and open on a real desktop: windows by _NET_WM_PID, environment, failures with output.

What a request gets wrong is a 4xx naming the field (docs/apps.md): an app that fails at once, a
target that does not exist, a file that is no program; never the 502 these once were.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.conftest import ServerProcess, assert_problem

DESKTOP = {"displayNum": 220}


def wait_file(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def test_launch_with_wait_returns_the_apps_window(api: httpx.Client) -> None:
    body = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "launched-term"], "wait": True})
    assert body.status_code == 200, body.text
    launched = body.json()
    assert launched["processId"].startswith("proc_") and launched["pid"] > 0
    windows = api.get("/v1/desktop/windows").json()["windows"]
    window = next(w for w in windows if w["id"] == launched["windowId"])
    assert window["title"] == "launched-term" and window["pid"] == launched["pid"]
    process = api.get(f"/v1/processes/{launched['processId']}").json()
    assert process["owner"] == "desktop" and process["status"] == "running"
    assert process["args"] == ["-T", "launched-term"]
    api.post(f"/v1/processes/{launched['processId']}/kill")


def test_wait_finds_a_window_mapped_by_a_child_process(api: httpx.Client) -> None:
    launched = api.post("/v1/desktop/launch", json={
        # `; true`: the shell stays the xterm's parent (a lone command would be exec'd in its place).
        "app": "sh", "args": ["-c", "xterm -T child-term; true"], "wait": True, "waitTimeoutMs": 10000}).json()
    windows = api.get("/v1/desktop/windows").json()["windows"]
    window = next(w for w in windows if w["id"] == launched["windowId"])
    assert window["title"] == "child-term" and window["pid"] != launched["pid"]
    api.post(f"/v1/processes/{launched['processId']}/kill")


def test_launched_app_runs_in_the_desktop_environment(api: httpx.Client, srv: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    api.post("/v1/desktop/launch", json={"app": "sh", "args": ["-c", f"env > {out}; sleep 30"]})
    env = dict(line.split("=", 1) for line in wait_file(out).splitlines() if "=" in line)
    status = api.get("/v1/desktop/status").json()
    assert env["DISPLAY"] == status["display"]
    assert env["HOME"] == str(srv.state_dir / "home")
    assert env["XDG_CONFIG_HOME"] == str(srv.state_dir / "home" / ".config")


def test_unknown_app_is_404(api: httpx.Client) -> None:
    problem = assert_problem(api.post("/v1/desktop/launch", json={"app": "no-such-app-xyz"}), 404, "app_not_found")
    assert "no-such-app-xyz" in problem["detail"]  # type: ignore[operator]


def test_app_that_exits_at_once_is_an_error_with_its_output(api: httpx.Client) -> None:
    response = api.post("/v1/desktop/launch", json={"app": "sh", "args": ["-c", "echo boom >&2; exit 3"]})
    problem = assert_problem(response, 422, "app_exited")
    assert problem["exitCode"] == 3 and "boom" in problem["output"]  # type: ignore[operator]
    assert "exit code 3" in problem["detail"]  # type: ignore[operator]
    waited = api.post("/v1/desktop/launch", json={"app": "sh", "args": ["-c", "exit 4"], "wait": True})
    assert assert_problem(waited, 422, "app_exited")["exitCode"] == 4
    # A real program refusing its arguments, as a mistyped launch does.
    refused = assert_problem(api.post("/v1/desktop/launch", json={"app": "ls", "args": ["/no/such/dir"]}), 422,
                             "app_exited")
    assert refused["exitCode"] == 2 and "/no/such/dir" in refused["output"]  # type: ignore[operator]


def test_a_file_that_is_no_program_is_a_422_naming_app(api: httpx.Client, tmp_path: Path) -> None:
    plain, script = tmp_path / "notes.txt", tmp_path / "orphan.sh"
    plain.write_text("echo hi\n")
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    plain_exec = tmp_path / "no-shebang"
    plain_exec.write_text("echo hi\n")
    plain_exec.chmod(0o755)
    for app, says in ((plain_exec, "neither a binary"), (script, "interpreter '/no/such/interpreter'")):
        problem = assert_problem(api.post("/v1/desktop/launch", json={"app": str(app)}), 422, "app_not_executable")
        assert problem["detail"].startswith(f"app '{app}' ") and says in problem["detail"], problem  # type: ignore[union-attr]
        assert [e["field"] for e in problem["errors"]] == ["app"]  # type: ignore[attr-defined]
    # Not executable at all, or a directory: not an app on PATH (the reference's 404).
    for app in (plain, tmp_path):
        assert_problem(api.post("/v1/desktop/launch", json={"app": str(app)}), 404, "app_not_found")
    huge = assert_problem(api.post("/v1/desktop/launch", json={"app": "echo", "args": ["x" * 200_000]}), 422,
                          "arguments_too_long")
    assert [e["field"] for e in huge["errors"]] == ["args"]  # type: ignore[attr-defined]


def test_launch_validation(api: httpx.Client) -> None:
    assert_problem(api.post("/v1/desktop/launch", json={"app": " "}), 400, "desktop_invalid_action")
    assert_problem(api.post("/v1/desktop/launch", json={"app": "xterm", "waitTimeoutMs": 0}), 400)
    assert_problem(api.post("/v1/desktop/launch", json={"app": "xterm", "args": "x"}), 422)
    assert_problem(api.post("/v1/desktop/open", json={"target": ""}), 400, "desktop_invalid_action")


def test_open_runs_the_registered_handler(api: httpx.Client, srv: ServerProcess, tmp_path: Path) -> None:
    home = srv.state_dir / "home"
    opened = tmp_path / "opened.txt"
    apps = home / ".local" / "share" / "applications"
    apps.mkdir(parents=True, exist_ok=True)
    handler = tmp_path / "opener.sh"
    handler.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    handler.chmod(0o755)
    (apps / "test-opener.desktop").write_text(
        f"[Desktop Entry]\nType=Application\nName=Test opener\nExec={handler} %f\nMimeType=text/plain;\n")
    (home / ".config" / "mimeapps.list").write_text("[Default Applications]\ntext/plain=test-opener.desktop\n")
    document = tmp_path / "note.txt"
    document.write_text("hello")
    response = api.post("/v1/desktop/open", json={"target": str(document)})
    assert response.status_code == 200, response.text
    assert response.json()["processId"].startswith("proc_")
    assert wait_file(opened).strip() == str(document)


def test_failing_open_reports_exit_code_and_output(api: httpx.Client, srv: ServerProcess) -> None:
    response = api.post("/v1/desktop/open", json={"target": "/no/such/file.txt"})
    problem = assert_problem(response, 422, "target_not_found")
    assert problem["detail"] == "target '/no/such/file.txt' does not exist", problem
    assert problem["exitCode"] == 2 and "does not exist" in problem["output"]  # type: ignore[operator]
    assert [e["field"] for e in problem["errors"]] == ["target"]  # type: ignore[attr-defined]
    relative = assert_problem(api.post("/v1/desktop/open", json={"target": "0"}), 422, "target_not_found")
    assert f"'0' does not exist (a relative path is looked up from {srv.state_dir / 'home'})" in relative["detail"]  # type: ignore[operator]
    option = assert_problem(api.post("/v1/desktop/open", json={"target": "--no-such-option"}), 422, "app_exited")
    assert option["exitCode"] == 1 and "xdg-open" in option["detail"]  # type: ignore[operator]
    huge = assert_problem(api.post("/v1/desktop/open", json={"target": "x" * 200_000}), 422, "arguments_too_long")
    assert [e["field"] for e in huge["errors"]] == ["target"]  # type: ignore[attr-defined]


def test_stop_ends_launched_apps(api: httpx.Client) -> None:
    launched = api.post("/v1/desktop/launch", json={"app": "sleep", "args": ["300"]}).json()
    api.post("/v1/desktop/stop")
    assert api.get(f"/v1/processes/{launched['processId']}").json()["status"] == "exited"
    assert api.post("/v1/desktop/start", json={"displayNum": 220}).json()["state"] == "active"
