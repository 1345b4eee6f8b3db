"""X cookies: each desktop's X server admits only clients that present its MIT-MAGIC-COOKIE-1.

A desktop's own programs find its cookie in the Xauthority file of its runtime directory; the server's
X clients (screenshots, input, the clipboard, the live view...) in the server's file, which holds the
entries of each desktop it runs and which the server's environment names (`XAUTHORITY`, set at start).
Each display gets a `FamilyWild` entry, which libX11 and xcb match whatever the client's hostname (each
sandbox has its own), and a `FamilyLocal` one for the hostname its clients have, because python-xlib
matches only that. The
server's file may be shared by several servers on one machine (`--xauthority`, the test suite does):
every update is a read-modify-write under an exclusive lock, of this server's displays only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FAMILY_LOCAL = 256
FAMILY_WILD = 0xFFFF
PROTOCOL = b"MIT-MAGIC-COOKIE-1"
COOKIE_BYTES = 16


@dataclass(frozen=True)
class Entry:
    family: int
    address: bytes
    display: bytes
    name: bytes
    data: bytes


def new_cookie() -> bytes:
    return secrets.token_bytes(COOKIE_BYTES)


def entries_for(display_num: int, cookie: bytes, hostname: str) -> list[Entry]:
    """The entries that let a client on `hostname` (or anywhere, for libX11) open the display."""
    number = str(display_num).encode()
    return [Entry(FAMILY_LOCAL, hostname.encode(), number, PROTOCOL, cookie),
            Entry(FAMILY_WILD, b"", number, PROTOCOL, cookie)]


def encode(entries: Iterable[Entry]) -> bytes:
    out = bytearray()
    for e in entries:
        out += struct.pack(">H", e.family)
        for field in (e.address, e.display, e.name, e.data):
            out += struct.pack(">H", len(field)) + field
    return bytes(out)


def decode(data: bytes) -> list[Entry]:
    """The entries of an Xauthority file; a torn tail is dropped."""
    entries, at = [], 0
    try:
        while at < len(data):
            (family,) = struct.unpack_from(">H", data, at)
            at += 2
            fields = []
            for _ in range(4):
                (length,) = struct.unpack_from(">H", data, at)
                fields.append(data[at + 2:at + 2 + length])
                at += 2 + length
            entries.append(Entry(family, *fields))
    except struct.error:
        pass
    return entries


def write_private(path: Path, entries: Iterable[Entry], owner: int | None = None) -> None:
    """Write a file only its owner reads, atomically (blocking)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, encode(entries))
        if owner is not None:
            os.fchown(fd, owner, owner)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def update_shared(path: Path, display_num: int, cookie: bytes | None) -> None:
    """Set (or, with no cookie, remove) the entry of one display in a file other servers may update too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = b""
        with contextlib.suppress(FileNotFoundError):
            current = path.read_bytes()
        number = str(display_num).encode()
        entries = [e for e in decode(current) if e.display != number]
        if cookie is not None:
            entries += entries_for(display_num, cookie, socket.gethostname())
        write_private(path, entries)
    finally:
        os.close(lock)
