"""Wire compatibility: the reference TypeScript SDK (sandbox-agent@0.4.2) drives our server.

`tests/sdk/desktop_methods.mjs` calls every desktop method of the SDK (recording and streaming
aside), plus its process and file methods and the error model, and prints one JSON line per check.
Needs Node and `npm ci` in tests/sdk (scripts/setup.sh test does it when npm is installed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.support.paths import SDK_DIR

SCRIPT = SDK_DIR / "desktop_methods.mjs"
NODE = shutil.which("node")
DISPLAY_NUM = 240

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (the SDK compatibility test needs Node 20+)"),
    pytest.mark.skipif(not (SDK_DIR / "node_modules" / "sandbox-agent").is_dir(),
                       reason="tests/sdk/node_modules is missing: run `npm ci` in tests/sdk"),
]

# Every SDK method the script must have called successfully at least once.
METHODS = (
    "getHealth", "startDesktop", "getDesktopStatus", "getDesktopDisplayInfo", "takeDesktopScreenshot",
    "takeDesktopRegionScreenshot", "getDesktopMousePosition", "moveDesktopMouse", "clickDesktop",
    "mouseDownDesktop", "mouseUpDesktop", "dragDesktopMouse", "scrollDesktop", "typeDesktopText",
    "pressDesktopKey", "keyDownDesktop", "keyUpDesktop", "launchDesktopApp", "listDesktopWindows",
    "getDesktopFocusedWindow", "focusDesktopWindow", "moveDesktopWindow", "resizeDesktopWindow",
    "setDesktopClipboard", "getDesktopClipboard", "openDesktopTarget", "listProcesses", "getProcess",
    "runProcess", "mkdirFs", "writeFsFile", "statFs", "listFsEntries", "readFsFile", "moveFs", "deleteFsEntry",
    "stopDesktop",
)


@pytest.fixture(scope="module")
def checks(srv: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Runs the SDK script once against the module's server (token set, no desktop yet). Its files go to a folder
    shared with the desktop (pytest's, tests/conftest.py) that the desktop's own user may write to: its terminal
    writes what was typed there."""
    assert srv.token, "the server must have a token: the script checks the SDK sends it"
    meeting = tmp_path_factory.mktemp("sdk-files")
    meeting.chmod(0o1777)
    env = dict(os.environ, SANDBOX_URL=srv.url, SANDBOX_TOKEN=srv.token, SANDBOX_DISPLAY_NUM=str(DISPLAY_NUM),
               TMPDIR=str(meeting))
    done = subprocess.run([str(NODE), str(SCRIPT)], cwd=SDK_DIR, env=env, capture_output=True, text=True,
                          timeout=90)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the script printed no checks (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    failed = [line for line in lines if not line["ok"]]
    assert bool(failed) == (done.returncode != 0), f"exit {done.returncode} disagrees with the checks:\n{done.stderr}"
    return lines


def test_every_sdk_check_passes(checks: list[dict[str, Any]], srv: ServerProcess) -> None:
    failed = [f"{c['method']}: {c['detail']}" for c in checks if not c["ok"]]
    assert not failed, "SDK checks failed:\n" + "\n".join(failed) + "\n--- server log tail ---\n" + srv.log()[-3000:]


def test_every_sdk_method_was_called(checks: list[dict[str, Any]]) -> None:
    called = {c["method"].split("(")[0] for c in checks}
    assert not set(METHODS) - called, f"methods the script did not call: {sorted(set(METHODS) - called)}"
    assert len({c["method"] for c in checks}) == len(checks), "each check must have its own name"
