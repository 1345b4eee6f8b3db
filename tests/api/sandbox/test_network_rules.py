"""A desktop's network rules through the HTTP API of a real server (docs/sandbox-network.md): what code run in
the desktop (its own process API) reaches under the default rules, `none` and an allowlist; a host port forwarded
to its loopback; rules changed by PATCH while it runs, and refused ones that change nothing; its /etc/resolv.conf
following its rules; `GET /v1/desktops/{id}/network` listing allowed, refused and forwarded connections; and every
mistake in the rules a 4xx naming its field.

Every connection goes to loopback, the host's end of the test's own "remote" namespace, or a desktop of the
test's server: nothing leaves the machine (tests/support/netns.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, wait_for
from tests.support.desktop_sandbox import assert_refused, created_desktop, probe_in, python_in, run_in
from tests.support.netns import Listener, Remote, missing_tools, remote_host
from tests.support.pids import cgroup_dir, child_host_pid

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")

PORTS = (47131, 47132)
"""The remote's two services."""
REACHED = [f"ok:remote-{port}" for port in PORTS]
"""What a probe of both services answers when the desktop reaches them."""

GATEWAY = """
    import socket, struct
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            print(socket.inet_ntoa(struct.pack("<I", int(fields[2], 16))))
    """
"""Run in a desktop: its default route's gateway, the host's end of its link."""


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    with remote_host(PORTS) as made:
        yield made


@pytest.fixture(scope="module")
def server_port(srv: ServerProcess) -> int:
    return int(srv.url.rsplit(":", 1)[1])


def targets(remote: Remote) -> list[str]:
    return [f"{remote.address}:{port}" for port in PORTS]


def network(api: httpx.Client, desktop: dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    answer = api.get(f"/v1/desktops/{desktop['id']}/network", params={"limit": limit} if limit else None)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def logged(api: httpx.Client, desktop: dict[str, Any], verdict: str, address: str, port: int) -> dict[str, Any]:
    """The desktop's log entry of that connection, waited for (the kernel hands packets over in batches)."""
    def entry() -> dict[str, Any] | None:
        return next((e for e in network(api, desktop)["log"]
                     if (e["verdict"], e["address"], e["port"]) == (verdict, address, port)), None)
    return dict(wait_for(entry, f"a {verdict} {address}:{port} in the log of {desktop['id']}", timeout=5))


def namespace_of(api: httpx.Client, desktop: dict[str, Any]) -> str:
    """The desktop's network namespace, as its X server's /proc entry names it."""
    status = api.get(f"/v1/desktops/{desktop['id']}/status").json()
    return f"/proc/{child_host_pid(status, 'Xvfb')}/ns/net"


def resolv_conf(api: httpx.Client, desktop: dict[str, Any]) -> str:
    done = run_in(api, "cat /etc/resolv.conf", desktop["id"])
    assert done["exitCode"] == 0, done
    return str(done["stdout"])


def test_by_default_a_desktop_reaches_the_outside_but_not_the_host_the_server_or_another_desktop(
        api: httpx.Client, remote: Remote, server_port: int) -> None:
    with created_desktop(api) as one, created_desktop(api) as other, \
            Listener("127.0.0.1", 0, "host-loopback") as host_loopback, \
            Listener("0.0.0.0", 0, "other-desktop", namespace_of(api, other)) as in_other:
        assert one["network"] == {"egress": "all", "allow": [], "forwardHostPorts": []}
        gateway = python_in(api, GATEWAY, desktop=one["id"]).strip()
        other_address = network(api, other)["address"]
        got = probe_in(api, one["id"], *targets(remote), f"127.0.0.1:{host_loopback.port}",
                       f"{gateway}:{server_port}", f"{remote.host_address}:{server_port}",
                       f"{gateway}:{host_loopback.port}", f"{other_address}:{in_other.port}")
        assert got == [*REACHED,
                       "refused",  # its own loopback, where nothing listens
                       "unreachable", "unreachable", "unreachable", "unreachable"]
        assert (host_loopback.accepted, in_other.accepted) == (0, 0)
        assert probe_in(api, other["id"], f"127.0.0.1:{in_other.port}") == ["ok:other-desktop"]  # it listens

        allowed = logged(api, one, "allowed", remote.address, PORTS[0])
        assert allowed["protocol"] == "tcp"
        logged(api, one, "refused", gateway, server_port)
        logged(api, one, "refused", other_address, in_other.port)
        answer = network(api, one)
        assert answer["rules"] == one["network"] and answer["available"] is True
        assert answer["address"] and answer["address"] != other_address
        assert [e["at"] for e in answer["log"]] == sorted(e["at"] for e in answer["log"])  # oldest first
        assert network(api, one, limit=1)["log"] == answer["log"][-1:]  # the newest
        assert not [e for e in network(api, other)["log"] if e["address"] == remote.address]  # each its own log


def test_egress_none_reaches_nothing_but_a_forwarded_host_port(api: httpx.Client, remote: Remote) -> None:
    with Listener("127.0.0.1", 0, "host-service") as service, \
            created_desktop(api, network={"egress": "none", "forwardHostPorts": [service.port]}) as desktop:
        assert desktop["network"] == {"egress": "none", "allow": [], "forwardHostPorts": [service.port]}
        got = probe_in(api, desktop["id"], *targets(remote), f"127.0.0.1:{service.port}")
        assert got == ["unreachable", "unreachable", "ok:host-service"]
        assert service.accepted == 1
        logged(api, desktop, "refused", remote.address, PORTS[0])
        logged(api, desktop, "forwarded", "127.0.0.1", service.port)
        assert "nameserver" not in resolv_conf(api, desktop).replace("# no", "")  # no resolver to reach


def test_an_allowlist_reaches_only_what_it_lists(api: httpx.Client, remote: Remote, server_port: int) -> None:
    rules = {"egress": "allowlist", "allow": [f"{remote.address}:{PORTS[0]}"]}
    with created_desktop(api, network=rules) as desktop:
        assert desktop["network"] == {**rules, "forwardHostPorts": []}
        got = probe_in(api, desktop["id"], *targets(remote), f"{remote.host_address}:{server_port}")
        assert got == [f"ok:remote-{PORTS[0]}", "unreachable", "unreachable"]
        logged(api, desktop, "allowed", remote.address, PORTS[0])
        logged(api, desktop, "refused", remote.address, PORTS[1])


def test_a_patch_changes_the_rules_of_a_running_desktop(api: httpx.Client, remote: Remote) -> None:
    with created_desktop(api) as desktop, Listener("127.0.0.1", 0, "host-service") as service:
        path = f"/v1/desktops/{desktop['id']}"
        assert probe_in(api, desktop["id"], *targets(remote)) == REACHED

        changed = api.patch(path, json={"network": {"egress": "none"}})
        assert changed.status_code == 200, changed.text
        assert changed.json()["network"] == {"egress": "none", "allow": [], "forwardHostPorts": []}
        assert probe_in(api, desktop["id"], *targets(remote)) == ["unreachable", "unreachable"]

        block = {"egress": "allowlist", "allow": [f"{remote.address}/30"]}  # a block, any port
        assert api.patch(path, json={"network": block}).status_code == 200
        assert probe_in(api, desktop["id"], *targets(remote)) == REACHED

        rules = {"egress": "allowlist", "allow": [f"{remote.address}:{PORTS[1]}"], "forwardHostPorts": [service.port]}
        assert api.patch(path, json={"network": rules}).json()["network"] == rules
        got = probe_in(api, desktop["id"], *targets(remote), f"127.0.0.1:{service.port}")
        assert got == ["unreachable", f"ok:remote-{PORTS[1]}", "ok:host-service"]
        assert network(api, desktop)["rules"] == rules


def test_a_refused_patch_keeps_the_rules_in_force(api: httpx.Client, remote: Remote, server_port: int) -> None:
    rules = {"egress": "allowlist", "allow": [f"{remote.address}:{PORTS[0]}"], "forwardHostPorts": []}
    with created_desktop(api, network=rules, tags={"kept": "yes"}) as desktop, \
            Listener("127.0.0.1", 0, "taken-inside", namespace_of(api, desktop)) as taken_inside:
        path = f"/v1/desktops/{desktop['id']}"
        apps_pids_max = cgroup_dir(child_host_pid(api.get(f"{path}/status").json(), "Xvfb"), "pids").parent \
            / "apps" / "pids.max"
        for refused, field in (
                ({"egress": "all", "forwardHostPorts": [server_port]}, "network.forwardHostPorts[0]"),
                ({"egress": "all", "forwardHostPorts": [taken_inside.port]}, "network.forwardHostPorts[0]"),
                ({"egress": "all", "allow": [f"{remote.address}"]}, "network.allow")):
            patch = {"network": refused, "tags": {"kept": "no"}, "limits": {"pids": 64}}
            assert_refused(api.patch(path, json=patch), field)
            assert network(api, desktop)["rules"] == rules, refused
            assert api.get(path).json()["tags"] == {"kept": "yes"} and api.get(path).json()["limits"] == {}
            assert apps_pids_max.read_text().strip() == "max"
            assert probe_in(api, desktop["id"], *targets(remote)) == [f"ok:remote-{PORTS[0]}", "unreachable"]


def test_its_resolv_conf_follows_its_rules(api: httpx.Client) -> None:
    """A desktop made with egress `none` has no resolver; once its rules allow DNS it has the ones a desktop made
    with them has (and loses them again with `none`)."""
    with created_desktop(api) as reference, created_desktop(api, network={"egress": "none"}) as desktop:
        path = f"/v1/desktops/{desktop['id']}"
        without = resolv_conf(api, desktop)
        assert api.patch(path, json={"network": {"egress": "all"}}).status_code == 200
        assert resolv_conf(api, desktop) == resolv_conf(api, reference)
        assert api.patch(path, json={"network": {"egress": "none"}}).status_code == 200
        assert resolv_conf(api, desktop) == without


@pytest.mark.parametrize(("rules", "field"), [
    ({"egress": "open"}, "network.egress"),
    ({"egress": 5}, "network.egress"),
    ({"egress": "allowlist", "allow": ["10.250.0.2:99999"]}, "network.allow[0]"),
    ({"egress": "allowlist", "allow": ["10.250.0.2:80", "[::1]:80"]}, "network.allow[1]"),
    ({"egress": "allowlist", "allow": ["10.250.0.0/33"]}, "network.allow[0]"),
    ({"egress": "allowlist", "allow": ["10.250.0.2:90-80"]}, "network.allow[0]"),
    ({"egress": "allowlist", "allow": [""]}, "network.allow[0]"),
    ({"egress": "all", "allow": ["10.250.0.2"]}, "network.allow"),
    ({"egress": "none", "forwardHostPorts": [0]}, "network.forwardHostPorts[0]"),
    ({"forwardHostPorts": [5432, 5432]}, "network.forwardHostPorts[1]"),
    ({"forwardHostPorts": [70000]}, "network.forwardHostPorts[0]"),
])
def test_a_mistake_in_the_rules_is_a_4xx_naming_its_field(api: httpx.Client, rules: dict[str, Any],
                                                          field: str) -> None:
    before = {d["id"] for d in api.get("/v1/desktops").json()["desktops"]}
    assert_refused(api.post("/v1/desktops", json={"width": 320, "height": 240, "network": rules}), field)
    assert {d["id"] for d in api.get("/v1/desktops").json()["desktops"]} == before  # none made


def test_the_servers_own_port_is_never_forwarded(api: httpx.Client, server_port: int) -> None:
    before = {d["id"] for d in api.get("/v1/desktops").json()["desktops"]}
    refused = api.post("/v1/desktops", json={"network": {"forwardHostPorts": [server_port]}})
    assert_refused(refused, "network.forwardHostPorts[0]")
    assert {d["id"] for d in api.get("/v1/desktops").json()["desktops"]} == before
