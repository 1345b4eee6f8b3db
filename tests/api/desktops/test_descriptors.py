"""A server whose descriptors are all numbered above 1024, as on a server holding dozens of desktops (each
holds some tens: docs/operations.md, "Descriptors"): every X connection it makes must still work, where
select() refuses any descriptor >= FD_SETSIZE ("filedescriptor out of range in select()").

The server is started with descriptors 3 to 1100 taken (tests/conftest.py `launch_server(occupy_fds=...)`),
so every one it opens comes after them: no test-only code in the server."""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, launch_server, wait_for

INHERITED = 1100


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < INHERITED + 500:
        pytest.skip(f"needs a descriptor limit above {INHERITED + 500} (hard limit {hard})")
    if soft != resource.RLIM_INFINITY and soft < INHERITED + 500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server starts with it
    server = launch_server(tmp_path_factory.mktemp("descriptors"), "--max-desktops", "3", occupy_fds=INHERITED)
    yield server
    server.stop()


def server_fds(server: ServerProcess) -> list[int]:
    return sorted(int(name) for name in os.listdir(f"/proc/{server.proc.pid}/fd"))


def test_a_desktop_works_when_every_descriptor_is_above_1024(srv: ServerProcess, api: httpx.Client,
                                                             tmp_path: Path) -> None:
    before = set(server_fds(srv))
    assert max(before) > 1024, "the server inherited the descriptors it was given"
    response = api.post("/v1/desktops", json={"width": 640, "height": 480})
    assert response.status_code == 201, response.text
    desktop: dict[str, Any] = response.json()
    base = f"/v1/desktops/{desktop['id']}"
    try:
        new = set(server_fds(srv)) - before
        assert new and min(new) > 1024, "the desktop's connections are numbered above FD_SETSIZE"
        for _ in range(3):
            shot = api.get(f"{base}/screenshot")
            assert shot.status_code == 200 and shot.headers["x-screen-width"] == "640", shot.text
            assert api.post(f"{base}/mouse/click", json={"x": 100, "y": 100}).status_code == 200
            assert api.post(f"{base}/keyboard/type", json={"text": "ok"}).status_code == 200
        launched = api.post(f"{base}/launch", json={"app": "xterm", "wait": True})
        assert launched.status_code == 200, launched.text
        windows = wait_for(lambda: api.get(f"{base}/windows").json()["windows"], "the xterm's window")
        assert any(w["title"] for w in windows), windows
        assert api.post(f"{base}/clipboard", json={"text": "high", "selection": "both"}).status_code == 200
        assert api.get(f"{base}/clipboard").json()["text"] == "high"
        assert api.get(f"{base}/clipboard", params={"selection": "primary"}).json()["text"] == "high"
        if shutil.which("zenity"):
            started = api.post(f"{base}/processes", json={"command": "zenity", "args": [
                "--info", "--title=Descriptors", "--text=high"]})
            assert started.status_code in (200, 201), started.text
            found = wait_for(lambda: api.post(f"{base}/accessibility/find",
                                              json={"role": "push-button", "name": "OK"}).json()["elements"],
                             "zenity's OK button through accessibility")
            assert found[0]["app"] == "zenity"
        tree = api.get(f"{base}/accessibility/tree")
        assert tree.status_code == 200, tree.text
        assert api.get(f"{base}/display/info").json()["display"] == desktop["display"]
    finally:
        deleted = api.delete(base)
        assert deleted.status_code in (200, 204), deleted.text
    log = srv.log()
    # Its other processes got the high numbers too (the sandbox zygote its socket), and libraries wait on them.
    assert "out of range" not in log and "FD_SETSIZE" not in log and "Traceback" not in log, log
