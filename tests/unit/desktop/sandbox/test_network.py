"""Each desktop's network, on real namespaces and nftables (docs/sandbox-network.md): what a desktop reaches
under each egress mode, forwarded host ports, live updates, the connection log, two servers side by side,
and nothing left behind (nor after a killed server). Needs root, `ip`, `nft` and `nsenter`; skipped otherwise.

Every connection starts inside a desktop's namespace (tests/support/netns.py `probe`) and goes to loopback, the
host's addresses or the test's own "remote" namespace: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from desktop.core.errors import InvalidAction
from desktop.sandbox import nethost
from desktop.sandbox.network import (
    ConnectionRecord,
    DesktopNetwork,
    NetworkHub,
    NetworkRules,
    NetworkUnavailable,
    Verdict,
)
from tests.support.netns import Listener, Remote, leftovers, missing_tools, probe, remote_host
from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")

T = TypeVar("T")
PORTS = (47101, 47102, 53)
"""The remote's ports: two services, and DNS (it is the hubs' resolver)."""
IDLE_PORT, ECHO_PORT = 47111, 47116
"""A port nothing listens on inside a desktop, and the remote's echo service. The host's ports (the server's,
a loopback service, a forwarded one) are whatever the kernel gives: the host is shared with other tests."""


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for the module: the hub's log reader and forwarders live on it across tests."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    with remote_host(PORTS) as made:
        yield made


@pytest.fixture(scope="module")
def hub(loop: asyncio.AbstractEventLoop, remote: Remote) -> Iterator[NetworkHub]:
    """The server's hub; the server itself listens on 0.0.0.0 (`hub.server_ports[0]`), as one bound to every
    address."""
    with Listener("0.0.0.0", 0, "server") as server:
        made = loop.run_until_complete(NetworkHub.open([server.port], resolvers=[remote.address]))
        try:
            yield made
        finally:
            loop.run_until_complete(made.close())


def run(loop: asyncio.AbstractEventLoop, scenario: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(scenario(), timeout)
    return loop.run_until_complete(bounded())


async def aprobe(network: DesktopNetwork, *targets: str) -> list[str]:
    """Probe from a thread, so the loop keeps serving forwarded ports and reading the log meanwhile."""
    return await asyncio.to_thread(probe, network.netns_path, *targets)


async def logged(network: DesktopNetwork, verdict: str, address: str, port: int) -> ConnectionRecord:
    """The desktop's log record of that connection, waited for (the kernel batches for up to 50 ms)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for record in network.log():
            if (record.verdict, record.address, record.port) == (verdict, address, port):
                return record
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {verdict} {address}:{port} in {network.log()}")


def test_default_egress_reaches_the_world_but_not_the_host_its_loopback_the_server_or_another_desktop(
        loop: asyncio.AbstractEventLoop, hub: NetworkHub, remote: Remote) -> None:
    server_port = hub.server_ports[0]

    async def scenario() -> None:
        one = await hub.create("one", NetworkRules())
        other = await hub.create("other", NetworkRules())
        try:
            with Listener("127.0.0.1", 0, "host-loopback") as host_loopback, \
                    Listener("0.0.0.0", 47114, "other-desktop", other.netns_path) as in_other:
                got = await aprobe(one, f"{remote.address}:{PORTS[0]}", f"{remote.address}:{PORTS[1]}",
                                   f"127.0.0.1:{host_loopback.port}", f"{one.gateway}:{server_port}",
                                   f"{remote.host_address}:{server_port}", f"{other.address}:47114",
                                   f"{other.gateway}:{host_loopback.port}")
                assert got == [f"ok:remote-{PORTS[0]}", f"ok:remote-{PORTS[1]}",
                               "refused",  # the desktop's own loopback, where nothing listens
                               "unreachable", "unreachable", "unreachable", "unreachable"]
                assert (host_loopback.accepted, in_other.accepted) == (0, 0)
                assert await aprobe(other, "127.0.0.1:47114") == ["ok:other-desktop"]  # its own, on its loopback
            allowed = await logged(one, Verdict.ALLOWED, remote.address, PORTS[0])
            assert (allowed.protocol, abs(allowed.at - time.time()) < 30) == ("tcp", True)
            await logged(one, "refused", one.gateway, server_port)
            await logged(one, "refused", other.address, 47114)
            assert not [r for r in other.log() if r.address == remote.address]  # each desktop its own log
            assert "nameserver " + remote.address in one.resolv_conf()
            ipv6 = subprocess.run(["nsenter", f"--net={one.netns_path}", "ip", "-6", "-o", "addr", "show", "dev",
                                   "eth0"], capture_output=True, text=True, check=True)
            assert ipv6.stdout == ""  # IPv6 off on its link; the host's table drops any a root inside would send
        finally:
            await one.close()
            await other.close()
    run(loop, scenario)


def test_egress_none_reaches_nothing(loop: asyncio.AbstractEventLoop, hub: NetworkHub, remote: Remote) -> None:
    async def scenario() -> None:
        network = await hub.create("none", NetworkRules.parse("none"))
        try:
            got = await aprobe(network, *(f"{remote.address}:{port}" for port in PORTS),
                               f"{network.gateway}:{hub.server_ports[0]}")
            assert got == ["unreachable"] * 4
            await logged(network, "refused", remote.address, PORTS[0])
            assert "nameserver" not in network.resolv_conf().replace("# no", "")
        finally:
            await network.close()
    run(loop, scenario)


def test_an_allowlist_reaches_only_what_it_lists_and_dns(loop: asyncio.AbstractEventLoop, hub: NetworkHub,
                                                         remote: Remote) -> None:
    async def scenario() -> None:
        network = await hub.create("listed", NetworkRules.parse("allowlist", [f"{remote.address}:{PORTS[0]}"]))
        try:
            got = await aprobe(network, *(f"{remote.address}:{port}" for port in PORTS),
                               f"{network.gateway}:{hub.server_ports[0]}")
            assert got == [f"ok:remote-{PORTS[0]}", "unreachable", "ok:remote-53", "unreachable"]
            await network.update(NetworkRules.parse("allowlist", [f"{remote.address}/30"]))  # a block, any port
            got = await aprobe(network, *(f"{remote.address}:{port}" for port in PORTS[:2]),
                               f"{remote.host_address}:{hub.server_ports[0]}")  # in the block, but the host's
            assert got == [f"ok:remote-{PORTS[0]}", f"ok:remote-{PORTS[1]}", "unreachable"]
        finally:
            await network.close()
    run(loop, scenario)


def test_a_forwarded_host_port_is_the_same_port_on_the_desktops_loopback(loop: asyncio.AbstractEventLoop,
                                                                         hub: NetworkHub) -> None:
    async def scenario() -> None:
        with Listener("127.0.0.1", 0, "host-service") as service:
            forwarded = service.port
            network = await hub.create("fwd", NetworkRules.parse("none", None, [forwarded]))
            try:
                assert await aprobe(network, f"127.0.0.1:{forwarded}", f"127.0.0.1:{IDLE_PORT}") == [
                    "ok:host-service", "refused"]
                assert service.accepted == 1
                await logged(network, "forwarded", "127.0.0.1", forwarded)
                await network.update(NetworkRules.parse("none"))
                assert await aprobe(network, f"127.0.0.1:{forwarded}") == ["refused"]
                with pytest.raises(InvalidAction, match=r"network\.forwardHostPorts\[1\].*server's own"):
                    await network.update(NetworkRules.parse("none", None, [forwarded, hub.server_ports[0]]))
                assert await aprobe(network, f"127.0.0.1:{forwarded}") == ["refused"]  # unchanged
            finally:
                await network.close()
    run(loop, scenario)


def test_update_changes_the_rules_of_a_live_namespace(loop: asyncio.AbstractEventLoop, hub: NetworkHub,
                                                      remote: Remote) -> None:
    targets = [f"{remote.address}:{port}" for port in PORTS[:2]]

    async def scenario() -> None:
        network = await hub.create("live", NetworkRules())
        try:
            assert await aprobe(network, *targets) == [f"ok:remote-{PORTS[0]}", f"ok:remote-{PORTS[1]}"]
            await network.update(NetworkRules.parse("none"))
            assert await aprobe(network, *targets) == ["unreachable", "unreachable"]
            await network.update(NetworkRules.parse("allowlist", [f"{remote.address}:{PORTS[1]}"]))
            assert await aprobe(network, *targets) == ["unreachable", f"ok:remote-{PORTS[1]}"]
            assert network.rules.to_wire()["allow"] == [f"{remote.address}:{PORTS[1]}"]
            with pytest.raises(InvalidAction, match=r"network\.allow\[0\]"):
                await network.update(NetworkRules.parse("allowlist", ["no-such-host.invalid"]))
            assert await aprobe(network, *targets) == ["unreachable", f"ok:remote-{PORTS[1]}"]  # kept
        finally:
            await network.close()
    run(loop, scenario)


def test_an_update_cuts_open_connections_the_new_rules_refuse(loop: asyncio.AbstractEventLoop, hub: NetworkHub,
                                                              remote: Remote) -> None:
    def connect(address: str) -> socket.socket:  # runs in the desktop's namespace: its socket is the desktop's
        return socket.create_connection((address, ECHO_PORT), timeout=5)

    async def scenario() -> None:
        network = await hub.create("cut", NetworkRules())
        try:
            with Listener("0.0.0.0", ECHO_PORT, "echo", f"/run/netns/{remote.netns}", echo=True), \
                    await nethost.in_namespace(network.netns_path, lambda: connect(remote.address)) as client:
                assert client.recv(64) == b"echo\n"
                client.sendall(b"ping")
                assert client.recv(64) == b"ping"  # open, and kept open by an update that allows it
                await network.update(NetworkRules.parse("allowlist", [f"{remote.address}:{ECHO_PORT}"]))
                client.sendall(b"pong")
                assert client.recv(64) == b"pong"
                await network.update(NetworkRules.parse("none"))
                client.sendall(b"again")
                with pytest.raises(ConnectionResetError):
                    await asyncio.to_thread(client.recv, 64)
        finally:
            await network.close()
    run(loop, scenario)


def test_a_root_inside_cannot_spoof_and_a_process_outliving_the_close_reaches_nothing(
        loop: asyncio.AbstractEventLoop, hub: NetworkHub, remote: Remote) -> None:
    target = f"{remote.address}:{PORTS[0]}"

    async def scenario() -> None:
        network = await hub.create("spoof", NetworkRules())
        other = await hub.create("spoofed", NetworkRules())
        holder = None
        try:
            for address in (other.address, "10.250.255.77"):  # another desktop's address, an outside one
                subprocess.run(["nsenter", f"--net={network.netns_path}", "ip", "addr", "add", f"{address}/32",
                                "dev", "eth0"], check=True, timeout=30)
            assert await aprobe(network, target, f"{target}@{other.address}", f"{target}@10.250.255.77") == [
                f"ok:remote-{PORTS[0]}", "timeout", "timeout"]
            holder = subprocess.Popen(["nsenter", f"--net={network.netns_path}", "sleep", "60"])
            held = f"/proc/{holder.pid}/ns/net"
            deadline = time.monotonic() + 10
            while os.readlink(held) == os.readlink("/proc/self/ns/net") and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # nsenter has not joined yet
            await network.close()
            assert not os.path.exists(network.netns_path)
            assert (await asyncio.to_thread(probe, held, target))[0] != f"ok:remote-{PORTS[0]}"
        finally:
            if holder is not None:
                holder.kill()
                holder.wait(30)
            await network.close()
            await other.close()
    run(loop, scenario)


def test_two_servers_coexist_and_one_closing_leaves_the_other_working(loop: asyncio.AbstractEventLoop,
                                                                      hub: NetworkHub, remote: Remote) -> None:
    async def scenario() -> None:
        mine = await hub.create("mine", NetworkRules())
        second = await NetworkHub.open([1], resolvers=[], pool_size=0)
        try:
            assert (second.names.table, second.block) != (hub.names.table, hub.block)
            assert second.log_group != hub.log_group
            theirs = await second.create("theirs", NetworkRules())
            assert await aprobe(theirs, f"{remote.address}:{PORTS[0]}", f"{mine.address}:{PORTS[0]}") == [
                f"ok:remote-{PORTS[0]}", "unreachable"]  # another server's desktop is another desktop
            await logged(theirs, "allowed", remote.address, PORTS[0])
            assert not [r for r in mine.log() if r.address == remote.address]
        finally:
            await second.close()
        assert leftovers(second.names.table, f"sdnet-{os.getpid()}-{second.names.block}-",
                         f"sdn{second.names.block}-") == []
        try:
            assert await aprobe(mine, f"{remote.address}:{PORTS[0]}") == [f"ok:remote-{PORTS[0]}"]
        finally:
            await mine.close()
    run(loop, scenario)


def test_close_leaves_nothing_behind(loop: asyncio.AbstractEventLoop, remote: Remote) -> None:
    async def scenario() -> None:
        hub = await NetworkHub.open([1], resolvers=[], pool_size=2)
        names = hub.names
        try:
            first = await hub.create("a", NetworkRules.parse("allowlist", ["10.250.0.0/16:1-100"], [47115]))
            second = await hub.create("b", NetworkRules())
            # More at once than the pool holds: the rest are made on the spot, each its own.
            crowd = await asyncio.gather(*(hub.create(f"c{i}", NetworkRules.parse("none")) for i in range(5)))
            assert len({n.address for n in (first, second, *crowd)}) == 7
            assert len({n.netns_path for n in (first, second, *crowd)}) == 7
            await asyncio.gather(*(n.close() for n in crowd[:3]))
            await first.close()
            assert not os.path.exists(first.netns_path)
            assert await asyncio.to_thread(probe, second.netns_path, f"{remote.address}:{PORTS[0]}") == [
                f"ok:remote-{PORTS[0]}"]
        finally:
            await hub.close()
        assert leftovers(names.table, f"sdnet-{names.pid}-{names.block}-", f"sdn{names.block}-") == []
        assert not os.path.exists(names.block_lock)
    run(loop, scenario)


# Runs as a server of its own: opens a hub, makes a desktop, says its names, then waits to be killed.
DEAD_SERVER = r"""
import asyncio, json, sys
from desktop.sandbox.network import NetworkHub, NetworkRules
async def main():
    hub = await NetworkHub.open([1], resolvers=[], pool_size=1)
    net = await hub.create("x", NetworkRules())
    print(json.dumps([hub.names.pid, hub.names.block, hub.names.table, net.netns_path]), flush=True)
    await asyncio.sleep(120)
asyncio.run(main())
"""


def test_a_server_starting_removes_what_a_dead_server_left_and_nothing_of_a_live_one(
        loop: asyncio.AbstractEventLoop, hub: NetworkHub, remote: Remote) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "client")])}
    child = subprocess.Popen([sys.executable, "-c", DEAD_SERVER], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        pid, block, table, netns_path = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert os.path.exists(netns_path)  # killed: nothing of it was removed
    assert leftovers(table, f"sdnet-{pid}-{block}-", f"sdn{block}-")

    async def scenario() -> None:
        mine = await hub.create("survivor", NetworkRules())
        starting = await NetworkHub.open([1], resolvers=[], pool_size=0)
        try:
            dead_lock = nethost.Names(pid, block).block_lock
            # A server of a test running beside this one may have claimed the freed block since: its links and
            # its lock then bear the same names (links and locks are named by block; tables and namespaces by pid).
            taken = starting.names.block != block and nethost.lock_held(dead_lock)
            left = leftovers(table, f"sdnet-{pid}-{block}-", f"sdn{block}-")
            assert [n for n in left if not (taken and n.startswith(f"sdn{block}-"))] == []
            assert not os.path.exists(netns_path)
            assert not os.path.exists(dead_lock) or starting.names.block_lock == dead_lock or taken  # gone, or anew
            assert await aprobe(mine, f"{remote.address}:{PORTS[0]}") == [f"ok:remote-{PORTS[0]}"]
        finally:
            await starting.close()
            await mine.close()
    run(loop, scenario)


# A server starting beside this one in namespaces of its own (a container sharing the host's /run): opens a hub,
# which removes what dead servers left, and closes it.
NEWCOMER = r"""
import asyncio, os
from desktop.sandbox.network import NetworkHub
async def main():
    hub = await NetworkHub.open([1], resolvers=[], pool_size=0)
    await hub.close()
    print(os.getpid(), flush=True)
asyncio.run(main())
"""


@pytest.mark.parametrize("where", ["pid namespace", "network namespace"])
def test_a_server_in_other_namespaces_leaves_a_live_ones_networks(
        loop: asyncio.AbstractEventLoop, hub: NetworkHub, remote: Remote, where: str) -> None:
    """This process's pid means nothing in the newcomer's pid namespace, and its nftables table is not in the
    newcomer's network namespace; /run/netns is shared all the same: only the block's lock says it lives."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "client")])}
    other = f"sdtest-other-{os.getpid()}"
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", NEWCOMER]
    if where == "network namespace":
        subprocess.run(["ip", "netns", "add", other], check=True, timeout=10)
        argv = ["ip", "netns", "exec", other, sys.executable, "-c", NEWCOMER]

    async def scenario() -> None:
        mine = await hub.create(f"beside-a-newcomer-in-its-{where}", NetworkRules())
        try:
            newcomer = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, env=env,
                                               timeout=60)
            assert newcomer.returncode == 0, newcomer.stderr
            assert os.path.exists(mine.netns_path)
            assert await aprobe(mine, f"{remote.address}:{PORTS[0]}") == [f"ok:remote-{PORTS[0]}"]
        finally:
            await mine.close()
    try:
        run(loop, scenario)
    finally:
        subprocess.run(["ip", "netns", "del", other], capture_output=True, timeout=10)


def test_the_hub_says_why_a_machine_cannot_isolate(loop: asyncio.AbstractEventLoop, tmp_path: object,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    only_ip = os.path.join(str(tmp_path), "bin")
    os.makedirs(only_ip)
    os.symlink(shutil.which("ip") or "/usr/sbin/ip", os.path.join(only_ip, "ip"))
    monkeypatch.setenv("PATH", only_ip)
    with pytest.raises(NetworkUnavailable, match=r"`nft` is not installed \(package nftables\)"):
        run(loop, lambda: NetworkHub.open([1]))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NetworkUnavailable, match=r"`ip` is not installed \(package iproute2\)"):
        run(loop, lambda: NetworkHub.open([1]))
