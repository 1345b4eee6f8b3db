"""A desktop's network where the server is not root: slirp4netns, and nftables inside its namespace that keep
the host itself out of reach (docs/security.md "Without root").

Without root the server cannot give a desktop a veth link and rules of its own (desktop/sandbox/network.py):
its network namespace, made in its user namespace, has only a loopback. slirp4netns, started by the server
for the desktop's init, joins that namespace (and its user namespace), makes a TAP device there and carries
its TCP and UDP through sockets of the server's own: the desktop reaches what the server reaches, as the
server. `--disable-host-loopback` keeps the host's 127.0.0.1 (and so the server's port) out of reach through
the gateway; the host's other addresses are refused by the rules the init puts in its namespace
(`firewall`), where it holds CAP_NET_ADMIN. Its cost: ~14 ms and ~3 MiB of memory per desktop
(docs/security.md "Without root").
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import subprocess
from pathlib import Path

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
    """The nftables rules of a desktop's namespace: nothing to the host, through the gateway or its addresses."""
    v4 = sorted({GATEWAY, *(a for a in addresses if ":" not in a and not a.startswith("127."))})
    v6 = sorted(a for a in addresses if ":" in a and a != "::1")
    lines = ["table inet sandbox_desktop {", "  chain output {",
             "    type filter hook output priority 0; policy accept;", '    oifname "lo" accept',
             f"    ip daddr {{ {', '.join(v4)} }} reject"]
    if v6:
        lines.append(f"    ip6 daddr {{ {', '.join(v6)} }} reject")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


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
