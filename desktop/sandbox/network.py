"""Each desktop's own network: a namespace reachable only under its rules (docs/sandbox-network.md).

    hub = await NetworkHub.open(server_ports=[2468])          # one per server; NetworkUnavailable(reason)
    net = await hub.create("desk-1", NetworkRules.parse("allowlist", ["pypi.org:443"], [5432]))
    net.netns_path     # what the sandbox's init opens and setns()es into: /run/netns/sdnet-<pid>-<block>-<n>
    net.address        # the desktop's IPv4 address on its link (its gateway is the host's end, net.gateway)
    net.resolv_conf()  # the desktop's /etc/resolv.conf
    await net.update(NetworkRules.parse("none"))              # a live namespace's new rules, atomically
    net.log(limit=50)  # its newest new connections, allowed and refused (ConnectionRecord), oldest first
    await net.close(); await hub.close()                      # nothing left behind

Each desktop is a *slot*: a network namespace whose `eth0` is one end of a veth pair, the other end
(`sdn<block>-<n>`) in the host's namespace with a /31 of the server's block. The server's nftables table
(nftscript.py) decides, by that link, what each desktop's packets may reach, masquerades what leaves, and
logs new connections to an NFLOG group the server reads (nflog.py). Forwarded host ports are listeners inside
the namespace (portforward.py). Making a slot takes two `ip` runs (~10-20 ms on a 2-core VM), so the hub
keeps `pool_size` slots ready in the background, and `create` only adds the desktop's rules: one nftables
transaction, in-process through libnftables (libnft.py). `close` takes the link down and unnames the
namespace (two system calls) and removes its rules (one transaction); the kernel destroys the link soon
after. Figures: bench/sandbox_network.py, docs/sandbox-network.md.

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
from ipaddress import IPv4Address, IPv4Network

from desktop.core.errors import invalid_action
from desktop.sandbox import nethost, nftscript
from desktop.sandbox.netrules import EgressMode, NetworkRules, resolve
from desktop.sandbox.nflog import LoggedPacket, NflogReader
from desktop.sandbox.portforward import PortForwarder
from desktop.sandbox.resolvers import host_resolvers, resolv_conf

__all__ = ["ConnectionRecord", "DesktopNetwork", "EgressMode", "NetworkHub", "NetworkRules", "NetworkUnavailable"]

DEFAULT_SUPERNET = IPv4Network("10.223.0.0/16")
"""Every server's desktops, a block each; `SANDBOX_DESKTOP_NETWORK` names another (a host route overlapping
it makes `open` refuse, naming the route)."""
BLOCK_PREFIX = 23
"""A server's block: 256 desktops of a /31 each; a /16 holds 128 servers."""
LOG_RECORDS = 1000
"""Connection records kept per desktop: the newest, in memory."""
NFLOG_FIRST_GROUP = 0x5D00
LINK_GONE_TIMEOUT_S = 3.0

log = logging.getLogger(__name__)


class NetworkUnavailable(RuntimeError):
    """This machine cannot give desktops networks of their own; `reason` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ConnectionRecord:
    """A new connection a desktop opened (or tried to): when, the verdict, and where to."""

    at: float
    """Wall-clock time (seconds since the epoch) the server read it, within ~50 ms of the packet."""
    verdict: str
    """`allowed` or `refused`."""
    protocol: str
    """`tcp`, `udp`, `icmp`, or the IP protocol number."""
    address: str
    port: int | None


@dataclass
class _Slot:
    number: int
    link: str
    netns: str
    index: int
    """Its /31 within the block."""
    gateway: IPv4Address
    """The host's end of its link (the even address of the /31)."""
    address: IPv4Address
    """The desktop's end."""
    ruled: bool = False
    """Whether its rules chain exists (set when a desktop took it)."""


@dataclass
class DesktopNetwork:
    """One desktop's network, made by `NetworkHub.create`."""

    desktop_id: str
    netns_path: str
    address: str
    gateway: str
    rules: NetworkRules
    _hub: NetworkHub = field(repr=False)
    _slot: _Slot = field(repr=False)
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
        """Cut the desktop off and drop its namespace now; its rules go in the next sweep. Idempotent."""
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
        self._serial = 0
        self._free = deque(range(block.num_addresses // 2))
        self._pool: deque[_Slot] = deque()
        self._slots: dict[int, _Slot] = {}
        """Every slot whose namespace, link or rules may exist, from its first command until it is swept."""
        self._desktops: dict[int, DesktopNetwork] = {}
        self._closing: list[_Slot] = []
        self._pool_wanted = asyncio.Event()
        self._refill: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
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
        claim = await asyncio.to_thread(nethost.hold_lock, lock_path, True)
        assert claim is not None
        block_lock = reader = None
        try:
            owners = await nethost.live_owners()
            await nethost.remove_leftovers(owners)
            blocks = list(supernet.subnets(new_prefix=BLOCK_PREFIX))
            number = next((n for n in range(len(blocks)) if n not in owners), None)
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
        hub._refill = asyncio.create_task(hub._fill_pool(), name="sandbox-network-pool")
        return hub

    async def create(self, desktop_id: str, rules: NetworkRules, field: str = "network") -> DesktopNetwork:
        """The desktop's network, ready when this returns: a pooled slot (or a new one) under `rules`.

        A rule the host cannot satisfy (a host name that does not resolve, a forwarded port that is the
        server's own or taken inside the desktop) raises `invalid_action` naming it; the slot goes back."""
        if not self._open:
            raise RuntimeError("the network hub is closed")
        slot = self._pool.popleft() if self._pool else await self._new_slot()
        self._wake_pool()
        records: deque[ConnectionRecord] = deque(maxlen=LOG_RECORDS)

        def forwarded(port: int) -> None:
            records.append(ConnectionRecord(time.time(), "forwarded", "tcp", "127.0.0.1", port))

        forwarder = PortForwarder(self._netns_path(slot), forwarded)
        try:
            await self._apply(slot, rules, forwarder, field, first=True)
        except BaseException:
            await forwarder.close()
            if slot.ruled:
                await self._drop_slots([slot])
            else:  # untouched: a caller's mistake (a bad host, a taken port) costs no slot
                self._pool.appendleft(slot)
            raise
        network = DesktopNetwork(desktop_id, self._netns_path(slot), str(slot.address), str(slot.gateway), rules,
                                 self, slot, forwarder, records)
        self._desktops[slot.number] = network
        return network

    async def close(self) -> None:
        """Close every desktop's network and remove all this server made: table, namespaces, links, locks."""
        if not self._open:
            return
        self._open = False
        self._pool_wanted.set()
        if self._refill is not None:  # let a slot being made finish, so that it is removed with the rest
            await asyncio.wait([self._refill], timeout=nethost.COMMAND_TIMEOUT_S)
        if self._sweeper is not None:
            self._sweeper.cancel()
        for desktop in list(self._desktops.values()):
            await desktop._forwarder.close()
            desktop.closed = True
        slots = list(self._slots.values())
        self._slots.clear()
        self._pool.clear()
        self._desktops.clear()
        self._reader.close()
        await asyncio.to_thread(_cut, slots)
        with contextlib.suppress(nethost.HostCommandFailed):
            await nethost.nft(f"delete table inet {self.names.table}\n")
        await self._links_gone([s.link for s in slots])
        with contextlib.suppress(OSError):
            os.unlink(self.names.block_lock)
        os.close(self._block_lock)

    # -- inside ------------------------------------------------------------------------------------------

    def _netns_path(self, slot: _Slot) -> str:
        return os.path.join(nethost.NETNS_DIR, slot.netns)

    async def _apply(self, slot: _Slot, rules: NetworkRules, forwarder: PortForwarder, field: str,
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

    async def _new_slot(self) -> _Slot:
        """A namespace and link ready for a desktop's rules: ~20 ms of `ip` and `nft`, four runs."""
        if not self._free:
            raise RuntimeError(f"all {self.block.num_addresses // 2} desktop networks of {self.block} are in use")
        self._serial += 1
        number, index = self._serial, self._free.popleft()
        base = int(self.block.network_address) + 2 * index
        host, desktop = IPv4Address(base), IPv4Address(base + 1)
        slot = _Slot(number, self.names.link(number), self.names.netns(number), index, host, desktop)
        self._slots[number] = slot
        try:
            await nethost.nft(nftscript.slot_script(self.names.table, number, slot.link, str(desktop),
                                                    self.log_group))
            await nethost.ip_batch([f"netns add {slot.netns}",
                                    f"link add {slot.link} type veth peer name eth0 netns {slot.netns}",
                                    f"addr add {host}/31 dev {slot.link}", f"link set {slot.link} up"])
            nethost.write_sysctl(f"net/ipv6/conf/{slot.link}/disable_ipv6", "1")
            await nethost.ip_batch(["link set lo up", f"addr add {desktop}/31 dev eth0", "link set eth0 up",
                                    f"route add default via {host}"], netns=slot.netns)
            await nethost.in_namespace(self._netns_path(slot), lambda: nethost.write_sysctl(
                "net/ipv6/conf/eth0/disable_ipv6", "1"))
        except BaseException:
            await self._drop_slots([slot])
            raise
        return slot

    async def _fill_pool(self) -> None:
        failures = 0
        while self._open:
            self._pool_wanted.clear()
            while self._open and len(self._pool) < self.pool_size and self._free:
                try:
                    self._pool.append(await self._new_slot())
                    failures = 0
                except (nethost.HostCommandFailed, OSError, RuntimeError):
                    failures += 1  # create() makes its own slots meanwhile, and says what fails
                    log.warning("a pooled desktop network failed (%d in a row)", failures, exc_info=True)
                    await asyncio.sleep(min(30.0, 0.5 * 2 ** failures))
            await self._pool_wanted.wait()

    def _wake_pool(self) -> None:
        self._pool_wanted.set()

    async def _release(self, desktop: DesktopNetwork) -> None:
        self._desktops.pop(desktop._slot.number, None)
        await self._drop_slots([desktop._slot])

    async def _drop_slots(self, slots: list[_Slot]) -> None:
        """Links down (cut off at once, even if a process still holds the namespace), namespaces unnamed,
        their rules removed; the kernel destroys the links a moment later, and the sweep waits for that
        before it hands their addresses out again."""
        if not self._open:
            return
        await asyncio.to_thread(_cut, slots)
        try:
            await nethost.nft(nftscript.forget_script(self.names.table, [(s.number, s.link, str(s.address), s.ruled)
                                                                         for s in slots]))
        except nethost.HostCommandFailed:  # left for the table's removal when the hub closes
            log.warning("the rules of closed desktop networks were not removed", exc_info=True)
        self._closing += slots
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="sandbox-network-sweep")

    async def _sweep(self) -> None:
        """Wait for closed slots' links to go, then free their addresses."""
        while self._closing and self._open:
            slots, self._closing = self._closing, []
            await self._links_gone([s.link for s in slots])
            for s in slots:
                self._slots.pop(s.number, None)
                self._free.append(s.index)

    async def _links_gone(self, links: list[str]) -> None:
        """Wait until the kernel has destroyed `links` (it does when their namespace goes); delete those that
        a process still holding a namespace keeps alive."""
        deadline = time.monotonic() + LINK_GONE_TIMEOUT_S
        while (left := [link for link in links if os.path.exists(f"/sys/class/net/{link}")]) and \
                time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if left:
            await nethost.ip_batch([f"link del {link}" for link in left], force=True)

    def _logged(self, packet: LoggedPacket) -> None:
        number, _, verdict = packet.prefix.partition(" ")
        desktop = self._desktops.get(int(number)) if number.isdigit() else None
        if desktop is not None:
            desktop._records.append(ConnectionRecord(time.time(), verdict, packet.protocol, packet.address,
                                                     packet.port))



def _cut(slots: Sequence[_Slot]) -> None:
    """Links down and namespaces unnamed, in-process (no `ip` run): a closing desktop is cut off at once."""
    for slot in slots:
        nethost.link_down(slot.link)
        nethost.unname_namespace(slot.netns)
