"""The boundary of a desktop's sandbox (docs/security.md "The boundary"), as an agent meets it: two desktops on
a server started the default way (a token it made); code run in desktop A through A's own process API, with
A's control token, reaches nothing of the server, of B or of the machine's loopback, while A's own display,
files and apps work."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, launch_server
from tests.support.desktop_sandbox import assert_its_own_desktop_works, display_reached_in, python_in, run_in
from tests.support.sandboxes import admin_client, agent_client, home_of, made_desktops

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a desktop of its own uid and namespaces needs root")

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = launch_server(tmp_path_factory.mktemp("boundary"), token=None)  # the token it makes, in its state
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Iterator[httpx.Client]:
    with admin_client(server) as api:
        yield api


@pytest.fixture(scope="module")
def desktops(admin: httpx.Client) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    with made_desktops(admin, 2) as (a, b):
        yield a, b


@pytest.fixture(scope="module")
def agent(server: ServerProcess, admin: httpx.Client, desktops: tuple[dict[str, Any], dict[str, Any]]
          ) -> Iterator[httpx.Client]:
    """Desktop A's agent: only A's control token."""
    with agent_client(server, admin, desktops[0]) as api:
        yield api


def test_desktops_report_themselves_isolated(admin: httpx.Client, desktops: tuple[dict[str, Any], ...]) -> None:
    for desktop in desktops:
        sandbox = admin.get(f"/v1/desktops/{desktop['id']}").json()["sandbox"]
        assert sandbox["isolated"], sandbox
        assert {"user", "pid", "mount", "ipc", "uts", "network", "no_new_privs", "no_capabilities",
                "x_cookie"} <= set(sandbox["layers"])
        status = admin.get(f"/v1/desktops/{desktop['id']}/status").json()
        assert status["sandbox"]["isolated"]


def test_the_servers_token_and_state_are_out_of_reach(server: ServerProcess, agent: httpx.Client) -> None:
    token_file = server.state_dir / "token"
    assert token_file.is_file()
    done = run_in(agent, f"cat {token_file}; echo exit=$?; ls {server.state_dir}; ls /proc/1/root 2>&1 | head -1")
    assert token_file.read_text().strip() not in done["stdout"]
    assert "exit=1" in done["stdout"]
    assert "token" not in done["stdout"].split()  # the state folder shows only what leads to its own HOME


def test_another_desktops_home_processes_and_display_are_out_of_reach(
        admin: httpx.Client, agent: httpx.Client, desktops: tuple[dict[str, Any], dict[str, Any]]) -> None:
    a, b = desktops
    b_home = home_of(admin, b)
    (b_home / "secret.txt").write_text("B's secret")
    b_pids = {p["hostPid"] for p in admin.get(f"/v1/desktops/{b['id']}/status").json()["processes"]}
    done = run_in(agent, f"cat {b_home}/secret.txt; ls {b_home}; ps -eo pid,comm; hostname; id -u")
    assert "B's secret" not in done["stdout"] and "secret.txt" not in done["stdout"]
    listed = [line.split() for line in done["stdout"].splitlines() if line.strip()[:1].isdigit()]
    pids = {int(row[0]) for row in listed if len(row) == 2}
    assert max(pids) < 1000 and not (b_pids & pids and max(b_pids) < 1000), "its own pid namespace only"
    assert f"desktop-{a['id']}" in done["stdout"]
    uid = int(done["stdout"].split()[-1])
    assert uid not in (0, os.getuid())
    # B's display: no socket path in A's /tmp, no abstract socket in A's network namespace.
    reached = display_reached_in(agent, b["display"].lstrip(":"))
    assert [line.split()[0] for line in reached] == ["refused", "refused"], reached


def test_the_servers_port_and_the_hosts_loopback_are_out_of_reach(server: ServerProcess, agent: httpx.Client) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    host_port = listener.getsockname()[1]
    server_port = int(server.url.rsplit(":", 1)[1])
    try:
        out = python_in(agent, f"""
            import socket
            for port in ({server_port}, {host_port}):
                s = socket.socket()
                s.settimeout(2)
                try:
                    s.connect(("127.0.0.1", port))
                    print("reached", port)
                except OSError as exc:
                    print("refused", port)
            """)
    finally:
        listener.close()
    assert "reached" not in out, out


def test_its_own_display_files_and_apps_work(agent: httpx.Client, desktops: tuple[dict[str, Any], ...]) -> None:
    assert_its_own_desktop_works(agent, desktops[0])


def test_a_client_without_the_cookie_cannot_open_the_display(desktops: tuple[dict[str, Any], ...]) -> None:
    b = desktops[1]
    env = {**os.environ, "XAUTHORITY": "/dev/null"}
    refused = subprocess.run(["xdpyinfo", "-display", b["display"]], env=env, capture_output=True, text=True,
                             timeout=10)
    assert refused.returncode != 0 and "uthoriz" in refused.stderr, refused.stderr
    admitted = subprocess.run(["xdpyinfo", "-display", b["display"]], capture_output=True, text=True, timeout=10)
    assert admitted.returncode == 0, admitted.stderr  # with the server's cookies ($XAUTHORITY, tests/conftest.py)


def test_a_desktops_processes_are_its_own(server: ServerProcess, admin: httpx.Client, agent: httpx.Client,
                                         desktops: tuple[dict[str, Any], dict[str, Any]]) -> None:
    b = desktops[1]
    started = agent.post("/processes", json={"command": "sleep", "args": ["30"]}).json()
    try:
        mine = {p["id"] for p in agent.get("/processes").json()["processes"]}
        assert started["id"] in mine
        theirs = admin.post(f"/v1/desktops/{b['id']}/processes", json={"command": "sleep", "args": ["30"]}).json()
        assert theirs["id"] not in mine
        assert agent.get(f"/processes/{theirs['id']}").status_code == 404
        assert agent.post(f"/processes/{theirs['id']}/kill").status_code == 404
        assert started["id"] in {p["id"] for p in admin.get("/v1/processes").json()["processes"]}  # the admin's
        assert started["hostPid"] != started["pid"]
        # The agent's token does not reach the server's own process API, nor B's.
        assert httpx.get(f"{server.url}/v1/processes", headers=agent.headers).status_code == 403
        assert httpx.get(f"{server.url}/v1/desktops/{b['id']}/processes", headers=agent.headers).status_code == 403
    finally:
        agent.post(f"/processes/{started['id']}/kill")


def test_a_run_reports_its_exit_and_output_as_the_servers_run_does(agent: httpx.Client) -> None:
    done = run_in(agent, "echo out; echo err >&2; exit 3")
    assert (done["exitCode"], done["stdout"], done["stderr"]) == (3, "out\n", "err\n")
    missing = agent.post("/processes/run", json={"command": "no-such-program-xyz"})
    assert missing.status_code in (404, 422), missing.text
    assert json.loads(missing.text)["code"]
