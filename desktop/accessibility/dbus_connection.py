"""dbus-fast's asyncio connection as this project opens it (`connect`): a writer that sends many calls in one
write and waits on a full socket instead of dying, and descriptors let go of once.

dbus-fast 5.2 writes every message with its own `send()` as soon as it is queued: a tree of a few
hundred objects is a few hundred syscalls, each waking the bus daemon (measured ~80 us apiece on 2
cores, most of a tree's time). And when the socket's buffer is full, `send()` raises EAGAIN, which
its writer takes for a broken connection and closes the bus. This writer queues what is sent during
one turn of the event loop and writes it in as few `send()` calls as the socket takes, registering
for writability when the socket is full.

It replaces a private attribute (`MessageBus._writer`) and reuses the private `_MessageWriter`, so
it installs only on the dbus-fast versions it was written and tested against; on any other version
the connection keeps the library's own writer (slower, and the callers' cap on calls in flight keeps
the socket from filling).

`connect_socket` speaks over a socket connected elsewhere (an app's own accessibility socket, connected inside
its desktop's sandbox: peer_socket.py). It hands the socket to dbus-fast's `connect` through the private
`_create_socket_for_transport`, so it too works only on the versions above, and answers None on others.

A connection that has ended (an app quit, and its direct connection with it) is closed, and the loop's reader of
its descriptor taken off, once (`_finalize_once`, installed before any connection is made: `install_fixes`): the
library took it off again later, from whatever file had the number by then. A message sent on an ended
connection fails at once, its reply too, and is written nowhere (this writer's `_refuse`).
"""

from __future__ import annotations

import array
import asyncio
import importlib.metadata
import logging
import os
import socket
from typing import Any

from dbus_fast.aio import MessageBus
from dbus_fast.aio.message_bus import _MessageWriter
from dbus_fast.auth import AuthExternal

logger = logging.getLogger("sandbox_desktop.accessibility")

PATCHED_VERSIONS = frozenset({"5.2.0"})
MAX_WRITE = 256 * 1024
"""Bytes joined into one write: a few hundred calls; more only delays the first replies."""


class BatchingWriter(_MessageWriter):
    """Messages queued in one loop turn go out together; futures complete once their bytes are sent."""

    def __init__(self, bus: MessageBus) -> None:
        super().__init__(bus)
        self._flush_scheduled = False
        self._sent_futures: list[asyncio.Future[Any] | None] = []

    def schedule_write(self, msg: Any = None, future: asyncio.Future[Any] | None = None) -> None:
        if self.bus._disconnected:  # the socket is closed, its number maybe another file's: fail, write nothing
            _refuse(self.bus, msg, future)
            return
        if msg is not None:
            self.buffer_message(msg, future)
        if not self._flush_scheduled and self.buf is None:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.bus._disconnected:  # ended since the flush was scheduled: what was queued fails
            self._refuse_queued()
            return
        self.write_callback(remove_writer=False)

    def _refuse_queued(self) -> None:
        for future in self._sent_futures:
            _refuse(self.bus, None, future)
        self._sent_futures = []
        while self.messages:
            _message, _fds, future = self.messages.popleft()
            _refuse(self.bus, None, future)
        self.buf = None

    def write_callback(self, remove_writer: bool = True) -> None:
        sock, fd = self.sock, self.fd
        assert sock is not None and fd is not None  # set by the connection before any write
        try:
            while True:
                if self.buf is None and not self._take_batch():
                    if remove_writer:
                        self.loop.remove_writer(fd)
                    return
                assert self.buf is not None
                try:
                    if self.unix_fds:
                        ancdata = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self.unix_fds))]
                        self.offset += sock.sendmsg([self.buf[self.offset:]], ancdata)
                        self.unix_fds = None
                    else:
                        self.offset += sock.send(self.buf[self.offset:])
                except BlockingIOError:
                    pass  # the socket is full
                if self.offset < len(self.buf):
                    self.loop.add_writer(fd, self.write_callback)  # the rest when the socket drains
                    return
                self.buf = None
                for future in self._sent_futures:
                    if future is not None and not future.done():
                        future.set_result(None)
                self._sent_futures = []
        except Exception as exc:  # as the library's writer: the connection is gone
            for future in self._sent_futures:
                if future is not None and not future.done():
                    if self.bus._user_disconnect:
                        future.set_result(None)
                    else:
                        future.set_exception(exc)
            self._sent_futures = []
            self.bus._finalize(exc)

    def _take_batch(self) -> bool:
        """Join queued messages into one buffer (a message carrying file descriptors goes alone)."""
        if not self.messages:
            return False
        parts: list[bytes | bytearray] = []
        size = 0
        while self.messages and size < MAX_WRITE:
            buf, unix_fds, future = self.messages[0]
            if unix_fds and parts:
                break
            self.messages.popleft()
            parts.append(buf)
            size += len(buf)
            self._sent_futures.append(future)
            if unix_fds:
                self.unix_fds = unix_fds
                break
        self.buf = memoryview(b"".join(parts))
        self.offset = 0
        return True


def _refuse(bus: MessageBus, message: Any, future: asyncio.Future[Any] | None) -> None:
    """A send on an ended connection: its future fails (succeeds after our own disconnect, as the library's writer
    has it), and so does the reply it waits for, which would otherwise never come."""
    error = ConnectionError("the D-Bus connection has ended")
    if future is not None and not future.done():
        if bus._user_disconnect:
            future.set_result(None)
        else:
            future.set_exception(error)
    handler = bus._method_return_handlers.pop(message.serial, None) if message is not None else None
    if handler is not None:
        handler(None, error)


def _finalize_once(self: MessageBus, err: Exception | None = None) -> None:
    """dbus-fast 5.2's asyncio connection takes the loop's reader off its descriptor's number again after the
    socket was closed: `_finalize` does before it looks whether it ran already (a write failing after the peer
    closed runs it twice), and `connect` does when it fails, one loop turn after the socket closed (a peer that
    closes during its Hello: a GTK app's accessibility socket does, every time). By then the number may be
    another file's, whose reader it takes off: a call into a desktop's sandbox then never saw its answer. So it
    runs once, and afterwards the connection names a descriptor the loop never watches."""
    if self._disconnected:
        return
    try:
        _FINALIZE(self, err)
    finally:
        self._fd = _never_watched()


_FINALIZE = MessageBus._finalize
_placeholder: list[int] = []


def _never_watched() -> int:
    """A descriptor of this process that no loop ever watches (/dev/null, opened once)."""
    if not _placeholder:
        _placeholder.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    return _placeholder[0]


def install_fixes() -> bool:
    """`_finalize_once` for every asyncio connection, on the versions it was written against; False elsewhere."""
    version = importlib.metadata.version("dbus-fast")
    if version not in PATCHED_VERSIONS:
        return False
    MessageBus._finalize = _finalize_once  # type: ignore[method-assign]
    return True


async def connect(address: str) -> MessageBus:
    """A connection to the bus at `address`, with the fixes below installed first and the batching writer."""
    install_fixes()
    bus = await MessageBus(bus_address=address).connect()
    install(bus)
    return bus


async def connect_socket(sock: socket.socket, uid: int) -> MessageBus | None:
    """A connection over `sock`, already connected elsewhere (an app's own socket, connected in its desktop's
    sandbox: desktop/accessibility/peer_socket.py), authenticated as `uid`, the uid that connected it. None on a
    dbus-fast other than the one this was written against (its connect creates the socket it connects); `sock`
    is the connection's, closed with it or here."""
    if not install_fixes():
        sock.close()
        return None
    bus = await _AdoptingBus(sock, uid).connect()
    install(bus)
    return bus


class _Connected(socket.socket):
    """A socket connected before dbus-fast's `connect` asks the loop to connect it: that connect has nothing to do."""

    def connect(self, address: Any) -> None:
        del address


class _AdoptingBus(MessageBus):
    """A bus whose transport is a socket it is given (dbus-fast 5.2 makes one in `_create_socket_for_transport`,
    then connects it and authenticates: the rest of its `connect` runs as written)."""

    def __init__(self, sock: socket.socket, uid: int) -> None:
        super().__init__(bus_address="unix:path=/", auth=AuthExternal(uid))
        self._given = _Connected(sock.family, sock.type, fileno=sock.detach())

    def _create_socket_for_transport(  # type: ignore[override]  # a staticmethod there; this one has a socket
            self, transport: str, options: dict[str, str]) -> tuple[socket.socket, Any, str]:
        del transport, options
        return self._given, self._given.makefile("rwb"), ""


def install(bus: MessageBus) -> bool:
    """Give a connected bus the batching writer, on the versions it is known to fit; False otherwise."""
    if not install_fixes():
        logger.info("dbus-fast %s: keeping its own writer (the batching one fits %s)",
                    importlib.metadata.version("dbus-fast"), ", ".join(sorted(PATCHED_VERSIONS)))
        return False
    old = bus._writer
    if old is None or old.messages or old.buf is not None:
        return False  # something is being written: swapping now could reorder it
    bus._writer = BatchingWriter(bus)
    return True
