"""Each desktop's own network: a namespace reachable only under its rules (docs/sandbox-network.md).

    hub = await NetworkHub.open(server_ports=[2468])          # one per server; NetworkUnavailable(reason)
    net = await hub.create("desk-1", NetworkRules.parse("allowlist", ["pypi.org:443"], [5432]))
    net.netns_path     # what the sandbox's init opens and setns()es into: /run/netns/sdnet-<pid>-<block>-<n>
    net.address        # the desktop's IPv4 address on its link (its gateway is the host's end, net.gateway)
    net.resolv_conf()  # the desktop's /etc/resolv.conf
    await net.update(NetworkRules.parse("none"))              # a live namespace's new rules, atomically
    net.log(limit=50)  # its newest new connections (ConnectionRecord: allowed, refused, forwarded), oldest first
    await net.close(); await hub.close()                      # nothing left behind

Each desktop's network is a *slot* (slots.py): a network namespace on a veth link to the host, made ahead in
a pool. The server's nftables table (nftscript.py) decides, by that link, what each desktop's packets may
reach, masquerades what leaves, and logs new connections to an NFLOG group the server reads (nflog.py);
forwarded host ports are listeners inside the namespace (portforward.py). `create` takes a ready slot and
adds the desktop's rules: one nftables transaction, in-process through libnftables (libnft.py), ~2 ms.
`close` takes the link down, unnames the namespace (two system calls) and removes its rules; the kernel
destroys the link soon after. Figures: bench/sandbox_network.py, docs/sandbox-network.md.

The rootless path (no root, no nft) is not built: `open` raises NetworkUnavailable saying why, and the caller
runs desktops without isolation, saying so (docs/sandbox-network.md, "Where it is not available").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network

from desktop.core.errors import invalid_action
from desktop.sandbox import nethost, nftscript
from desktop.sandbox.netrules import EgressMode, NetworkRules, resolve
from desktop.sandbox.nflog import LoggedPacket, NflogReader
from desktop.sandbox.portforward import PortForwarder
from desktop.sandbox.resolvers import host_resolvers, resolv_conf
from desktop.sandbox.slots import Slot, SlotPool

__all__ = ["ConnectionRecord", "DesktopNetwork", "EgressMode", "NetworkHub", "NetworkRules", "NetworkUnavailable",
           "Verdict"]

DEFAULT_SUPERNET = IPv4Network("10.223.0.0/16")
"""Every server's desktops, a block each; `SANDBOX_DESKTOP_NETWORK` names another (a host route overlapping
it makes `open` refuse, naming the route)."""
BLOCK_PREFIX = 23
"""A server's block: 256 desktops of a /31 each; a /16 holds 128 servers."""
LOG_RECORDS = 1000
"""Connection records kept per desktop: the newest, in memory."""
NFLOG_FIRST_GROUP = 0x5D00
CLAIM_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)


class NetworkUnavailable(RuntimeError):
    """This machine cannot give desktops networks of their own; `reason` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Verdict(StrEnum):
    """What became of a desktop's new connection."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    FORWARDED = "forwarded"
    """Made to a forwarded host port on the desktop's loopback, and relayed to the host's."""


@dataclass(frozen=True)
class ConnectionRecord:
    """A new connection a desktop opened (or tried to): when, the verdict, and where to."""

    at: float
    """Wall-clock time (seconds since the epoch) the server read it, within ~50 ms of the packet."""
    verdict: Verdict
    protocol: str
    """`tcp`, `udp`, `icmp`, or the IP protocol number."""
    address: str
    port: int | None


@dataclass
class DesktopNetwork:
    """One desktop's network, made by `NetworkHub.create`."""

    desktop_id: str
    netns_path: str
    address: str
    gateway: str
    rules: NetworkRules
    _hub: NetworkHub = field(repr=False)
    _slot: Slot = field(repr=False)
    _forwarder: PortForwarder = field(repr=False)
    _records: deque[ConnectionRecord] = field(repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    closed: bool = False

    def resolv_conf(self) -> str:
        """The desktop's /etc/resolv.conf: the host's resolvers it can reach (none with egress `none`)."""
        resolvers = () if self.rules.egress is EgressMode.NONE else self._hub.resolvers
        return resolv_conf(resolvers, self._hub.search, reason=self.rules.egress.value)

    async def update(self, rules: NetworkRules, field: str = "network") -> None:
        """Apply new rules to the live namespace: host names resolved again, the old rules replaced in one
        transaction (flows the new rules refuse are cut), forwarded ports opened and closed to match."""
        async with self._lock:
            if self.closed:
                raise RuntimeError(f"the network of desktop {self.desktop_id} is closed")
            await self._hub._apply(self._slot, rules, self._forwarder, field, first=False)
            self.rules = rules

    def log(self, limit: int = 200) -> list[ConnectionRecord]:
        """The newest `limit` records, oldest first; at most LOG_RECORDS are kept."""
        if limit <= 0:
            return []
        return list(self._records)[-limit:]

    async def close(self) -> None:
        """Cut the desktop off (its link down), unname its namespace and remove its rules; idempotent. A process
        still in the namespace keeps it alive, reaching nothing, until it ends."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            await self._forwarder.close()
            await self._hub._release(self)


class NetworkHub:
    """The server's part of every desktop's network: its claim, its table, the slot pool, the log reader."""

    def __init__(self, names: nethost.Names, block: IPv4Network, server_ports: Sequence[int],
                 resolvers: tuple[str, ...], search: tuple[str, ...], block_lock: int, reader: NflogReader,
                 pool_size: int) -> None:
        self.names = names
        self.block = block
        self.server_ports = tuple(server_ports)
        self.resolvers = resolvers
        self.search = search
        self.pool_size = pool_size
        self._block_lock = block_lock
        self._reader = reader
        self._slots = SlotPool(names, block, reader.group, pool_size)
        self._desktops: dict[int, DesktopNetwork] = {}
        self._open = True
        self.warnings: list[str] = []
        """What on this host may keep desktops' traffic from flowing although the hub works (another
        firewall's forward chain that drops by default), for the operator; also logged at open."""

    @property
    def log_group(self) -> int:
        return self._reader.group

    @classmethod
    async def open(cls, server_ports: Sequence[int], *, pool_size: int = 2, resolvers: Sequence[str] | None = None,
                   supernet: IPv4Network | None = None) -> NetworkHub:
        """Claim a block, clean up after dead servers, create the table and start the pool and log reader.

        Raises NetworkUnavailable saying what this machine lacks (root, `ip`, `nft`, nf_tables, a free block)."""
        if os.geteuid() != 0:
            raise NetworkUnavailable("desktop networks need root (CAP_NET_ADMIN and CAP_SYS_ADMIN); "
                                     f"the server runs as uid {os.geteuid()}")
        for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
            if shutil.which(tool) is None:
                raise NetworkUnavailable(f"`{tool}` is not installed (package {package}); "
                                         "`sandbox-desktop install desktop --yes` installs it")
        supernet = supernet or IPv4Network(os.environ.get("SANDBOX_DESKTOP_NETWORK", str(DEFAULT_SUPERNET)))
        if overlap := nethost.overlapping_routes(supernet):
            raise NetworkUnavailable(f"the desktops' range {supernet} overlaps the host's routes "
                                     f"({'; '.join(overlap)}); set SANDBOX_DESKTOP_NETWORK to a free private range")
        found, search = host_resolvers()
        chosen = tuple(str(IPv4Address(r)) for r in resolvers) if resolvers is not None else found
        try:
            return await cls._claim(supernet, server_ports, chosen, search, pool_size)
        except nethost.HostCommandFailed as error:
            raise NetworkUnavailable(f"the host refused the desktops' network: {error}") from error
        except OSError as error:
            raise NetworkUnavailable(f"the host refused the desktops' network: {error}") from error

    @classmethod
    async def _claim(cls, supernet: IPv4Network, server_ports: Sequence[int], resolvers: tuple[str, ...],
                     search: tuple[str, ...], pool_size: int) -> NetworkHub:
        lock_path = os.path.join(nethost.STATE_DIR, "network.lock")
        deadline = time.monotonic() + CLAIM_TIMEOUT_S
        while (claim := nethost.hold_lock(lock_path, False)) is None:  # held ~10 ms by a server starting
            if time.monotonic() > deadline:
                raise NetworkUnavailable(f"{lock_path} has been held for {CLAIM_TIMEOUT_S:.0f} s by another process")
            await asyncio.sleep(0.01)
        block_lock = reader = None
        try:
            owners = await nethost.live_owners()
            await nethost.remove_leftovers(owners)
            blocks = list(supernet.subnets(new_prefix=BLOCK_PREFIX))
            # A block is free when no table here names it and no server holds its lock (one whose tables are
            # in another network namespace holds its lock all the same).
            number = next((n for n in range(len(blocks)) if n not in owners
                           and not nethost.lock_held(nethost.Names(os.getpid(), n).block_lock)), None)
            if number is None:
                raise NetworkUnavailable(f"all {len(blocks)} blocks of {supernet} are held by live servers")
            names = nethost.Names(os.getpid(), number)
            block_lock = nethost.hold_lock(names.block_lock, False)
            if block_lock is None:
                raise NetworkUnavailable(f"the lock of block {number} is held although no table names it")
            reader = NflogReader.bind(NFLOG_FIRST_GROUP + number)
            if nethost.read_sysctl("net/ipv4/ip_forward") != "1":
                # Routing between the desktops' links and the host's is what makes their egress possible; the
                # setting is host-wide and stays on (as Docker leaves it): other servers may rely on it.
                nethost.write_sysctl("net/ipv4/ip_forward", "1")
            await nethost.nft(nftscript.table_script(names.table, blocks[number], supernet, resolvers))
        except BaseException:
            if reader is not None:
                reader.close()
            if block_lock is not None:
                os.close(block_lock)
            raise
        finally:
            os.close(claim)
        hub = cls(names, blocks[number], server_ports, resolvers, search, block_lock, reader, pool_size)
        hub.warnings = await nethost.forward_blockers(names.table)
        for warning in hub.warnings:
            log.warning("desktop networks: %s", warning)
        reader.start(hub._logged)
        hub._slots.start()
        return hub

    async def create(self, desktop_id: str, rules: NetworkRules, field: str = "network") -> DesktopNetwork:
        """The desktop's network, ready when this returns: a pooled slot (or a new one) under `rules`.

        A rule the host cannot satisfy (a host name that does not resolve, a forwarded port that is the
        server's own or taken inside the desktop) raises `invalid_action` naming it; the slot goes back."""
        if not self._open:
            raise RuntimeError("the network hub is closed")
        slot = await self._slots.take()
        records: deque[ConnectionRecord] = deque(maxlen=LOG_RECORDS)

        def forwarded(port: int) -> None:
            records.append(ConnectionRecord(time.time(), Verdict.FORWARDED, "tcp", "127.0.0.1", port))

        forwarder = PortForwarder(slot.netns_path, forwarded)
        try:
            await self._apply(slot, rules, forwarder, field, first=True)
        except BaseException:
            await forwarder.close()
            if slot.ruled:
                await self._slots.drop([slot])
            else:  # untouched: a caller's mistake (a bad host, a taken port) costs no slot
                self._slots.give_back(slot)
            raise
        network = DesktopNetwork(desktop_id, slot.netns_path, str(slot.address), str(slot.gateway), rules,
                                 self, slot, forwarder, records)
        self._desktops[slot.number] = network
        return network

    async def close(self) -> None:
        """Close every desktop's network and remove all this server made: table, namespaces, links, locks."""
        if not self._open:
            return
        self._open = False
        for desktop in list(self._desktops.values()):
            await desktop._forwarder.close()
            desktop.closed = True
        self._desktops.clear()
        self._reader.close()
        await self._slots.close()
        with contextlib.suppress(nethost.HostCommandFailed):
            await nethost.nft(f"delete table inet {self.names.table}\n")
        with contextlib.suppress(OSError):
            os.unlink(self.names.block_lock)
        os.close(self._block_lock)

    # -- inside ------------------------------------------------------------------------------------------

    async def _apply(self, slot: Slot, rules: NetworkRules, forwarder: PortForwarder, field: str,
                     first: bool) -> None:
        for i, port in enumerate(rules.forward_host_ports):
            if port in self.server_ports:
                name = f"{field}.forwardHostPorts[{i}]"
                raise invalid_action(f"{name}: port {port} is the server's own; it is never forwarded", name)
        allowed = await resolve(rules, field)
        before = forwarder.ports
        await forwarder.set_ports(rules.forward_host_ports, f"{field}.forwardHostPorts")
        try:
            await nethost.nft(nftscript.rules_script(self.names.table, slot.number, slot.link, rules, allowed,
                                                     first))
        except BaseException:
            await forwarder.set_ports(before)
            raise
        slot.ruled = True

    async def _release(self, desktop: DesktopNetwork) -> None:
        self._desktops.pop(desktop._slot.number, None)
        await self._slots.drop([desktop._slot])

    def _logged(self, packet: LoggedPacket) -> None:
        number, _, verdict = packet.prefix.partition(" ")
        desktop = self._desktops.get(int(number)) if number.isdigit() else None
        if desktop is not None and verdict in Verdict.__members__.values():
            desktop._records.append(ConnectionRecord(time.time(), Verdict(verdict), packet.protocol,
                                                     packet.address, packet.port))


