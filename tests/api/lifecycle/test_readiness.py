"""`GET /v1/health/ready` and `sandbox-desktop ready`: readiness is an end-to-end check, not a state flag."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import REPO, ServerProcess, assert_problem
from tests.support.pids import child_host_pid

SCRIPT = Path(sys.executable).parent / "sandbox-desktop"
"""The installed console script, whose `ready` takes the fast path (api/cli/entry.py) that probes use."""


def run_ready(srv: ServerProcess, token: str | None) -> subprocess.CompletedProcess[str]:
    """Both ways in: the console script's fast path and the full CLI must agree."""
    env = {k: v for k, v in os.environ.items() if k not in ("SANDBOX_DESKTOP_TOKEN", "SANDBOX_DESKTOP_URL")}
    if token is not None:
        env["SANDBOX_DESKTOP_TOKEN"] = token
    env["SANDBOX_DESKTOP_URL"] = srv.url
    fast, full = (subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
                  for command in ([str(SCRIPT), "ready"], [sys.executable, "-m", "api.cli.main", "ready"]))
    assert (fast.returncode, fast.stdout.count("ok")) == (full.returncode, full.stdout.count("ok")), (fast, full)
    return fast


def test_an_inactive_desktop_is_alive_but_not_ready(srv: ServerProcess, api: httpx.Client) -> None:
    assert httpx.get(srv.url + "/v1/health").status_code == 200
    body = assert_problem(api.get("/v1/health/ready"), 503, "desktop_not_ready")
    checks = body["checks"]
    assert isinstance(checks, list) and [c["name"] for c in checks] == ["desktop"]
    assert checks[0]["ok"] is False and "not been started" in checks[0]["detail"]
    assert api.get("/v1/health/ready").headers["retry-after"] == "1"
    result = run_ready(srv, srv.token)
    assert result.returncode == 1 and "desktop_not_ready" in result.stderr, result


def test_the_token_is_required(srv: ServerProcess) -> None:
    assert_problem(httpx.get(srv.url + "/v1/health/ready"), 401, "token_invalid")
    assert run_ready(srv, None).returncode == 1


def test_an_active_desktop_passes_every_check(srv: ServerProcess, api: httpx.Client) -> None:
    assert api.post("/v1/desktop/start", json={"displayNum": 430, "width": 640, "height": 480}
                    ).json()["state"] == "active"
    body = api.get("/v1/health/ready").json()
    assert body["status"] == "ready"
    assert [c["name"] for c in body["checks"]] == ["desktop", "x_server", "window_manager", "screenshot"]
    assert all(c["ok"] and c["ms"] >= 0 for c in body["checks"]), body
    result = run_ready(srv, srv.token)
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[-1].startswith("screenshot: ok")


def test_a_frozen_x_server_fails_readiness_within_the_check_timeout(srv: ServerProcess, api: httpx.Client) -> None:
    pid = child_host_pid(api.get("/v1/desktop/status").json(), "Xvfb")
    os.kill(pid, signal.SIGSTOP)
    try:
        body = assert_problem(api.get("/v1/health/ready", timeout=15), 503, "desktop_not_ready")
    finally:
        os.kill(pid, signal.SIGCONT)
    failed = body["checks"][-1]  # type: ignore[index]
    assert failed["name"] == "x_server" and failed["ok"] is False and "no answer" in failed["detail"], body
    assert api.get("/v1/health/ready").json()["status"] == "ready"


def test_status_and_health_stay_open_while_not_ready(srv: ServerProcess, api: httpx.Client) -> None:
    api.post("/v1/desktop/stop")
    assert api.get("/v1/desktop/status").json()["state"] == "inactive"
    assert httpx.get(srv.url + "/v1/health").json() == {"status": "ok"}
    assert_problem(api.get("/v1/health/ready"), 503, "desktop_not_ready")
