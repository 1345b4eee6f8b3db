"""Desktops' networks come and go without changing the host's addresses (docs/sandbox-network.md, "How it is
built"): a browser on the server's machine fails the requests it is connecting whenever an address is added or
removed (Chromium: ERR_NETWORK_CHANGED, to every site), so a desktop made or closed must not be one; and the
live view binds a socket on every address of the host for each viewer, so a desktop's gateway must not be one.

The test listens to the kernel's own announcements (rtnetlink's link and address groups) while a hub makes and
closes desktops' networks, and counts the address changes on the hub's links or in its block. Other tests may
change the host's addresses meanwhile; theirs are on other links and ranges. Needs root, `ip` and `nft`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_address
from pathlib import Path

import pytest

from desktop.sandbox.network import NetworkHub, NetworkRules
from streaming.coturn import host_addresses
from tests.support.netns import missing_tools, probe

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=missing_tools() or "")

RTMGRP_LINK, RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR = 0x1, 0x10, 0x100
RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR = 16, 17, 20, 21
IFLA_IFNAME, IFA_ADDRESS, IFA_LOCAL = 3, 1, 2
SO_RCVBUFFORCE = 33  # not in Python's socket module


@dataclass
class Announcements:
    """What rtnetlink announced: each link's name by index, and each address change (kind, index, address)."""

    links: dict[int, str] = field(default_factory=dict)
    addresses: list[tuple[str, int, str]] = field(default_factory=list)


def attributes(data: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            return
        yield kind & 0x3FFF, data[offset + 4:offset + length]
        offset += (length + 3) & ~3


def read_announcements(sock: socket.socket, into: Announcements) -> None:
    """Every message queued on `sock` (non-blocking), parsed into `into`."""
    while True:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as error:  # the queue overflowed: what was lost cannot be vouched for
            raise AssertionError(f"rtnetlink announcements were lost ({error})") from None
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            body = data[offset + 16:offset + length]
            if kind in (RTM_NEWLINK, RTM_DELLINK):
                index = struct.unpack_from("=i", body, 4)[0]
                for attr, value in attributes(body, 16):
                    if attr == IFLA_IFNAME:
                        into.links[index] = value.rstrip(b"\0").decode()
            elif kind in (RTM_NEWADDR, RTM_DELADDR):
                family, index = body[0], struct.unpack_from("=I", body, 4)[0]
                found = {attr: value for attr, value in attributes(body, 8) if attr in (IFA_ADDRESS, IFA_LOCAL)}
                raw = found.get(IFA_LOCAL) or found.get(IFA_ADDRESS) or b""
                text = str(ip_address(raw)) if family in (socket.AF_INET, socket.AF_INET6) and raw else "?"
                into.addresses.append(("added" if kind == RTM_NEWADDR else "removed", index, text))
            offset += (length + 3) & ~3


@contextlib.contextmanager
def listening() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    with contextlib.closing(sock):
        # Beyond rmem_max (root may): every link of the machine is announced meanwhile, other tests' included.
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
        sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR))
        sock.setblocking(False)
        yield sock


def test_making_and_closing_desktops_networks_changes_no_address_of_the_host() -> None:
    seen = Announcements()

    async def scenario() -> tuple[NetworkHub, list[str], list[str]]:
        hub = await NetworkHub.open([], pool_size=1)
        try:
            # More desktops than the pool holds: slots made on demand as well as pooled ones, then all closed.
            networks = await asyncio.gather(*(hub.create(f"addr{i}", NetworkRules()) for i in range(3)))
            # The gateway still answers as the host does, and the rules refuse what is sent to it; also where the
            # host answers ARP only for addresses on the asking link (`arp_ignore`, which kube-proxy sets).
            link = subprocess.run(["ip", "-o", "route", "get", networks[0].address], capture_output=True, text=True,
                                  check=True).stdout.split(" dev ")[1].split()[0]
            Path(f"/proc/sys/net/ipv4/conf/{link}/arp_ignore").write_text("2")
            reached = await asyncio.to_thread(probe, networks[0].netns_path, f"{networks[0].gateway}:9")
            # The addresses the live view binds a UDP socket on and offers to each viewer: none of the gateways.
            candidates = [a for a in host_addresses() if ":" not in a and IPv4Address(a) in hub.block]
            for network in networks:
                await network.close()
        finally:
            await hub.close()
        return hub, reached, candidates

    with listening() as sock:
        hub, reached, candidates = asyncio.run(asyncio.wait_for(scenario(), 60))
        read_announcements(sock, seen)
    ours = {index for index, name in seen.links.items() if name.startswith(f"sdn{hub.names.block}-")}
    assert len(ours) >= 3, f"the hub's links were not seen coming and going: {seen.links}"
    changed = [change for change in seen.addresses
               if change[1] in ours or (change[2] != "?" and ":" not in change[2]
                                        and IPv4Address(change[2]) in hub.block)]
    assert changed == [], f"making and closing desktops changed the host's addresses: {changed}"
    assert reached == ["unreachable"], reached
    assert candidates == [], f"each live view would bind a socket on each desktop's gateway: {candidates}"
    assert not any(name.startswith(f"sdn{hub.names.block}-") for name in os.listdir("/sys/class/net"))
