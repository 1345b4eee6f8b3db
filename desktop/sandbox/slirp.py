"""A desktop's network where the server is not root: slirp4netns, and nftables inside its namespace that keep
the host itself out of reach (docs/security.md "Without root").

Without root the server cannot give a desktop a veth link and rules of its own (desktop/sandbox/network.py):
its network namespace, made in its user namespace, has only a loopback. slirp4netns, started by the server
for the desktop's init, joins that namespace (and its user namespace), makes a TAP device there and carries
its TCP and UDP through sockets of the server's own: the desktop reaches what the server reaches, as the
server. `--disable-host-loopback` keeps the host's 127.0.0.1 (and so the server's port) out of reach through
the gateway; the host's other addresses are refused by the rules the init puts in its namespace
(`firewall`), where it holds CAP_NET_ADMIN, and replaced whenever those addresses change (`HostAddresses`).
Its cost: ~14 ms and ~3 MiB of memory per desktop (docs/security.md "Without root").
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import subprocess
from pathlib import Path
from typing import Protocol

logger = logging.getLogger("sandbox_desktop.sandbox")

GATEWAY = "10.0.2.2"
"""slirp4netns's address of the host (its default network, 10.0.2.0/24)."""
RESOLVER = "10.0.2.3"
READY_TIMEOUT_S = 5.0
MTU = 65520


def host_addresses() -> list[str]:
    """The host's own addresses (IPv4 from /proc/net/fib_trie's local routes, IPv6 from /proc/net/if_inet6)."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        last = ""
        for line in Path("/proc/net/fib_trie").read_text().splitlines():
            text = line.strip()
            if text.startswith(("|--", "+--")):
                last = text.split()[1]
            elif text == "/32 host LOCAL" and last:
                found.add(last)
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            word = line.split()[0]
            found.add(str(ipaddress.IPv6Address(int(word, 16))))
    return sorted(found, key=lambda a: (":" in a, a))


def firewall(addresses: list[str]) -> str:
    """The nftables rules of a desktop's namespace: nothing to the host, through the gateway or its addresses. One
    transaction that replaces the table when there is one (the host's addresses changed: `HostAddresses`)."""
    v4 = sorted({GATEWAY, *(a for a in addresses if ":" not in a and not a.startswith("127."))})
    v6 = sorted(a for a in addresses if ":" in a and a != "::1")
    lines = ["table inet sandbox_desktop", "delete table inet sandbox_desktop",  # made if missing, then replaced
             "table inet sandbox_desktop {", "  chain output {",
             "    type filter hook output priority 0; policy accept;", '    oifname "lo" accept',
             f"    ip daddr {{ {', '.join(v4)} }} reject"]
    if v6:
        lines.append(f"    ip6 daddr {{ {', '.join(v6)} }} reject")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


class Refusing(Protocol):
    """A desktop whose rules refuse the host's addresses (desktop/sandbox/sandbox.py `Sandbox`)."""

    refused: list[str]
    """The addresses its rules refuse now."""

    async def refuse_host(self, addresses: list[str]) -> None:
        """Replace its rules with ones refusing `addresses`."""


class HostAddresses:
    """The host's own addresses, followed while any desktop refuses them: when they change (a new interface, a VPN
    coming up), each such desktop's rules are replaced by ones refusing the new set, so an address the host gains
    after a desktop started is out of its reach too, a moment later (SETTLE_S and the rules' transaction: ~50 ms).

    The kernel tells of every address added or removed on a netlink socket (RTMGRP_IPV4_IFADDR and _IPV6_IFADDR,
    open to any user); where that socket cannot be opened, the addresses are read again every POLL_S."""

    def __init__(self) -> None:
        self._followers: set[Refusing] = set()
        self._changed = asyncio.Event()
        self._netlink: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    def follow(self, desktop: Refusing) -> None:
        """Keep `desktop`'s rules up to date; checked at once too (an address may have come since they were made)."""
        self._followers.add(desktop)
        if self._task is None:
            self._netlink = _address_changes()
            if self._netlink is not None:
                asyncio.get_running_loop().add_reader(self._netlink.fileno(), self._readable)
            self._task = asyncio.create_task(self._run(), name="host-addresses")
        self._changed.set()

    async def unfollow(self, desktop: Refusing) -> None:
        self._followers.discard(desktop)
        if not self._followers:
            await self.close()

    async def close(self) -> None:
        if self._netlink is not None:
            asyncio.get_running_loop().remove_reader(self._netlink.fileno())
            self._netlink.close()
            self._netlink = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _readable(self) -> None:
        assert self._netlink is not None
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._netlink.recv(NETLINK_BUFFER):  # what changed does not matter: the set is read again
                pass
        self._changed.set()

    async def _run(self) -> None:
        while True:
            if self._netlink is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), POLL_S)
            else:
                await self._changed.wait()
            await asyncio.sleep(SETTLE_S)  # an interface coming up adds several: one update for all of them
            self._changed.clear()
            addresses = await asyncio.to_thread(host_addresses)
            stale = [desktop for desktop in self._followers if desktop.refused != addresses]
            # All at once: each is a process of its own entering one desktop's namespaces (~10 ms).
            outcomes = await asyncio.gather(*(desktop.refuse_host(addresses) for desktop in stale),
                                            return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, OSError):  # its sandbox is going away, or the rules were refused
                    logger.warning("the host's addresses changed, and a desktop's rules could not follow: %s",
                                   outcome)
                elif isinstance(outcome, Exception):  # a fault of ours: said, and the others still follow
                    logger.error("a desktop's rules could not follow the host's addresses", exc_info=outcome)


NETLINK_GROUPS = 0x10 | 0x100
"""RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR: the kernel's messages of addresses added and removed."""
NETLINK_BUFFER = 1 << 16
SETTLE_S = 0.05
POLL_S = 2.0


def _address_changes() -> socket.socket | None:
    """A non-blocking netlink socket told of every change of the host's addresses; None where it cannot be had."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                             socket.NETLINK_ROUTE)
    except (OSError, AttributeError):
        return None
    try:
        sock.bind((0, NETLINK_GROUPS))
    except OSError:
        sock.close()
        return None
    return sock


class Slirp:
    """One desktop's slirp4netns: started once its init runs, ended when the desktop's sandbox closes."""

    def __init__(self, process: subprocess.Popen[bytes], exit_write: int) -> None:
        self.process = process
        self._exit_write: int | None = exit_write

    @classmethod
    async def start(cls, binary: str, pid: int) -> Slirp:
        """Give the namespace of process `pid` (as the server sees it) a network; returns once it is set up."""
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        exit_r, exit_w = os.pipe2(os.O_CLOEXEC)
        try:
            process = subprocess.Popen(
                [binary, "--configure", f"--mtu={MTU}", "--disable-host-loopback", f"--ready-fd={ready_w}",
                 f"--exit-fd={exit_r}", str(pid), "tap0"],
                pass_fds=(ready_w, exit_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, start_new_session=True)
        except OSError:
            for fd in (ready_r, ready_w, exit_r, exit_w):
                os.close(fd)
            raise
        os.close(ready_w)
        os.close(exit_r)
        slirp = cls(process, exit_w)
        try:
            ready = await asyncio.wait_for(asyncio.to_thread(os.read, ready_r, 1), READY_TIMEOUT_S)
        except TimeoutError:
            ready = b""
        finally:
            os.close(ready_r)
        if ready != b"1":
            await slirp.close()
            error = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
            raise OSError(f"slirp4netns did not start: {error or 'no answer'}")
        return slirp

    async def close(self) -> None:
        if self._exit_write is not None:
            os.close(self._exit_write)  # slirp4netns ends when this closes
            self._exit_write = None
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), 2.0)
        except TimeoutError:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)
        if self.process.stderr is not None:
            self.process.stderr.close()
