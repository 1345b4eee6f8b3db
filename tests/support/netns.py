"""What the network tests build around desktops' networks (a hub's unit tests, and the API's tests through a
server): a "remote" host in a namespace of its own, TCP listeners that count who reached them, and a client that
connects from inside a desktop's namespace as its apps would (`PROBE`, run there by `nsenter` or by the desktop's
own process API).

Only loopback and the tests' own namespaces are ever addressed: the remote is a namespace on a veth pair to
the host, addressed in 10.250.x.0/30 (a range no network here uses; the desktops' is 10.223.0.0/16).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from desktop.sandbox import nethost

# Runs inside a desktop's namespace (`nsenter --net=`): connects to each target, prints one verdict per target.
PROBE = r"""
import errno, json, socket, sys
out = []
for target in sys.argv[1:]:
    target, _, source = target.partition("@")
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(2.0)
    try:
        if source:
            s.bind((source, 0))
        s.connect((host, int(port)))
        out.append("ok:" + s.recv(64).decode().strip())
    except socket.timeout:
        out.append("timeout")
    except OSError as e:
        out.append({errno.ECONNREFUSED: "refused", errno.EHOSTUNREACH: "unreachable",
                    errno.ENETUNREACH: "no-route"}.get(e.errno, "error:" + str(e.errno)))
    finally:
        s.close()
print(json.dumps(out))
"""


def missing_tools() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "network namespaces and nftables need root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables"), ("nsenter", "util-linux")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install {package})"
    return None


def probe(netns_path: str, *targets: str) -> list[str]:
    """Connect from inside the namespace to each `host:port` (`host:port@source` from that source address):
    `ok:<banner>`, `refused` (nothing listens), `unreachable` (the rules refused it: admin-prohibited),
    `no-route` or `timeout`."""
    done = subprocess.run(["nsenter", f"--net={netns_path}", sys.executable, "-I", "-S", "-c", PROBE, *targets],
                          capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(done.stdout))


@dataclass
class Listener:
    """A TCP server on a thread (inside `netns` if given) that greets each client with `banner` and counts them;
    with `echo`, it then echoes what the client sends until either side closes (one client at a time)."""

    address: str
    port: int
    banner: str
    netns: str | None = None
    echo: bool = False
    accepted: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)
    _error: list[BaseException] = field(default_factory=list)

    def __enter__(self) -> Listener:
        threading.Thread(target=self._serve, name=f"listener-{self.port}", daemon=True).start()
        assert self._ready.wait(10), "listener did not start"
        if self._error:
            raise self._error[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _serve(self) -> None:
        try:
            if self.netns:
                nethost.join_namespace(self.netns)
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((self.address, self.port))
            self.port = server.getsockname()[1]  # the one the kernel chose, for port 0
            server.listen(16)
            server.settimeout(0.1)
        except BaseException as error:
            self._error.append(error)
            self._ready.set()
            return
        self._ready.set()
        with server:
            while not self._stop.is_set():
                try:
                    client, _ = server.accept()
                except TimeoutError:
                    continue
                self.accepted += 1
                with client:
                    client.sendall(f"{self.banner}\n".encode())
                    client.settimeout(10)
                    with contextlib.suppress(OSError):
                        while self.echo and (data := client.recv(4096)):
                            client.sendall(data)


@dataclass(frozen=True)
class Remote:
    """The "remote" host: a namespace on a veth pair to the host, listening on `ports`."""

    netns: str
    address: str
    host_address: str
    """The host's end of the pair: one of the host's own addresses."""
    ports: tuple[int, ...]
    host_link: str = ""
    """The host's end's interface."""


@contextlib.contextmanager
def remote_host(ports: tuple[int, ...]) -> Iterator[Remote]:
    """Make the remote namespace and its listeners; everything is removed on exit, whatever happened."""
    pid = os.getpid()
    name, link = f"sdtest-remote-{pid}", f"sdtr{pid}"
    taken = {IPv4Network(route.split()[0]) for route in nethost.overlapping_routes(IPv4Network("10.250.0.0/16"))}
    third = next(k for k in [*range(pid % 250, 250), *range(pid % 250)]
                 if IPv4Network(f"10.250.{k}.0/30") not in taken)
    host, remote = f"10.250.{third}.1", f"10.250.{third}.2"
    try:
        subprocess.run(["ip", "-batch", "-"], check=True, text=True, timeout=30, input="\n".join([
            f"netns add {name}", f"link add {link} type veth peer name eth0 netns {name}",
            f"addr add {host}/30 dev {link}", f"link set {link} up", ""]))
        subprocess.run(["ip", "-n", name, "-batch", "-"], check=True, text=True, timeout=30, input="\n".join([
            "link set lo up", f"addr add {remote}/30 dev eth0", "link set eth0 up", ""]))
        with contextlib.ExitStack() as stack:
            for port in ports:
                stack.enter_context(Listener("0.0.0.0", port, f"remote-{port}", f"/run/netns/{name}"))
            yield Remote(name, remote, host, ports, link)
    finally:
        subprocess.run(["ip", "-force", "-batch", "-"], text=True, timeout=30, capture_output=True,
                       input=f"link del {link}\nnetns del {name}\n")


@contextlib.contextmanager
def host_address_added(remote: Remote) -> Iterator[str]:
    """One more address of the host's own, on the host's end of the remote's pair, as a host gains one (a new
    interface, a VPN): 10.250.k.1/32 of a /30 no route here covers; removed on exit, whatever happened."""
    taken = {IPv4Network(route.split()[0]) for route in nethost.overlapping_routes(IPv4Network("10.250.0.0/16"))}
    third = int(remote.host_address.split(".")[2])
    k = next(k for k in [*range(third + 1, 250), *range(third)] if IPv4Network(f"10.250.{k}.0/30") not in taken)
    address = f"10.250.{k}.1"
    subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", remote.host_link], check=True, timeout=30)
    try:
        yield address
    finally:
        subprocess.run(["ip", "addr", "del", f"{address}/32", "dev", remote.host_link], timeout=30,
                       capture_output=True)


def leftovers(table: str, netns_prefix: str, link_prefix: str) -> list[str]:
    """What of a hub is still on the host: its table, namespaces and links."""
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    found = [line for line in tables.splitlines() if line.endswith(f" {table}")]
    found += [n for n in os.listdir(nethost.NETNS_DIR) if n.startswith(netns_prefix)] \
        if os.path.isdir(nethost.NETNS_DIR) else []
    found += [n for n in os.listdir("/sys/class/net") if n.startswith(link_prefix)]
    return found
