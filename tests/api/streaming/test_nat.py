"""The live view behind a 1:1 NAT (`--webrtc-public-address`): what the offer advertises, and a viewer
that can reach the server only through a port-forwarding router (network namespaces made here).

The router namespace forwards the public address's TCP port and UDP range to the server's private
address (iptables DNAT) and, like `docker -p` or a home router, lets nothing from the inside open a
flow to the outside; the viewer's namespace has no route to the private network at all.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aioice.candidate import Candidate, candidate_foundation
from aiortc import RTCIceCandidate
from aiortc.sdp import SessionDescription, candidate_from_sdp

from api.cli.main import PUBLIC_ADDRESS_ENV
from streaming.ports import HostPolicy
from streaming.viewer import Viewer
from tests.api.streaming.test_stream import server_udp_ports
from tests.conftest import REPO, ServerProcess, launch_server, run

PORTS = "59470-59479"
HTTP_PORT = 2468
VIEWER, PUBLIC = "10.251.1.2", "10.251.1.1"  # outside: the viewer and the router's public address
GATEWAY, PRIVATE = "10.251.2.1", "10.251.2.2"  # inside: the router and the server

# Runs in the viewer's namespace: wait for the server, start its desktop, then `python -m streaming.viewer`.
NAT_VIEWER = r"""
import json, sys, time, urllib.request
from streaming import viewer
url, token, start = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, method=method, data=data, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
for _ in range(300):  # the server is starting in its namespace
    try:
        call("GET", "/v1/health")
        break
    except OSError:
        time.sleep(0.1)
assert call("POST", "/v1/desktop/start", start)["state"] == "active"
sys.exit(viewer.main([url, token, "--start", *sys.argv[4:]]))
"""


def offer_candidates(sdp: str) -> list[RTCIceCandidate]:
    """The offer's candidates, each line parsed as aiortc parses a remote one (raises if malformed)."""
    return [candidate_from_sdp(line[len("a=candidate:"):]) for line in sdp.splitlines()
            if line.startswith("a=candidate:")]


# -- the option and the offer ------------------------------------------------------------------------

def test_public_candidates_copy_each_non_loopback_socket_to_the_public_address_of_its_family() -> None:
    policy = HostPolicy(public_addresses=("203.0.113.7", "2001:db8::7"))
    direct = Candidate("f", 1, "udp", 2130706431, "10.0.2.100", 59055, "host")
    (public,) = policy.public_candidates(direct)
    assert (public.host, public.port, public.type, public.component) == ("203.0.113.7", 59055, "host", 1)
    assert public.priority < direct.priority
    assert public.foundation not in (direct.foundation, candidate_foundation("host", "udp", "203.0.113.7"))
    assert public.to_sdp().endswith("203.0.113.7 59055 typ host")
    assert [c.host for c in policy.public_candidates(Candidate("f", 1, "udp", 1, "fd00::100", 59056, "host"))] == [
        "2001:db8::7"]
    assert policy.public_candidates(Candidate("f", 1, "udp", 1, "127.0.0.1", 59057, "host")) == []
    with pytest.raises(ValueError, match=r"desktop\.example"):
        HostPolicy(public_addresses=("desktop.example",))


def test_a_bad_public_address_stops_the_server_with_a_clear_message(tmp_path: Path) -> None:
    cases = [(("--webrtc-public-address", "desktop.example"), {}, "--webrtc-public-address"),
             ((), {PUBLIC_ADDRESS_ENV: "127.0.0.1,0.0.0.0"}, PUBLIC_ADDRESS_ENV)]
    for flags, env, named in cases:
        server = launch_server(tmp_path, *flags, env=env, wait=False)
        try:
            assert server.proc.wait(30) == 2
        finally:
            server.stop()
        log = server.log()
        assert named in log and ("desktop.example" in log or "0.0.0.0" in log), log


def test_the_offer_advertises_every_bound_socket_at_the_public_addresses(tmp_path: Path) -> None:
    # From the environment, as a container gets it (`-e`); loopback public addresses keep every packet here.
    server = launch_server(tmp_path, env={PUBLIC_ADDRESS_ENV: "127.0.0.9, ::1"})
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={"displayNum": 470, "width": 320, "height": 240,
                                                          "webrtcPortRange": PORTS})
            assert started.json()["state"] == "active", started.text
            assert api.post("/v1/desktop/stream/start").json()["active"]
            offers: list[str] = []
            bound: set[int] = set()

            async def scenario() -> None:
                viewer = Viewer(server.url, server.token)  # connects on 127.0.0.1: the alias changes nothing else
                try:
                    await viewer.connect()
                    offers.append(viewer.offer_sdp or "")
                    bound.update(server_udp_ports(server.proc.pid))
                finally:
                    await viewer.close()
            run(scenario)
    finally:
        server.stop()
    (offer,) = offers
    SessionDescription.parse(offer)
    candidates = offer_candidates(offer)
    assert candidates and all(c.type == "host" and c.protocol == "udp" for c in candidates), offer
    assert {c.port for c in candidates} <= bound  # each one is a socket the server holds
    public = {"127.0.0.9": 4, "::1": 6}
    direct = [c for c in candidates if c.ip not in public]
    routed = [c for c in direct if not ipaddress.ip_address(c.ip).is_loopback]
    if not routed:
        pytest.skip("this machine has no non-loopback interface address to advertise")
    expected = {(address, c.port) for c in routed for address, version in public.items()
                if ipaddress.ip_address(c.ip).version == version}
    assert {(c.ip, c.port) for c in candidates if c.ip in public} == expected, offer
    assert all(c.priority < min(d.priority for d in direct) for c in candidates if c.ip in public), offer


# -- end to end through a port-forwarding router -----------------------------------------------------

@dataclass(frozen=True)
class PortForward:
    """Namespaces `viewer` | `router` | `server`; the router forwards PUBLIC's ports to PRIVATE."""

    viewer: str
    router: str
    server: str
    forwards: tuple[tuple[str, str], ...] = (("tcp", str(HTTP_PORT)), ("udp", PORTS.replace("-", ":")))
    """(protocol, port or FIRST:LAST) the router forwards from PUBLIC to PRIVATE."""

    @classmethod
    @contextlib.contextmanager
    def create(cls, forwards: tuple[tuple[str, str], ...] | None = None) -> Iterator[PortForward]:
        if os.geteuid() != 0 or shutil.which("ip") is None:
            pytest.skip("network namespaces need root and iproute2")
        if shutil.which("iptables") is None:
            pytest.skip("the NAT needs iptables")
        tag = f"sdnat{os.getpid() % 100000}"
        net = cls(f"{tag}v", f"{tag}r", f"{tag}s", *([forwards] if forwards else []))
        names = (net.viewer, net.router, net.server)
        made: list[str] = []
        try:
            for name in names:
                probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
                if probe.returncode != 0:
                    pytest.skip(f"cannot create a network namespace: {probe.stderr.strip()}")
                made.append(name)
            net._wire()
            yield net
        finally:
            for name in made:
                net._kill_left(name)
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)

    def _wire(self) -> None:
        v, r, s = self.viewer, self.router, self.server
        steps = [
            ["ip", "link", "add", "out", "netns", v, "type", "veth", "peer", "name", "wan", "netns", r],
            ["ip", "link", "add", "lan", "netns", r, "type", "veth", "peer", "name", "in", "netns", s],
            *(["ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"] for n in (v, r, s)),
            ["ip", "-n", v, "addr", "add", f"{VIEWER}/24", "dev", "out"],
            ["ip", "-n", r, "addr", "add", f"{PUBLIC}/24", "dev", "wan"],
            ["ip", "-n", r, "addr", "add", f"{GATEWAY}/24", "dev", "lan"],
            ["ip", "-n", s, "addr", "add", f"{PRIVATE}/24", "dev", "in"],
            *(["ip", "-n", n, "link", "set", dev, "up"] for n, dev in
              ((v, "lo"), (v, "out"), (r, "lo"), (r, "wan"), (r, "lan"), (s, "lo"), (s, "in"))),
            ["ip", "-n", s, "route", "add", "default", "via", GATEWAY],  # the viewer gets no route inside
            ["ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
            *(["ip", "netns", "exec", r, "iptables", "-t", "nat", "-A", "PREROUTING", "-i", "wan", "-d", PUBLIC,
               "-p", proto, "--dport", port, "-j", "DNAT", "--to-destination", PRIVATE]
              for proto, port in self.forwards),
            ["ip", "netns", "exec", r, "iptables", "-P", "FORWARD", "DROP"],
            ["ip", "netns", "exec", r, "iptables", "-A", "FORWARD", "-m", "conntrack", "--ctstate",
             "ESTABLISHED,RELATED", "-j", "ACCEPT"],
            ["ip", "netns", "exec", r, "iptables", "-A", "FORWARD", "-i", "wan", "-m", "conntrack", "--ctstate",
             "DNAT", "-j", "ACCEPT"],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=10)
            assert done.returncode == 0, f"{' '.join(step)}: {done.stderr}"

    def forwarded_udp_packets(self) -> int:
        """Packets the router's UDP DNAT rule has forwarded so far."""
        rules = subprocess.run(["ip", "netns", "exec", self.router, "iptables", "-t", "nat", "-L", "PREROUTING",
                                "-v", "-n", "-x"], capture_output=True, text=True, timeout=10, check=True).stdout
        return sum(int(line.split()[0]) for line in rules.splitlines() if "DNAT" in line and "udp" in line)

    @contextlib.contextmanager
    def server_process(self, tmp: Path, *flags: str) -> Iterator[ServerProcess]:
        """A server on PRIVATE in the server namespace (its health is the viewer script's first wait)."""
        token = "nat-" + os.urandom(8).hex()
        tmp.mkdir(parents=True, exist_ok=True)
        log_path = tmp / "server.log"
        args = ["ip", "netns", "exec", self.server, sys.executable, "-m", "api.cli.main", "server", "--host", PRIVATE,
                "--port", str(HTTP_PORT), "--state-dir", str(tmp / "state"), "--log-level", "warning",
                f"--token={token}", *flags]
        env = {k: v for k, v in os.environ.items() if k not in ("SANDBOX_DESKTOP_TOKEN", PUBLIC_ADDRESS_ENV)}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        server = ServerProcess(f"http://{PUBLIC}:{HTTP_PORT}", token, tmp / "state", proc, log_path, args)
        try:
            yield server
        finally:
            server.stop()
            self._kill_left(self.server)

    def watch(self, server: ServerProcess, display: int, timeout: float,
              *flags: str) -> subprocess.CompletedProcess[str]:
        """Run a viewer (`python -m streaming.viewer ... flags`) in the viewer namespace against the server's
        public URL (bounded)."""
        start = {"displayNum": display, "width": 320, "height": 240, "webrtcPortRange": PORTS}
        args = ["ip", "netns", "exec", self.viewer, sys.executable, "-c", NAT_VIEWER, server.url,
                server.token or "", json.dumps(start), "--address", VIEWER, "--seconds", "2",
                "--timeout", str(timeout), *flags]
        return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout + 60,
                              env={**os.environ, "PYTHONPATH": str(REPO)})

    @staticmethod
    def _kill_left(name: str) -> None:
        """Processes still in a namespace made here (ours: a desktop a killed server left behind)."""
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10).stdout
        for pid in pids.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


@pytest.fixture
def nat() -> Iterator[PortForward]:
    with PortForward.create() as network:
        yield network


def test_a_viewer_outside_a_port_forwarding_nat_gets_frames_only_with_the_public_address(
        tmp_path: Path, nat: PortForward) -> None:
    unreachable = subprocess.run(["ip", "-n", nat.viewer, "route", "get", PRIVATE], capture_output=True, text=True)
    assert unreachable.returncode != 0, unreachable.stdout  # the viewer cannot route to the server itself

    # Without the option the offer names only addresses the viewer cannot reach: no video.
    with nat.server_process(tmp_path / "plain") as server:
        failed = nat.watch(server, 472, timeout=8)
        assert failed.returncode != 0, failed.stdout
        assert "TimeoutError" in failed.stderr, failed.stderr + server.log()
        assert "Traceback" not in server.log(), server.log()

    before = nat.forwarded_udp_packets()
    with nat.server_process(tmp_path / "public", "--webrtc-public-address", PUBLIC) as server:
        watched = nat.watch(server, 471, timeout=30)
        assert watched.returncode == 0, watched.stderr + server.log()
        result = json.loads(watched.stdout.strip().splitlines()[-1])
        assert result["codec"] in ("H264", "VP8") and (result["width"], result["height"]) == (320, 240), result
        assert result["frames"] >= 1, result  # and the first one, which `connect` waited for
    assert nat.forwarded_udp_packets() > before  # the media came through the router's port forwarding
