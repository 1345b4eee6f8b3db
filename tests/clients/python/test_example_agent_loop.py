"""examples/record_trajectory.py runs as a user runs it, against a live server, and leaves a dataset whose
steps are the actions it took, with the screens before and after each."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from PIL import Image

from tests.conftest import REPO, ServerProcess


def test_the_agent_loop_records_a_trajectory(server: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "run.zip"
    env = {**os.environ, "SANDBOX_DESKTOP_TOKEN": server.token or ""}
    done = subprocess.run([sys.executable, "examples/record_trajectory.py", "--url", server.url, "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{out}: 7 steps" in done.stdout, done.stdout
    with zipfile.ZipFile(out) as archive:
        rows = [json.loads(line) for line in archive.read("steps.jsonl").splitlines()]
        assert [r["action"]["type"] for r in rows] == ["click"] + ["type", "key"] * 3
        assert rows[1]["action"] == {"type": "type", "text": "echo hello from the agent"}
        assert all(r["source"] == "batch" for r in rows)
        before, after = (Image.open(io.BytesIO(archive.read(rows[2][k]))) for k in ("before", "after"))
        assert before.size == after.size == (1024, 700)
        assert before.tobytes() != after.tobytes(), "Return ran the command: the screen changed"
    # The example's desktop is deleted at the end of its run.
    listed = server.client().get("/v1/desktops", params={"tag": "example=record_trajectory"}).json()["desktops"]
    assert listed == []
