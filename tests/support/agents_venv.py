"""The OpenAI Agents SDK in a venv of its own, for tests that run the SDK's own code against a real desktop.

openai-agents 0.24 requires websockets<17 and the project's venv has websockets 17 (the server's command socket),
so the SDK cannot be installed beside the server. The venv is built once in the user's cache with the pinned SDK and
the light client (`pip install openai-agents==PIN ./client`), and reused while its stamp (the pin, the Python
version, the client's pyproject.toml) matches; the tests run
`openai_agents_run.py` in it with the worktree's `client/` first on PYTHONPATH, so the client code under test is the
checkout's, not the copy pip installed. A test skips only when pip cannot reach the package index.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

OPENAI_AGENTS = "0.24.0"
"""The SDK version the drivers are tested with (the client's `openai-agents` extra allows >=0.24,<1)."""
ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "client"
VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sandbox-desktop" / "openai-agents-venv"
STAMP = (f"openai-agents=={OPENAI_AGENTS} python={sys.version_info[0]}.{sys.version_info[1]} client="
         + hashlib.sha256((CLIENT / "pyproject.toml").read_bytes()).hexdigest()[:16])
"""Rebuilt when any of these change: the client's own dependencies come from its pyproject.toml."""
SCRIPT = Path(__file__).with_name("openai_agents_run.py")
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
UNREACHABLE = ("Could not find a version", "No matching distribution", "NewConnectionError", "Network is unreachable",
               "Temporary failure in name resolution", "ConnectTimeoutError", "ProxyError")
"""What pip prints when it cannot reach the index (as opposed to a real install failure, which fails the test)."""


def agents_python() -> Path:
    """The venv's interpreter, built on first use (about a minute; under a lock, so parallel workers build once)."""
    python = VENV / "bin" / "python"
    stamp = VENV / "stamp"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "openai-agents-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text() == STAMP:
            return python
        venv.EnvBuilder(clear=True, with_pip=True).create(VENV)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             f"openai-agents=={OPENAI_AGENTS}", str(CLIENT)],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if installed.returncode != 0:
            said = (installed.stdout + installed.stderr).strip()
            if any(sign in said for sign in UNREACHABLE):
                pytest.skip(f"pip cannot install openai-agents=={OPENAI_AGENTS} from the package index: "
                            f"{said.splitlines()[-1]}")
            raise AssertionError(f"building {VENV} failed:\n{said[-4000:]}")
        stamp.write_text(STAMP)
        return python


def run_agents(request: dict[str, Any]) -> dict[str, Any]:
    """`openai_agents_run.py` given `request` on stdin, in the SDK's venv: its JSON answer."""
    env = {**os.environ, "PYTHONPATH": str(CLIENT)}
    done = subprocess.run([str(agents_python()), str(SCRIPT)], input=json.dumps(request), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, f"the SDK's run failed:\n{done.stderr[-6000:]}"
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # The client the SDK drove is the checkout's, not the copy pip put in the venv.
    assert Path(answer["client"]).is_relative_to(CLIENT), answer["client"]
    return answer
