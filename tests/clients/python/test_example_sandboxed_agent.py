"""examples/sandboxed_agent: its own test suite passes (a project of its own, run as a user runs it, with its
own server), and agent.py runs as its README shows, against a live server, and deletes its desktop."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.clients.pytest_plugin.test_pytest_plugin import junit_cases, run_pytest
from tests.conftest import REPO, ServerProcess


def test_the_example_suite_passes(tmp_path: Path) -> None:
    result = run_pytest(REPO, "examples/sandboxed_agent", "-p", "no:randomly", f"--junitxml={tmp_path / 'junit.xml'}")
    assert result.returncode == 0, result.stdout + result.stderr
    cases = junit_cases(tmp_path / "junit.xml")
    assert len(cases) == 8 and all(outcome == "passed" for outcome, _ in cases.values()), cases


def test_the_scripted_agent_runs_in_a_desktop_of_its_own(server: ServerProcess) -> None:
    env = {**os.environ, "SANDBOX_DESKTOP_TOKEN": server.token or ""}
    done = subprocess.run([sys.executable, "examples/sandboxed_agent/agent.py", "--url", server.url, "--yes",
                           "--allow", "bash,read_file,write_file,screenshot"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("read_file(") and "written by the sandboxed agent" in line for line in lines), lines
    assert any(line.startswith("screenshot(") and "<PNG 1024x768>" in line for line in lines), lines
    assert any(line.startswith("bash(") and "curl" in line and "offline" in line for line in lines), lines
    assert any(line.startswith("click(") and "ERROR the tool 'click' is not allowed" in line for line in lines)
    assert lines[-1].endswith("deleted"), lines
    listed = server.client().get("/v1/desktops", params={"tag": "example=sandboxed_agent"}).json()["desktops"]
    assert listed == []
