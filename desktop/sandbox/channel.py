"""The server's end of a socket to the zygote or to a sandbox's init, on the event loop.

Requests carry an id and are answered by id; what comes unasked (the init's `Started` and `Ready`, a
setup `Failed` with id -1) waits in order for `expect()`; `Exited` goes to the exit listener. When the
other end closes, every waiting request fails with `SandboxGone` and the close listener runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable

from desktop.core.errors import DesktopFailed
from desktop.sandbox import protocol


class SandboxGone(DesktopFailed):
    """The sandbox's init (or the zygote) is not there any more: the desktop is being deleted, or it crashed."""


Received = tuple[protocol.Message, list[int]]


class Channel:
    def __init__(self, sock: socket.socket, on_exit: Callable[[protocol.Exited], None] | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[Received]] = {}
        self._unasked: deque[Received] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._on_exit = on_exit
        self._on_close = on_close
        self.closed = False
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._readable)

    def next_id(self) -> int:
        return next(self._ids)

    async def request(self, message: protocol.Message, fds: tuple[int, ...] | list[int] = ()) -> Received:
        """Send `message` (whose `id` came from `next_id`) and wait for the reply of the same id."""
        request_id: int = getattr(message, "id")  # noqa: B009  (every request class has one)
        reply: asyncio.Future[Received] = self._loop.create_future()
        self._replies[request_id] = reply
        try:
            await self.send(message, fds)
            return await reply
        except BaseException:
            if reply.done() and not reply.cancelled() and reply.exception() is None:
                for fd in reply.result()[1]:  # answered after all, but nobody will take its descriptors
                    os.close(fd)
            raise
        finally:
            self._replies.pop(request_id, None)

    async def send(self, message: protocol.Message, fds: tuple[int, ...] | list[int] = ()) -> None:
        if self.closed:
            raise SandboxGone("the sandbox is gone")
        data = protocol.encode(message)
        while True:
            try:
                socket.send_fds(self._sock, [data], list(fds))
                return
            except BlockingIOError:
                writable: asyncio.Future[None] = self._loop.create_future()
                self._loop.add_writer(self._sock.fileno(), _settle, writable)
                try:
                    await writable
                finally:
                    self._loop.remove_writer(self._sock.fileno())
            except (BrokenPipeError, ConnectionResetError) as exc:
                self._lost()
                raise SandboxGone("the sandbox is gone") from exc

    async def expect(self) -> Received:
        """The next message nobody asked for."""
        while not self._unasked:
            if self.closed:
                raise SandboxGone("the sandbox ended before it was ready")
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._unasked.popleft()

    def _readable(self) -> None:
        while not self.closed:
            try:
                data, fds, _flags, _address = socket.recv_fds(self._sock, protocol.MAX_MESSAGE_BYTES, protocol.MAX_FDS)
            except BlockingIOError:
                return
            except OSError:
                self._lost()
                return
            if not data:
                for fd in fds:
                    os.close(fd)
                self._lost()
                return
            self._dispatch(protocol.decode(data), fds)

    def _dispatch(self, message: protocol.Message, fds: list[int]) -> None:
        if isinstance(message, protocol.Exited):
            if self._on_exit is not None:
                self._on_exit(message)
            return
        request_id = getattr(message, "id", -1)
        reply = self._replies.get(request_id) if request_id != -1 else None
        if reply is not None and not reply.done():
            reply.set_result((message, fds))
            return
        if request_id != -1 and reply is None:
            for fd in fds:  # the request was given up (cancelled): nobody takes these
                os.close(fd)
            return
        self._unasked.append((message, fds))
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _lost(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self._sock.fileno())
        for reply in self._replies.values():
            if not reply.done():
                reply.set_exception(SandboxGone("the sandbox ended"))
        self._wake()
        if self._on_close is not None:
            self._on_close()

    def close(self) -> None:
        """Close our end: the init kills everything in its sandbox and exits."""
        self._lost()
        self._sock.close()
        for _message, fds in self._unasked:
            for fd in fds:
                os.close(fd)
        self._unasked.clear()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def one_answer(send: Callable[[int], Awaitable[None]]) -> Received:
    """A request answered on a socket of its own (a call, desktop/sandbox/call.py):
    `send(fd)` hands the other end on with the request. The one message that comes back, and its descriptors;
    SandboxGone if every holder of the other end closed it without answering."""
    ours, theirs = protocol.socket_pair()
    try:
        try:
            await send(theirs.fileno())
        finally:
            theirs.close()
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, fds, _flags, _address = socket.recv_fds(ours, protocol.MAX_MESSAGE_BYTES, protocol.MAX_FDS)
                break
            except BlockingIOError:
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(ours.fileno(), _settle, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(ours.fileno())
            except OSError as exc:
                raise SandboxGone("the request in the desktop's sandbox ended without an answer") from exc
        if not data:
            for fd in fds:
                os.close(fd)
            raise SandboxGone("the request in the desktop's sandbox ended without an answer")
        return protocol.decode(data), fds
    finally:
        ours.close()
