"""`sandbox-desktop server --sandbox-uids FIRST-LAST`: a server's desktops run as real uids of that range (the
range a Kubernetes pod with `hostUsers: false` maps: docs/kubernetes.md "Isolated desktops")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, launch_server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a desktop of its own uid needs root")

FIRST, LAST = 3_999_900, 3_999_909


def test_desktops_run_as_uids_of_the_given_range(tmp_path: Path) -> None:
    srv = launch_server(tmp_path, f"--sandbox-uids={FIRST}-{LAST}", "--max-desktops=3")
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.token}"}, timeout=60) as api:
            made = [api.post("/v1/desktops", json={"width": 640, "height": 400}) for _ in range(2)]
            assert all(m.status_code == 201 for m in made), [m.text for m in made]
            try:
                uids = []
                for desktop in (m.json() for m in made):
                    assert desktop["sandbox"]["isolated"] is True, desktop["sandbox"]
                    run = api.post(f"/v1/desktops/{desktop['id']}/processes/run",
                                   json={"command": "sh", "args": ["-c", "id -u; id -g; stat -c %u ~"]})
                    assert run.status_code == 200 and run.json()["exitCode"] == 0, run.text
                    uid, gid, home_owner = map(int, run.json()["stdout"].split())
                    assert FIRST <= uid <= LAST and gid == uid == home_owner
                    uids.append(uid)
                assert len(set(uids)) == 2  # one uid per desktop
            finally:
                for m in made:
                    api.delete(f"/v1/desktops/{m.json()['id']}")
    finally:
        srv.stop()


def test_a_range_that_is_not_one_stops_the_server(tmp_path: Path) -> None:
    env = {**os.environ, "SANDBOX_DESKTOP_UIDS": "0-65535"}
    done = subprocess.run([sys.executable, "-m", "api.cli.main", "server", "--port", "0", "--state-dir",
                           str(tmp_path / "state")], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--sandbox-uids" in done.stderr and "must start above 0" in done.stderr
