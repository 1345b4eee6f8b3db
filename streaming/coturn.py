"""The live view's own TURN server: coturn, started by the server (`server --turn local`) and stopped with it
(docs/streaming-turn.md).

coturn runs as a child of the server from a configuration file in the server's state directory (mode 0600:
it holds the shared secret, which therefore never shows on a process list). The secret is random per server
start and checks the per-viewer credentials of streaming/turn.py. Its relays may only send to this machine's
own addresses (where the live view's sockets are), over UDP: a viewer's credential cannot turn it into a
proxy into the server's network. If coturn exits, it is started again, a few times.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from desktop.core.dependencies import which
from desktop.processes import ProcessManager
from desktop.processes.managed import ManagedProcess
from sandbox_desktop_wire.enums import ProcessOwner
from streaming.turn import DEFAULT_TTL_S, SharedSecret, TurnRelays

logger = logging.getLogger("sandbox_desktop.stream.turn")

TURNSERVER = "turnserver"
INSTALL_HINT = "`sandbox-desktop install desktop --yes --with-turn` (Debian and Ubuntu: `apt-get install coturn`)"
DEFAULT_PORT = 3478
DEFAULT_RELAY_PORTS = (49160, 49199)
REALM = "sandbox-desktop"
READY_TIMEOUT_S = 10.0
MAX_RESTARTS = 5
"""Unexpected exits restarted; after that the live view goes on without its relay (logged)."""
WILDCARDS = ("0.0.0.0", "::", "")


class TurnServerUnavailable(RuntimeError):
    """coturn is not installed, or did not start; the message says what to do."""


def turnserver_missing() -> str | None:
    """Why `--turn local` cannot run here (coturn is not installed), or None."""
    if which(TURNSERVER) is None:
        return f"--turn local needs coturn's `{TURNSERVER}`, which is not installed: run {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class LocalTurnOptions:
    """Where the local TURN server listens and relays, and what its URLs name."""

    listen: str = "127.0.0.1"
    """The address coturn listens on, UDP and TCP (`--turn-listen`); also where it relays from, unless a wildcard."""
    port: int = DEFAULT_PORT
    relay_ports: tuple[int, int] = DEFAULT_RELAY_PORTS
    """The UDP ports relays are allocated on, one per relayed viewer (`--turn-relay-ports`)."""
    public_host: str | None = None
    """The host the URLs name (`--turn-public-host`); default: the first public address, else the listen
    address, else (a wildcard) this machine's first non-loopback address."""
    public_addresses: tuple[str, ...] = ()
    """`--webrtc-public-address`: a 1:1 NAT in front of this machine (coturn's `external-ip`)."""
    ttl: int = DEFAULT_TTL_S
    """How long a viewer's credential is valid (`--turn-ttl`)."""
    server_relay: bool = False
    """Whether the server's own peer relays too (`--turn-server-relay`)."""

    def __post_init__(self) -> None:
        if not self.wildcard:
            try:
                ipaddress.ip_address(self.listen)
            except ValueError:  # coturn listens on addresses, not names
                raise ValueError(f"the TURN server listens on an IP address, got {self.listen!r}: pass "
                                 "--turn-listen ADDR[:PORT]") from None
        if self.ttl < 1:
            raise ValueError(f"--turn-ttl must be at least 1 second, got {self.ttl}")
        low, high = self.relay_ports
        if not 1024 <= low <= high <= 65535:
            raise ValueError(f"TURN relay ports must satisfy 1024 <= low <= high <= 65535, got {low}-{high}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"TURN port must be 1-65535, got {self.port}")

    @property
    def wildcard(self) -> bool:
        return self.listen in WILDCARDS

    def advertised_host(self) -> str:
        """The host viewers reach the TURN server at."""
        if self.public_host:
            return self.public_host
        if self.public_addresses:
            return self.public_addresses[0]
        if not self.wildcard:
            return self.listen
        routed = [a for a in host_addresses() if not ipaddress.ip_address(a).is_loopback]
        return routed[0] if routed else "127.0.0.1"

    def urls(self) -> tuple[str, ...]:
        host = self.advertised_host()
        named = f"[{host}]" if ":" in host else host
        return tuple(f"turn:{named}:{self.port}?transport={transport}" for transport in ("udp", "tcp"))

    def probe_address(self) -> tuple[str, int]:
        """Where the server itself checks that coturn answers."""
        host = "127.0.0.1" if self.listen in ("0.0.0.0", "") else "::1" if self.listen == "::" else self.listen
        return host, self.port


def host_addresses() -> list[str]:
    """This machine's interface addresses, as aioice finds them for the live view's host candidates."""
    from aioice.ice import get_host_addresses
    return list(get_host_addresses(use_ipv4=True, use_ipv6=True))


def relay_peers(options: LocalTurnOptions) -> tuple[str, ...]:
    """The addresses relays may send to: where the live view's sockets are (this machine, and its public
    addresses); loopback too when coturn relays from loopback (a one-machine setup or a test)."""
    peers = [*host_addresses(), *options.public_addresses]
    if not options.wildcard and ipaddress.ip_address(options.listen).is_loopback:
        peers += ["127.0.0.1", "::1"]
    return tuple(dict.fromkeys(peers))


def coturn_config(options: LocalTurnOptions, secret: str, state_dir: Path, peers: tuple[str, ...]) -> str:
    """coturn's configuration file (every option is one of coturn 4.6's `turnserver.conf` lines)."""
    low, high = options.relay_ports
    lines = [
        f"listening-port={options.port}",
        *([] if options.wildcard else [f"listening-ip={options.listen}", f"relay-ip={options.listen}"]),
        *[f"external-ip={address}" for address in options.public_addresses[:1]],
        f"min-port={low}", f"max-port={high}",
        "use-auth-secret", f"static-auth-secret={secret}", f"realm={REALM}", "fingerprint",
        # Media only: no TCP relays (RFC 6062), no TLS listeners to configure, no telnet console.
        "no-tcp-relay", "no-tls", "no-dtls", "no-cli", "no-multicast-peers", "no-software-attribute",
        # Relays reach only the peers listed: allowed-peer-ip wins over the blanket deny.
        "denied-peer-ip=0.0.0.0-255.255.255.255", "denied-peer-ip=::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        *[f"allowed-peer-ip={peer}" for peer in peers],
        *(["allow-loopback-peers"] if any(ipaddress.ip_address(p).is_loopback for p in peers) else []),
        # Verbose: each allocation and its close (with the bytes it relayed) is logged; media itself is not.
        "log-file=stdout", "simple-log", "verbose",
        f"userdb={state_dir / 'turndb'}", f"pidfile={state_dir / 'turnserver.pid'}",
    ]
    return "\n".join(lines) + "\n"


class LocalTurnServer:
    """coturn as a supervised child of the server: `start()` with the server, `stop()` with it."""

    def __init__(self, options: LocalTurnOptions, processes: ProcessManager, state_dir: Path) -> None:
        self.options = options
        self.state_dir = state_dir
        self.config_path = state_dir / "turnserver.conf"
        self.log_path = state_dir / "turnserver.log"
        self._processes = processes
        self._secret = secrets.token_urlsafe(32)
        self._process: ManagedProcess | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0

    def relays(self) -> TurnRelays:
        """The URLs and per-viewer credentials viewers get for this server."""
        return TurnRelays(self.options.urls(), SharedSecret(self._secret, self.options.ttl), self.options.server_relay)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    async def start(self) -> None:
        """Write the configuration (0600) and start coturn; returns once it answers STUN."""
        missing = turnserver_missing()
        if missing is not None:
            raise TurnServerUnavailable(missing)
        taken = port_taken(self.options.listen, self.options.port)
        if taken is not None:  # coturn would share it (SO_REUSEPORT) with another server, and its viewers
            raise TurnServerUnavailable(f"the TURN port {self.options.listen or '*'}:{self.options.port} is taken "
                                        f"({taken}): pass --turn-listen ADDR:PORT with a free one")
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        peers = await asyncio.to_thread(relay_peers, self.options)
        text = coturn_config(self.options, self._secret, self.state_dir, peers)
        descriptor = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as config:
            os.fchmod(config.fileno(), 0o600)  # an older file keeps its mode through O_CREAT
            config.write(text)
        await self._spawn()
        logger.info("TURN server (coturn) on %s:%d, relays on UDP %d-%d; viewers get %s", self.options.listen or "*",
                    self.options.port, *self.options.relay_ports, ", ".join(self.options.urls()))
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="turnserver-watch")

    async def stop(self) -> None:
        self._stopping = True
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        process, self._process = self._process, None
        if process is not None and process.running:
            await process.stop(2000)

    async def _spawn(self) -> None:
        process = await self._processes.spawn(TURNSERVER, ["-c", str(self.config_path)], owner=ProcessOwner.SYSTEM,
                                              protected=True, log_path=self.log_path)
        self._process = process
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not await asyncio.to_thread(stun_answers, self.options.probe_address()):
            if not process.running or time.monotonic() > deadline:
                await process.kill(0)
                raise TurnServerUnavailable(f"coturn did not start on {self.options.listen}:{self.options.port} "
                                            f"(its log: {self.log_path}): {self.log_tail()}")

    async def _watch(self) -> None:
        while self._process is not None and not self._stopping:
            await self._process.wait()
            if self._stopping:
                return
            if self.restarts >= MAX_RESTARTS:
                logger.error("coturn exited %d times; relayed viewers cannot connect (log: %s)", self.restarts + 1,
                             self.log_path)
                return
            self.restarts += 1
            logger.warning("coturn exited (%s); starting it again", self.log_tail())
            try:
                await self._spawn()
            except TurnServerUnavailable as exc:
                logger.error("%s", exc)
                return

    def log_tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        return "no log"

    def allocations(self) -> list[str]:
        """The usernames of the allocations coturn granted so far, oldest first (read off its log)."""
        with contextlib.suppress(OSError):
            return [line.split(" user <", 1)[1].split(">", 1)[0] for line in self.log_path.read_text().splitlines()
                    if "ALLOCATE processed, success" in line and " user <" in line]
        return []


def port_taken(address: str, port: int) -> str | None:
    """Why `port` cannot be coturn's alone on `address`, UDP and TCP (a plain bind, no reuse), or None."""
    host = address or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for kind, name in ((socket.SOCK_DGRAM, "UDP"), (socket.SOCK_STREAM, "TCP")):
        with socket.socket(family, kind) as probe:
            try:
                probe.bind((host, port))
            except OSError as exc:
                return f"{name}: {exc.strerror}"
    return None


def stun_answers(address: tuple[str, int], timeout: float = 0.2) -> bool:
    """Whether a STUN server answers a Binding request at `address` (UDP)."""
    transaction = secrets.token_bytes(12)
    request = b"\x00\x01\x00\x00\x21\x12\xa4\x42" + transaction  # Binding request, no attributes (RFC 5389)
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.sendto(request, address)
            answer = probe.recv(2048)
        except OSError:
            return False
    return len(answer) >= 20 and answer[:2] == b"\x01\x01" and answer[8:20] == transaction
