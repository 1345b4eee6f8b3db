"""The host side of the desktops' networks: `ip` and `nft` runs, names, the server's claim, leftovers.

Names carry their owner, so several servers on one host never touch each other's (docs/sandbox-network.md,
"Several servers"): a server claims a *block* of the address range under a host-wide lock, and its nftables
table (`inet sdnet_<pid>_<block>`), network namespaces (`sdnet-<pid>-<block>-<slot>`) and links
(`sdn<block>-<slot>`, 15 characters at most as the kernel wants) all name that block. A live server holds a
lock file of its block for its whole life, so a server starting can tell a dead server's leftovers from a
live one's even after its pid was reused, and removes them before it claims a block itself.

`in_namespace` runs a function on a fresh thread that has `setns()`'d into a desktop's namespace: sockets it
creates belong to that namespace (the forwarded ports' listeners) and /proc/sys/net is that namespace's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import os
import re
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import TypeVar

from desktop.sandbox import libnft

T = TypeVar("T")

STATE_DIR = "/run/sandbox-desktop"
"""Where the claim lock and each live server's block lock live (tmpfs: a reboot forgets them with the rest)."""
NETNS_DIR = "/run/netns"
COMMAND_TIMEOUT_S = 20.0
CLONE_NEWNET = 0x40000000
MNT_DETACH = 2
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1

TABLE = re.compile(r"sdnet_(\d+)_(\d+)")
NETNS = re.compile(r"sdnet-(\d+)-(\d+)-(\d+)")
LINK = re.compile(r"sdn(\d+)-(\d+)")
BLOCK_LOCK = re.compile(r"network-block-(\d+)\.lock")

_libc = ctypes.CDLL(None, use_errno=True)


class HostCommandFailed(RuntimeError):
    """`ip` or `nft` refused a script: the command, its exit status and what it printed."""


@dataclass(frozen=True)
class Names:
    """The names of one server's things, all derived from its pid and its block."""

    pid: int
    block: int

    @property
    def table(self) -> str:
        return f"sdnet_{self.pid}_{self.block}"

    def netns(self, slot: int) -> str:
        return f"sdnet-{self.pid}-{self.block}-{slot}"

    def link(self, slot: int) -> str:
        return f"sdn{self.block}-{slot}"

    @property
    def block_lock(self) -> str:
        return os.path.join(STATE_DIR, f"network-block-{self.block}.lock")


async def run(argv: list[str], script: str = "", check: bool = True) -> str:
    """Run `argv` with `script` on its stdin; its stdout, or (`check`) HostCommandFailed with its stderr."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(script.encode()), COMMAND_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise HostCommandFailed(f"{' '.join(argv)} took over {COMMAND_TIMEOUT_S:.0f} s") from None
    if process.returncode and check:
        detail = err.decode(errors="replace").strip() or out.decode(errors="replace").strip()
        raise HostCommandFailed(f"{' '.join(argv)} exited with {process.returncode}: {detail}\n{script}")
    return out.decode(errors="replace")


async def nft(script: str) -> str:
    """Apply one nftables script: one transaction, all of it or nothing; its output (for `list`). In-process
    through libnftables where it loads (libnft.py: no process start), else by running `nft -f -`."""
    library = libnft.shared()
    if library is None:
        return await run(["nft", "-f", "-"], script)
    try:
        return await asyncio.to_thread(library.run, script)
    except libnft.NftError as error:
        raise HostCommandFailed(f"nft: {error}\n{script}") from None


async def ip_batch(lines: Iterable[str], netns: str | None = None, force: bool = False) -> None:
    """Run `ip` commands in one process (`ip -batch -`), in `netns` if given; `force`: best effort, every
    line is tried and none fails the whole (removals of what may already be gone)."""
    text = "".join(line + "\n" for line in lines)
    if text:
        await run(["ip", *(["-n", netns] if netns else []), *(["-force"] if force else []), "-batch", "-"], text,
                  check=not force)


def link_down(name: str) -> None:
    """Take a link of the calling thread's namespace down (SIOCSIFFLAGS), as `ip link set down` does; a link
    that is already gone is fine."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", name.encode(), 0)
        try:
            flags = struct.unpack_from("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", name.encode(), flags & ~IFF_UP))
        except OSError as error:
            if error.errno != errno.ENODEV:
                raise


def unname_namespace(name: str) -> None:
    """Detach and remove /run/netns/<name>, as `ip netns del` does: the namespace lives on only while a
    process or socket still holds it, and the kernel destroys its links when it goes."""
    path = os.path.join(NETNS_DIR, name)
    if _libc.umount2(path.encode(), MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        code = ctypes.get_errno()
        raise OSError(code, f"umount {path}: {os.strerror(code)}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def write_sysctl(path: str, value: str) -> None:
    """Write one /proc/sys file (a key of the calling thread's network namespace for net/*)."""
    with open(os.path.join("/proc/sys", path), "w") as f:
        f.write(value)


def read_sysctl(path: str) -> str:
    with open(os.path.join("/proc/sys", path)) as f:
        return f.read().strip()


def join_namespace(path: str) -> None:
    """Move the calling thread (only it) into the network namespace at `path`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"setns({path}): {os.strerror(code)}")
    finally:
        os.close(fd)


async def in_namespace(path: str, fn: Callable[[], T]) -> T:
    """`fn()` on a new thread that has joined the network namespace at `path`; the thread ends with it, so
    no other work ever runs in the wrong namespace."""
    future: Future[T] = Future()

    def body() -> None:
        try:
            join_namespace(path)
            future.set_result(fn())
        except BaseException as error:  # handed to the awaiting task
            future.set_exception(error)

    threading.Thread(target=body, name="netns", daemon=True).start()
    return await asyncio.wrap_future(future)


def lock_held(path: str) -> bool:
    """Whether some open file (a live server's, this process's included) holds an flock on `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False


def hold_lock(path: str, blocking: bool) -> int | None:
    """An fd holding an exclusive flock on `path` (created if need be); None if busy and not `blocking`."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        if blocking:
            raise
        return None
    return fd


async def live_owners() -> dict[int, Names]:
    """The live servers, by block, read off the nftables tables: a table's owner is alive while its block
    lock is held. The lock alone tells: a server takes it before it makes its table (under the claim lock),
    a reused pid holds none, and the owner's pid means nothing here when it runs in another pid namespace
    (a server in a container sharing the host's network; its namespaces must not be taken for a dead one's)."""
    owners: dict[int, Names] = {}
    for pid, block in await tables():
        names = Names(pid, block)
        if lock_held(names.block_lock):
            owners[block] = names
    return owners


async def tables() -> list[tuple[int, int]]:
    """(pid, block) of every sandbox-desktop network table on the host."""
    found = []
    for line in (await nft("list tables")).splitlines():
        family, _, name = line.removeprefix("table ").partition(" ")
        match = TABLE.fullmatch(name.strip())
        if family == "inet" and match:
            found.append((int(match[1]), int(match[2])))
    return found


async def remove_leftovers(owners: dict[int, Names]) -> list[str]:
    """Remove every table, namespace and link of a block no live server owns; what was removed."""
    live = set(owners.values())
    script = [f"delete table inet sdnet_{pid}_{block}" for pid, block in await tables()
              if Names(pid, block) not in live]
    # /run/netns is the host's even for a server in a network namespace of its own (`ip netns exec`), whose
    # nftables are its own: it sees no other server's table there, so a block's held lock keeps its namespaces.
    namespaces = [name for name in _listdir(NETNS_DIR)
                  if (m := NETNS.fullmatch(name)) and (names := Names(int(m[1]), int(m[2]))) not in live
                  and not lock_held(names.block_lock)]
    links = [name for name in _listdir("/sys/class/net")
             if (m := LINK.fullmatch(name)) and int(m[1]) not in owners]
    if script:
        await nft("\n".join(script) + "\n")
    await ip_batch([*(f"netns del {name}" for name in namespaces), *(f"link del {name}" for name in links)],
                   force=True)
    for name in _listdir(STATE_DIR):
        path = os.path.join(STATE_DIR, name)
        if (m := BLOCK_LOCK.fullmatch(name)) and int(m[1]) not in owners and not lock_held(path):
            os.unlink(path)
    return [*script, *namespaces, *links]


async def forward_blockers(own_table: str) -> list[str]:
    """Other tables' forward chains that drop by default (Docker, ufw and firewalld make one): every table's
    base chain must accept a packet, so theirs drops the desktops' egress unless it accepts their links."""
    try:
        return dropping_forward_chains(await nft("list chains"), own_table)
    except HostCommandFailed as error:  # only a warning's source: never a reason to fail
        return [f"the host's forward chains could not be read: {error}"]


def dropping_forward_chains(listing: str, own_table: str) -> list[str]:
    """What `forward_blockers` says, read off the text of `nft list chains`."""
    found, table, chain = [], "", ""
    for line in listing.splitlines():
        words = line.split()
        if words[:1] == ["table"]:
            table = " ".join(words[1:3])
        elif words[:1] == ["chain"]:
            chain = words[1]
        elif "hook forward" in line and "policy drop" in line and table != f"inet {own_table}":
            found.append(f"the forward chain {chain!r} of table {table!r} drops by default: desktops reach "
                         "nothing beyond the host unless it accepts their links (sdn*) and their replies, e.g. "
                         "`iptables -I DOCKER-USER -i sdn+ -j ACCEPT` and `iptables -I DOCKER-USER -o sdn+ -m "
                         "conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT` (docs/sandbox-network.md)")
    return found


def overlapping_routes(supernet: IPv4Network) -> list[str]:
    """Routes of the host that overlap `supernet` and are not on a link of ours: another network uses it."""
    found = []
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if len(fields) < 8 or LINK.fullmatch(fields[0]):
                continue
            destination = _hex_address(fields[1])
            mask = _hex_address(fields[7])
            network = IPv4Network(f"{destination}/{mask}", strict=False)
            if network.prefixlen and network.overlaps(supernet):
                found.append(f"{network} dev {fields[0]}")
    return found


def _hex_address(text: str) -> str:
    # The kernel prints the address's bytes as one number in the machine's own byte order.
    return socket.inet_ntoa(struct.pack("=I", int(text, 16)))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
