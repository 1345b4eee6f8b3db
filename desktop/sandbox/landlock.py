"""Landlock: what a process and everything it starts may touch of the files, which TCP ports it may use, and
whether it may reach abstract sockets and signal processes outside its own domain (docs/security.md
"Without root").

Landlock needs no privilege: a process restricts itself (and its future children) for good once
`no_new_privs` is set. Rules are allow-lists: a file hierarchy with the rights granted beneath it, a TCP port;
what is handled and not granted is refused with EACCES. What the kernel offers grows by ABI version:

| ABI | kernel | adds |
|---|---|---|
| 1 | 5.13 | files: read, write, execute, make, remove |
| 2 | 5.19 | `refer` (links and renames across folders) |
| 3 | 6.2 | `truncate` |
| 4 | 6.7 | TCP bind and connect, by port (not by address; UDP is not covered) |
| 5 | 6.10 | ioctl on devices |
| 6 | 6.12 | scoping: no abstract Unix socket and no signal to a process outside the domain |

A domain also keeps its processes from ptrace-ing (and so from reading `/proc/<pid>/environ` or `mem` of)
any process outside it, at every ABI. A socket *path* stays connectable whatever the rules: keep cookies on
what listens on one (the X server's, desktop/sandbox/xauth.py).

`Confinement` says what a sandbox gets; `restrict_self` puts it in force in the calling process (the
sandbox's init, before it starts anything: desktop/sandbox/init.py). Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

# <linux/landlock.h>: file system rights, by the ABI that brought them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""What a rule on a file (not a folder) may grant."""
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (1 << 16) - 1
"""Everything: write, make, remove, link and rename, truncate, ioctl on devices."""
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

NET_ABI = 4
SCOPE_ABI = 6


def abi() -> int:
    """The Landlock ABI version the kernel offers; 0 without Landlock (not built, or not enabled at boot)."""
    version = _libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def fs_rights(version: int) -> int:
    """Every file system right the kernel of ABI `version` handles."""
    return next((rights for at, rights in sorted(FS_BY_ABI.items(), reverse=True) if version >= at), 0)


@dataclass(frozen=True)
class Confinement:
    """What a sandbox's processes may touch: paths as the sandbox sees them (inside its mount namespace)."""

    read: tuple[str, ...] = ("/",)
    """Hierarchies its processes may read and execute."""
    write: tuple[str, ...] = ()
    """Hierarchies they may also write, make and remove files in."""
    hidden: tuple[str, ...] = ()
    """Within `read`, what they may not touch at all, unless a `read` or `write` entry lies within (its own HOME
    in the server's state): where no mount namespace hides it. Nothing within `write` can be hidden."""
    tcp: bool = False
    """Refuse every TCP bind and connect (where no network namespace keeps the host's loopback away)."""
    scoped: bool = True
    """No abstract Unix socket and no signal to any process outside the sandbox (ABI 6 and up)."""

    def exposed(self) -> tuple[str, ...]:
        """What of `hidden` these rules cannot hide: what lies within a `write` folder."""
        writable = [os.path.realpath(w) for w in self.write]
        return tuple(h for h in self.hidden if any(_within(os.path.realpath(h), w) for w in writable))


class Unavailable(OSError):
    """The kernel has no Landlock, or lacks what a confinement needs."""


def restrict_self(confinement: Confinement, version: int | None = None) -> None:
    """Put `confinement` in force for this process and all it starts. Needs `no_new_privs` (or CAP_SYS_ADMIN)."""
    version = abi() if version is None else version
    if version < 1:
        raise Unavailable(95, "this kernel has no Landlock")
    if confinement.tcp and version < NET_ABI:
        raise Unavailable(95, f"Landlock ABI {version} cannot restrict TCP (4 is needed: Linux 6.7)")
    handled_fs = fs_rights(version)
    handled_net = BIND_TCP | CONNECT_TCP if confinement.tcp else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if confinement.scoped and version >= SCOPE_ABI else 0
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    size = 24 if version >= SCOPE_ABI else 16 if version >= NET_ABI else 8
    ruleset = _check(_libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.c_char_p(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path, rights in rules(confinement):
            _add_path(ruleset, path, rights & handled_fs)
        _check(_libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def rules(confinement: Confinement) -> Iterator[tuple[str, int]]:
    """Each path and the rights granted beneath it: `read` with what `hidden` holds cut out (the folders on the
    way to a hidden one get no rule of their own: they can be passed, not listed), and `write` whole (a grant
    on a folder cannot leave out what is in it: a hidden path there is not hidden)."""
    hidden = [os.path.realpath(p) for p in confinement.hidden]
    kept = [os.path.realpath(p) for p in (*confinement.read, *confinement.write)]
    for root in confinement.read:
        yield from ((path, READ) for path in _beneath(os.path.realpath(root), hidden, kept))
    for root in confinement.write:
        yield os.path.realpath(root), READ | WRITE


def _beneath(path: str, hidden: list[str], kept: list[str]) -> Iterator[str]:
    """`path`, or the parts of it that hold nothing hidden, or nothing when it is hidden itself."""
    if any(_within(path, h) for h in hidden) and path not in kept:
        return
    if not any(_within(h, path) for h in hidden):
        yield path
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if not entry.is_symlink():  # the target is granted (or not) where it is
                yield from _beneath(entry.path, hidden, kept)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _add_path(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or never there (a /var/tmp the machine lacks): nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        if rights:
            attr = struct.pack("=Qi", rights, fd)
            _check(_libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                 ctypes.c_char_p(attr), ctypes.c_uint32(0)), f"landlock_add_rule {path}")
    finally:
        os.close(fd)


def _check(result: int, what: str) -> int:
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def describe(version: int) -> list[str]:
    """What Landlock of ABI `version` can do, for the start log."""
    if version < 1:
        return []
    parts = ["files"]
    if version >= NET_ABI:
        parts.append("TCP ports")
    if version >= SCOPE_ABI:
        parts.append("abstract sockets and signals (scoped)")
    return parts
