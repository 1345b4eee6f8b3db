"""`sandbox-desktop desktops ...` and `--desktop ID`, run as real subprocesses; effects checked over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.clients.cli.test_cli_client import cli_all, every_command
from tests.conftest import ServerProcess, free_port
from tests.support.paths import REPO

DESKTOP = {"displayNum": 337, "width": 800, "height": 600}  # the default desktop, to check isolation against


def cli(srv: ServerProcess | None, *argv: str, url: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One subcommand; address and token from the environment, as a user sets them."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_DESKTOP_")}
    if srv is not None:
        full["SANDBOX_DESKTOP_URL"] = srv.url
        full["SANDBOX_DESKTOP_TOKEN"] = srv.token or ""
    full.update(env or {})
    if url is not None:
        argv = (*argv, "--url", url)
    return subprocess.run([sys.executable, "-m", "api.cli.main", *argv], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.args, done.stderr)
    assert done.stderr == "", done.stderr
    return done.stdout


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def created(srv: ServerProcess, api: httpx.Client) -> Iterator[str]:
    """A desktop made with `desktops create`; deleted over HTTP afterwards if the test left it."""
    out = ok(cli(srv, "desktops", "create", "--width", "640", "--height", "480", "--tag", "suite=cli",
                 "--tag", "run=one", "--ttl", "600", "--idle-timeout", "300", "--on-idle", "pause"))
    desktop_id = out.strip()
    assert out == desktop_id + "\n" and re.fullmatch(r"dsk_[0-9a-f]{12}", desktop_id), out
    yield desktop_id
    if api.get(f"/v1/desktops/{desktop_id}").json()["state"] != "deleted":
        api.delete(f"/v1/desktops/{desktop_id}")


def test_create_makes_the_desktop_asked_for(api: httpx.Client, created: str) -> None:
    body = api.get(f"/v1/desktops/{created}").json()
    assert body["state"] == "active" and body["resolution"]["width"] == 640 and body["resolution"]["height"] == 480
    assert body["tags"] == {"suite": "cli", "run": "one"}
    assert body["idleTimeoutSeconds"] == 300 and body["onIdle"] == "pause" and body["expiresAt"]


def test_list_is_a_table_filtered_by_tags(srv: ServerProcess, api: httpx.Client, created: str) -> None:
    body = api.get(f"/v1/desktops/{created}").json()
    header, *rows = ok(cli(srv, "desktops", "list", "--tag", "suite=cli", "--tag", "run=one")).splitlines()
    assert header.split() == ["ID", "STATE", "DISPLAY", "SIZE", "TAGS", "EXPIRES"]
    [row] = rows
    cells = row.split()
    assert cells[:4] == [created, "active", body["display"], "640x480"], row
    assert set(cells[4].split(",")) == {"suite=cli", "run=one"} and cells[5] == body["expiresAt"]
    every = [line.split()[0] for line in ok(cli(srv, "desktops", "list")).splitlines()[1:]]
    assert every[0] == "default" and created in every
    assert ok(cli(srv, "desktops", "list", "--tag", "suite=other")).splitlines()[1:] == []


def test_commands_act_on_the_desktop_named(srv: ServerProcess, api: httpx.Client, created: str,
                                           tmp_path: Path) -> None:
    """screenshot, click, clipboard and status reach the desktop `--desktop` (or the variable) names, and
    leave the default desktop alone."""
    api.post("/v1/desktop/mouse/move", json={"x": 7, "y": 9}).raise_for_status()
    api.post("/v1/desktop/clipboard", json={"text": "default's own"}).raise_for_status()

    shot = tmp_path / "shot.png"
    ok(cli(srv, "screenshot", "-o", str(shot), "--desktop", created))
    assert png_size(shot.read_bytes()) == (640, 480)
    assert "resolution: 640x480" in ok(cli(srv, "status", "--desktop", created))
    assert ok(cli(srv, "click", "123", "45", "--desktop", created)) == ""
    moved = api.get(f"/v1/desktops/{created}/mouse/position").json()
    assert (moved["x"], moved["y"]) == (123, 45)
    assert ok(cli(srv, "clipboard", "set", "for the new one", "--desktop", created)) == ""
    assert api.get(f"/v1/desktops/{created}/clipboard").json()["text"] == "for the new one"
    by_variable = cli(srv, "clipboard", "get", env={"SANDBOX_DESKTOP_DESKTOP": created})
    assert ok(by_variable) == "for the new one"

    position = api.get("/v1/desktop/mouse/position").json()
    assert (position["x"], position["y"]) == (7, 9)
    assert api.get("/v1/desktop/clipboard").json()["text"] == "default's own"
    assert ok(cli(srv, "clipboard", "get")) == "default's own"
    assert "resolution: 800x600" in ok(cli(srv, "status", "--desktop", "default"))


def test_pause_resume_reset_token_and_delete(srv: ServerProcess, api: httpx.Client, created: str) -> None:
    assert ok(cli(srv, "desktops", "pause", created)) == f"{created} paused\n"
    assert api.get(f"/v1/desktops/{created}").json()["state"] == "paused"
    frozen = cli(srv, "click", "1", "1", "--desktop", created)
    assert frozen.returncode == 1 and "(desktop_paused, HTTP 409)" in frozen.stderr, frozen.stderr
    assert ok(cli(srv, "desktops", "resume", created)) == f"{created} active\n"
    assert api.get(f"/v1/desktops/{created}").json()["state"] == "active"

    api.post(f"/v1/desktops/{created}/clipboard", json={"text": "before reset"}).raise_for_status()
    assert ok(cli(srv, "desktops", "reset", created)) == f"{created} active\n"
    assert api.get(f"/v1/desktops/{created}/clipboard").json()["text"] == ""

    token, share = ok(cli(srv, "desktops", "token", created, "--role", "view", "--ttl", "60")).splitlines()
    assert share == f"{srv.url}/ui/#token={token}&desktop={created}"
    with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}) as viewer:
        assert viewer.get(f"/v1/desktops/{created}/screenshot").status_code == 200
        assert viewer.post(f"/v1/desktops/{created}/mouse/click", json={"x": 1, "y": 1}).status_code == 403
        assert viewer.get("/v1/desktop/status").status_code == 403
    assert ok(cli(srv, "viewer", "--desktop", created)) == f"{srv.url}/ui/#token={srv.token}&desktop={created}\n"

    assert ok(cli(srv, "desktops", "delete", created)) == ""
    assert api.get(f"/v1/desktops/{created}").json()["state"] == "deleted"
    assert created not in ok(cli(srv, "desktops", "list"))
    gone = cli(srv, "viewer", "--desktop", created)
    assert gone.returncode == 1 and gone.stderr == f"error: desktop {created} was deleted (deleted)\n"


def test_a_bad_id_exits_1(srv: ServerProcess, tmp_path: Path) -> None:
    nobody = "dsk_000000000000"
    for argv in (["desktops", "delete", nobody], ["desktops", "pause", nobody], ["desktops", "resume", nobody],
                 ["desktops", "reset", nobody], ["desktops", "token", nobody, "--role", "control"],
                 ["viewer", "--desktop", nobody]):
        done = cli(srv, *argv)
        assert done.returncode == 1 and done.stdout == "", (argv, done)
        assert done.stderr.startswith("error: ") and "(desktop_not_found, HTTP 404)" in done.stderr, argv
    # Every client command takes --desktop, and sends to that desktop: an unknown one is a 404 for each.
    argvs = [[*argv, "--desktop", nobody] for argv in every_command(tmp_path)]
    for argv, done in zip(argvs, cli_all(srv, argvs), strict=True):
        assert done.returncode == 1 and "(desktop_not_found, HTTP 404)" in done.stderr, (argv, done.stderr)
    assert not list(tmp_path.iterdir())  # no file written for the screenshot or the download
    default = cli(srv, "desktops", "delete", "default")
    assert default.returncode == 1 and "(desktop_is_default, HTTP 409)" in default.stderr
    no_id = cli(srv, "clipboard", "get", "--desktop", "a/b")
    assert no_id.returncode == 1 and no_id.stderr == "error: not an id: 'a/b'\n"


def test_bad_usage_and_no_server_exit_2(srv: ServerProcess) -> None:
    for argv in (["desktops"], ["desktops", "delete"], ["desktops", "token", "dsk_1"],
                 ["desktops", "token", "dsk_1", "--role", "admin"], ["desktops", "create", "--on-idle", "never"],
                 ["desktops", "create", "--tag", "novalue"], ["desktops", "list", "--tag", "=x"],
                 ["desktops", "create", "--ttl", "soon"], ["desktops", "list", "--desktop", "dsk_1"],
                 ["click", "1", "--desktop", "dsk_1"]):
        done = cli(srv, *argv)
        assert done.returncode == 2 and done.stdout == "", (argv, done)
    unreachable = f"http://127.0.0.1:{free_port()}"
    for argv in (["desktops", "list"], ["desktops", "create"], ["status", "--desktop", "dsk_1"]):
        done = cli(None, *argv, url=unreachable)
        assert done.returncode == 2 and f"cannot reach the server at {unreachable}" in done.stderr, (argv, done)


def test_a_wrong_token_exits_1(srv: ServerProcess) -> None:
    for argv in (["desktops", "list"], ["desktops", "create"], ["desktops", "delete", "dsk_1"],
                 ["desktops", "token", "dsk_1", "--role", "view"]):
        done = cli(srv, *argv, "--token", "wrong")
        assert done.returncode == 1 and "HTTP 401" in done.stderr and done.stdout == "", (argv, done)
