"""A server's desktop network slots: made ahead in a pool, handed to desktops, cut off and removed.

A slot is what a desktop's network is before it has rules: a named network namespace whose `eth0` is one end
of a veth pair, the other end (`sdn<block>-<n>`) in the host's namespace, the pair a /31 of the server's block,
IPv6 off on both ends, and the slot's chains in the server's table (nftscript.slot_script), its link listed so
the table drops all it sends until a desktop's rules exist. Making one takes two `ip` runs (~10-20 ms on a
2-core VM), so `SlotPool` keeps `size` ready, made in the background as desktops take them.

The host's end of the /31 is not an address on the link but two routes on it: a local one (the host takes what
is sent to the gateway as sent to itself: the input chain, the rules) and the desktop's /32; each end has the
other's MAC address as a permanent neighbour (`link_addresses`). An address added or removed is a change of the
host's network to every program watching it: Chromium fails the requests it is connecting at that moment with
ERR_NETWORK_CHANGED, to every site, so a browser on the server's machine lost fetches each time a desktop was
made or closed (docs/sandbox-network.md, "How it is built"). Links, routes and neighbours coming and going are no
such change; all of them go with the link.

Slot numbers never repeat within a server, so a link or a log prefix always names one slot; addresses do,
but only once the kernel has destroyed the link that had one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from desktop.sandbox import nethost, nftscript

LINK_GONE_TIMEOUT_S = 3.0
"""How long a closed slot's link may outlive its namespace (a process still in it) before it is deleted."""

log = logging.getLogger(__name__)


@dataclass
class Slot:
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
    """Whether a desktop's rules chain exists for it (set when a desktop took it)."""

    @property
    def netns_path(self) -> str:
        return os.path.join(nethost.NETNS_DIR, self.netns)


class SlotPool:
    """One server's slots: those ready, those in use, those being removed."""

    def __init__(self, names: nethost.Names, block: IPv4Network, log_group: int, size: int) -> None:
        self.names = names
        self.block = block
        self.log_group = log_group
        self.size = size
        self._serial = 0
        self._free = deque(range(block.num_addresses // 2))
        self._ready: deque[Slot] = deque()
        self._slots: dict[int, Slot] = {}
        """Every slot whose namespace, link or rules may exist, from its first command until its link is gone."""
        self._closing: list[Slot] = []
        self._wanted = asyncio.Event()
        self._refill: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._open = True

    def start(self) -> None:
        self._refill = asyncio.create_task(self._fill(), name="sandbox-network-pool")

    @property
    def ready(self) -> int:
        return len(self._ready)

    @property
    def settled(self) -> bool:
        """No closed slot's link is still waited for."""
        return not self._closing and (self._sweeper is None or self._sweeper.done())

    async def take(self) -> Slot:
        """A ready slot, or a new one when none is. A pooled slot whose namespace is no longer named (something
        outside the server removed it: `ip -all netns delete`, a clean-up script) is dropped, not handed out."""
        while self._ready:
            slot = self._ready.popleft()
            if os.path.exists(slot.netns_path):
                break
            log.warning("pooled desktop network %s was removed from outside the server; making another",
                        slot.netns)
            await self.drop([slot])
        else:
            slot = await self._new()
        self._wanted.set()
        return slot

    def give_back(self, slot: Slot) -> None:
        """A slot a desktop took but never set rules on: as good as new."""
        self._ready.appendleft(slot)

    async def drop(self, slots: list[Slot]) -> None:
        """Links down (cut off at once, even if a process still holds the namespace), namespaces unnamed, rules
        removed; the kernel destroys the links a moment later, and the sweep waits for that before it hands
        their addresses out again."""
        if not self._open:
            return
        await asyncio.to_thread(_cut, slots)
        try:
            await nethost.nft(nftscript.forget_script(self.names.table, [(s.number, s.link, str(s.address), s.ruled)
                                                                         for s in slots]))
        except nethost.HostCommandFailed:  # left for the table's removal when the server closes
            log.warning("the rules of closed desktop networks were not removed", exc_info=True)
        self._closing += slots
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="sandbox-network-sweep")

    async def close(self) -> None:
        """Stop making slots, cut every slot off and wait until every link is gone (the table stays: while it is
        there the block is this server's, so no server starting meanwhile makes links of the same names)."""
        self._open = False
        self._wanted.set()
        if self._refill is not None:  # a slot being made finishes, so that it is removed with the rest
            await asyncio.wait([self._refill], timeout=nethost.COMMAND_TIMEOUT_S)
            self._refill.cancel()  # still backing off after failures
        if self._sweeper is not None:
            self._sweeper.cancel()
        slots = list(self._slots.values())
        self._slots.clear()
        self._ready.clear()
        await asyncio.to_thread(_cut, slots)
        await _links_gone([s.link for s in slots])

    async def _new(self) -> Slot:
        if not self._free:
            raise RuntimeError(f"all {self.block.num_addresses // 2} desktop networks of {self.block} are in use")
        self._serial += 1
        number, index = self._serial, self._free.popleft()
        base = int(self.block.network_address) + 2 * index
        host, desktop = IPv4Address(base), IPv4Address(base + 1)
        slot = Slot(number, self.names.link(number), self.names.netns(number), index, host, desktop)
        self._slots[number] = slot
        try:
            await nethost.nft(nftscript.slot_script(self.names.table, number, slot.link, str(desktop), self.log_group))
            host_mac, desktop_mac = link_addresses(self.names.block, index)
            await nethost.ip_batch([f"netns add {slot.netns}",
                                    f"link add {slot.link} address {host_mac} type veth peer name eth0 "
                                    f"address {desktop_mac} netns {slot.netns}",
                                    f"link set {slot.link} up", f"route add local {host} dev {slot.link} table local",
                                    f"route add {desktop} dev {slot.link} src {host}",
                                    f"neigh replace {desktop} lladdr {desktop_mac} dev {slot.link} nud permanent"])
            nethost.write_sysctl(f"net/ipv6/conf/{slot.link}/disable_ipv6", "1")
            await nethost.ip_batch(["link set lo up", f"addr add {desktop}/31 dev eth0", "link set eth0 up",
                                    f"neigh replace {host} lladdr {host_mac} dev eth0 nud permanent",
                                    f"route add default via {host}"], netns=slot.netns)
            await nethost.in_namespace(slot.netns_path, lambda: nethost.write_sysctl(
                "net/ipv6/conf/eth0/disable_ipv6", "1"))
        except BaseException:
            await self.drop([slot])
            raise
        return slot

    async def _fill(self) -> None:
        failures = 0
        while self._open:
            self._wanted.clear()
            while self._open and len(self._ready) < self.size and self._free:
                try:
                    self._ready.append(await self._new())
                    failures = 0
                except (nethost.HostCommandFailed, OSError, RuntimeError):
                    failures += 1  # take() makes its own slots meanwhile, and says what fails
                    log.warning("a pooled desktop network failed (%d in a row)", failures, exc_info=True)
                    await asyncio.sleep(min(30.0, 0.5 * 2 ** failures))
            await self._wanted.wait()

    async def _sweep(self) -> None:
        while self._closing and self._open:
            slots, self._closing = self._closing, []
            await _links_gone([s.link for s in slots])
            for s in slots:
                self._slots.pop(s.number, None)
                self._free.append(s.index)


def link_addresses(block: int, index: int) -> tuple[str, str]:
    """The MAC addresses of a slot's two ends (host, desktop): locally administered, unique per server block and
    slot. Each end knows the other's (a permanent neighbour entry), so no ARP crosses the pair: a host whose
    `arp_ignore` is 1 or 2 (kube-proxy's IPVS mode sets 1, and a pod's namespace inherits it) answers ARP only for
    addresses on the asking link, and the gateway is none."""
    stem = f"02:{block >> 8 & 0xFF:02x}:{block & 0xFF:02x}:{index:02x}:00"  # a block has 256 slots: one byte
    return f"{stem}:00", f"{stem}:01"


def _cut(slots: Sequence[Slot]) -> None:
    """Links down and namespaces unnamed, in-process (no `ip` run): a closing desktop is cut off at once."""
    for slot in slots:
        nethost.link_down(slot.link)
        nethost.unname_namespace(slot.netns)


async def _links_gone(links: list[str]) -> None:
    """Wait until the kernel has destroyed `links` (it does when their namespace goes); delete those that a
    process still holding a namespace keeps alive."""
    deadline = time.monotonic() + LINK_GONE_TIMEOUT_S
    while (left := [link for link in links if os.path.exists(f"/sys/class/net/{link}")]) and \
            time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if left:
        await nethost.ip_batch([f"link del {link}" for link in left], force=True)
