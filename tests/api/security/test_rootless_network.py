"""A desktop's network where the server is NOT root: slirp4netns (docs/security.md "Without root").

A real server runs as an unprivileged user made for the test (tests/support/rootless.py), with
`/dev/net/tun` given the mode most distributions give it (0666, for the module only) so that slirp4netns can
make the desktop's TAP device. From code run in the desktop through its own process API: a "remote" host (a
namespace of the test's own on a veth pair, tests/support/netns.py) is reached through slirp4netns, as the
server; the host's own addresses (the veth's host end, where the test listens too, made before the desktop),
one the host gains after the desktop started, and its loopback (the server's port) are not. Marked `rootless`;
about 20 s."""

from __future__ import annotations

import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.support import netns, rootless
from tests.support.desktop_sandbox import probe_in

TUN = Path("/dev/net/tun")
REMOTE_PORT = 18481


def _missing() -> str | None:
    if (why := rootless.missing_tools() or netns.missing_tools()) is not None:
        return why
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed (apt-get install slirp4netns)"
    return None if TUN.exists() else "/dev/net/tun does not exist"


pytestmark = [pytest.mark.rootless, pytest.mark.skipif(_missing() is not None, reason=_missing() or "")]


@pytest.fixture(scope="module")
def tun_for_users() -> Iterator[None]:
    """/dev/net/tun open to every user, as Debian and most distributions ship it, while the module runs."""
    mode = stat.S_IMODE(TUN.stat().st_mode)
    TUN.chmod(mode | 0o666)
    try:
        yield
    finally:
        TUN.chmod(mode)


@pytest.fixture(scope="module")
def remote() -> Iterator[netns.Remote]:
    with netns.remote_host((REMOTE_PORT,)) as made:
        yield made


@pytest.fixture(scope="module")
def server(tun_for_users: None) -> Iterator[ServerProcess]:
    with rootless.unprivileged_user() as user, rootless.server_as(user, "sd-rootless-net-") as srv:
        yield srv


@pytest.fixture(scope="module")
def desktop(server: ServerProcess, remote: netns.Remote) -> Iterator[tuple[httpx.Client, dict[str, Any]]]:
    """A desktop made once the remote exists: its first rules hold the host's addresses of that moment (the veth's
    host end among them)."""
    with server.client(timeout=60) as api:
        made = api.post("/v1/desktops", json={"width": 320, "height": 240})
        assert made.status_code == 201, made.text
        try:
            yield api, made.json()
        finally:
            api.delete(f"/v1/desktops/{made.json()['id']}")


def test_the_network_layer_is_in_force(desktop: tuple[httpx.Client, dict[str, Any]]) -> None:
    api, made = desktop
    sandbox = api.get(f"/v1/desktops/{made['id']}").json()["sandbox"]
    assert "network" in sandbox["layers"], sandbox
    assert "network" not in sandbox["missing"], sandbox


def test_a_remote_host_is_reached_through_slirp4netns(desktop: tuple[httpx.Client, dict[str, Any]],
                                                      remote: netns.Remote) -> None:
    api, made = desktop
    assert probe_in(api, made["id"], f"{remote.address}:{REMOTE_PORT}") == [f"ok:remote-{REMOTE_PORT}"]


def test_the_hosts_own_addresses_and_its_loopback_are_not(server: ServerProcess,
                                                         desktop: tuple[httpx.Client, dict[str, Any]],
                                                         remote: netns.Remote) -> None:
    api, made = desktop
    server_port = urlsplit(server.url).port
    with netns.Listener(remote.host_address, 0, "host") as on_host:
        found = probe_in(api, made["id"], f"{remote.host_address}:{on_host.port}", f"10.0.2.2:{server_port}",
                         f"127.0.0.1:{server_port}")
    assert on_host.accepted == 0
    assert not any(verdict.startswith("ok:") for verdict in found), found


def test_an_address_the_host_gains_later_is_refused_once_it_has_it(desktop: tuple[httpx.Client, dict[str, Any]],
                                                                   remote: netns.Remote) -> None:
    """The server follows the host's addresses and gives each desktop new rules (desktop/sandbox/slirp.py
    `HostAddresses`): an address added after the desktop started is refused a moment later, and the remote host
    is reached as before."""
    api, made = desktop
    with netns.host_address_added(remote) as later, netns.Listener(later, 0, "later") as on_it:
        verdicts: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (len(verdicts) >= 2 and not any(
                verdict.startswith("ok:") for verdict in verdicts[-2:])):
            verdicts += probe_in(api, made["id"], f"{later}:{on_it.port}")
    assert len(verdicts) >= 2 and not any(verdict.startswith("ok:") for verdict in verdicts[-2:]), verdicts
    assert probe_in(api, made["id"], f"{remote.address}:{REMOTE_PORT}") == [f"ok:remote-{REMOTE_PORT}"]
