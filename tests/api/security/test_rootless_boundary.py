"""The boundary of a desktop whose server is NOT root (docs/security.md "Without root"), as an agent meets it.

A real server runs as an unprivileged user made for the test (tests/support/rootless.py): its desktops get a
user namespace of their own with the other namespaces and Landlock, and say what they lack (a uid of their
own, cgroups, and here a network: /dev/net/tun is root's). From code run in desktop A through A's own process
API: the server's token, B's HOME, B's display and the server's port are out of reach; A's own display, files
and apps work. A second server where unshare(2) is refused (as Docker's default seccomp profile refuses user
namespaces) falls back to Landlock alone, keeps the token out of reach and says it is not isolated; one
whose state is in /tmp (which Landlock must leave writable) says, at start and on the desktop, that the token
is reachable, and it is.
Marked `rootless`; about 20 s."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.support import rootless
from tests.support.desktop_sandbox import assert_its_own_desktop_works, display_reached_in, probe_in, run_in

pytestmark = [pytest.mark.rootless, pytest.mark.skipif(rootless.missing_tools() is not None,
                                                       reason=rootless.missing_tools() or "")]

SIZE = {"width": 640, "height": 400}


@pytest.fixture(scope="module")
def user() -> Iterator[rootless.User]:
    with rootless.unprivileged_user() as made:
        yield made


@pytest.fixture(scope="module")
def server(user: rootless.User) -> Iterator[ServerProcess]:
    with rootless.server_as(user, "sd-rootless-") as srv:
        yield srv


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client(timeout=60) as api:
        yield api


@pytest.fixture(scope="module")
def desktops(admin: httpx.Client) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    made = [admin.post("/v1/desktops", json=SIZE) for _ in range(2)]
    assert all(m.status_code == 201 for m in made), [m.text for m in made]
    a, b = (m.json() for m in made)
    try:
        yield a, b
    finally:
        for desktop in (a, b):
            admin.delete(f"/v1/desktops/{desktop['id']}")


@pytest.fixture(scope="module")
def agent(server: ServerProcess, admin: httpx.Client, desktops: tuple[dict[str, Any], dict[str, Any]]
          ) -> Iterator[httpx.Client]:
    a = desktops[0]
    token = admin.post(f"/v1/desktops/{a['id']}/tokens", json={"role": "control"}).json()["token"]
    with httpx.Client(base_url=f"{server.url}/v1/desktops/{a['id']}", headers={"Authorization": f"Bearer {token}"},
                      timeout=60) as api:
        yield api


def test_the_start_log_and_the_report_say_what_is_missing(server: ServerProcess, admin: httpx.Client,
                                                          desktops: tuple[dict[str, Any], ...]) -> None:
    log = server.log()
    assert "the server is not root: desktops get user_namespace sandboxes" in log, log
    assert "desktops lack user: every desktop runs as the server's uid" in log
    assert "desktops lack cgroup" in log
    sandbox = admin.get(f"/v1/desktops/{desktops[0]['id']}").json()["sandbox"]
    assert sandbox["isolated"], sandbox
    assert {"user_namespace", "pid", "mount", "ipc", "network", "no_new_privs", "no_capabilities", "x_cookie",
            "landlock"} <= set(sandbox["layers"])
    assert "user" not in sandbox["layers"] and "server's uid" in sandbox["missing"]["user"]
    assert "cgroup" in sandbox["missing"]
    if "network" in sandbox["missing"]:  # no slirp4netns, or /dev/net/tun is root's: it says so
        assert "only a loopback" in sandbox["missing"]["network"]


def test_the_token_and_another_desktops_home_are_out_of_reach(
        server: ServerProcess, admin: httpx.Client, agent: httpx.Client,
        desktops: tuple[dict[str, Any], dict[str, Any]]) -> None:
    token_file = server.state_dir / "token"
    b_home = Path(admin.get(f"/v1/desktops/{desktops[1]['id']}/status").json()["stateDir"]) / "home"
    (b_home / "secret.txt").write_text("B's secret")
    done = run_in(agent, f"cat {token_file}; echo exit=$?; ls {server.state_dir}; cat {b_home}/secret.txt; "
                         f"ls {b_home}; cat {server.state_dir.parent}/xauthority | wc -c; id -u; ps -e | wc -l; "
                         "echo x > /var/tmp/../../etc/written; echo x > $HOME/mine && echo wrote-home")
    out = done["stdout"]
    assert server.token is not None and server.token not in out and "exit=1" in out, done
    assert "token" not in out.split() and "B's secret" not in out and "secret.txt" not in out
    assert "wrote-home" in out
    assert int(out.split()[-2]) < 20, "its own pid namespace only"
    for path in (token_file, b_home / "secret.txt"):  # its file API runs in its sandbox too
        read = agent.get("/fs/file", params={"path": str(path)})
        assert read.status_code in (403, 404) and b"B's secret" not in read.content, read.text
        assert server.token.encode() not in read.content
    assert agent.get("/fs/file", params={"path": "~/mine"}).content == b"x\n"


def test_another_desktops_display_and_the_servers_port_are_out_of_reach(
        server: ServerProcess, agent: httpx.Client, desktops: tuple[dict[str, Any], dict[str, Any]]) -> None:
    b_num = desktops[1]["display"].lstrip(":")
    port = int(server.url.rsplit(":", 1)[1])
    reached = display_reached_in(agent, b_num)
    assert [line.split()[0] for line in reached] == ["refused", "refused"], reached
    assert not probe_in(agent, None, f"127.0.0.1:{port}")[0].startswith("ok:")  # the server's port


def test_its_own_display_files_and_apps_work(agent: httpx.Client, desktops: tuple[dict[str, Any], ...]) -> None:
    assert_its_own_desktop_works(agent, desktops[0])


@pytest.fixture(scope="module")
def landlock_only(user: rootless.User) -> Iterator[ServerProcess]:
    folder = rootless.own_folder(user, "sd-landlock-", "/var/tmp")  # Landlock cannot hide within /tmp
    srv = rootless.launch_as(user, folder, wrapper=rootless.refuse_unshare())
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_where_namespaces_are_refused_landlock_alone_hides_the_token_and_says_it_is_not_isolated(
        landlock_only: ServerProcess) -> None:
    assert "desktops get landlock sandboxes" in landlock_only.log(), landlock_only.log()
    with landlock_only.client(timeout=60) as admin:
        made = admin.post("/v1/desktops", json=SIZE)
        assert made.status_code == 201, made.text
        desktop = made.json()
        try:
            sandbox = admin.get(f"/v1/desktops/{desktop['id']}").json()["sandbox"]
            assert not sandbox["isolated"] and "landlock" in sandbox["layers"], sandbox
            assert "another desktop's display and buses are reachable" in sandbox["missing"]["mount"]
            assert "landlock" not in sandbox["missing"], sandbox  # its state is not in /tmp: hidden
            api = httpx.Client(base_url=f"{landlock_only.url}/v1/desktops/{desktop['id']}",
                               headers=admin.headers, timeout=60)
            port = int(landlock_only.url.rsplit(":", 1)[1])
            done = run_in(api, f"cat {landlock_only.state_dir}/token; echo exit=$?; "
                               f"xdpyinfo -display {desktop['display']} | grep -c dimensions; "
                               f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' "
                               "2>&1 | tail -1")
            assert landlock_only.token not in done["stdout"] and "exit=1" in done["stdout"], done
            assert "\n1\n" in done["stdout"], done  # its own display works
            assert "PermissionError" in done["stdout"], done  # no TCP: the server's port neither
        finally:
            admin.delete(f"/v1/desktops/{desktop['id']}")


def test_where_landlock_alone_cannot_hide_the_token_the_log_and_the_report_say_it_is_reachable(
        user: rootless.User) -> None:
    folder = rootless.own_folder(user, "sd-exposed-", "/tmp")  # its X server must write /tmp: no rule hides this
    srv = rootless.launch_as(user, folder, wrapper=rootless.refuse_unshare())
    try:
        assert f"the server's {srv.state_dir}" in srv.log() and "the server's token is reachable" in srv.log()
        with srv.client(timeout=60) as admin:
            made = admin.post("/v1/desktops", json=SIZE)
            assert made.status_code == 201, made.text
            desktop = made.json()
            sandbox = admin.get(f"/v1/desktops/{desktop['id']}").json()["sandbox"]
            assert not sandbox["isolated"] and "the server's token is reachable" in sandbox["missing"]["mount"]
            api = httpx.Client(base_url=f"{srv.url}/v1/desktops/{desktop['id']}", headers=admin.headers,
                               timeout=60)
            done = run_in(api, f"cat {srv.state_dir}/token")
            assert srv.token is not None and srv.token in done["stdout"], done  # what the report said: reachable
            admin.delete(f"/v1/desktops/{desktop['id']}")
    finally:
        srv.stop()
        shutil.rmtree(folder, ignore_errors=True)
