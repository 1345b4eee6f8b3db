"""`forwardHostPorts`: a port of the host's loopback, reachable as the same port on a desktop's loopback.

A desktop's namespace has a loopback of its own, so its 127.0.0.1:P is not the host's. For each forwarded
port the server listens on 127.0.0.1:P *inside* the desktop's namespace (the socket is created by a thread
that has joined the namespace, nethost.in_namespace; a socket stays in the namespace it was created in) and
serves it on the event loop: each connection is relayed to the host's 127.0.0.1:P, opened from the server's
own namespace. Nothing is routed and no firewall rule is involved, so the host's loopback stays out of reach
for everything else (docs/sandbox-network.md, "Forwarded host ports").
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import socket
from collections.abc import Callable, Iterable

from desktop.core.errors import invalid_action
from desktop.sandbox.nethost import in_namespace

MAX_CONNECTIONS = 256
"""Relayed connections open at once per desktop; more are closed as they arrive."""
CHUNK = 1 << 16


class PortForwarder:
    """The listeners of one desktop's forwarded host ports, and the connections they relay."""

    def __init__(self, netns_path: str, on_connection: Callable[[int], None] | None = None) -> None:
        self.netns_path = netns_path
        self._on_connection = on_connection
        """Told the port of each connection accepted, for the desktop's log."""
        self._servers: dict[int, asyncio.Server] = {}
        self._relays: set[asyncio.Task[None]] = set()

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(self._servers)

    async def set_ports(self, ports: Iterable[int], field: str = "network.forwardHostPorts") -> None:
        """Listen on exactly `ports` from now on; a port already taken inside the desktop is the caller's
        mistake (`invalid_action` naming its entry), and then nothing changes."""
        wanted = list(ports)
        new = [port for port in wanted if port not in self._servers]
        sockets = await in_namespace(self.netns_path, lambda: _listen_all(new, wanted, field)) if new else {}
        for port, sock in sockets.items():
            self._servers[port] = await asyncio.start_server(functools.partial(self._accept, port=port), sock=sock)
        for port in [port for port in self._servers if port not in wanted]:
            server = self._servers.pop(port)
            server.close()

    async def close(self) -> None:
        """Stop listening and cut every relayed connection."""
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        for task in list(self._relays):
            task.cancel()
        if self._relays:
            await asyncio.wait(self._relays, timeout=2.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        task = asyncio.current_task()
        if task is None or len(self._relays) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._relays.add(task)
        if self._on_connection is not None:
            self._on_connection(port)
        try:
            await self._relay(reader, writer, port)
        finally:
            self._relays.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        try:
            host_reader, host_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()  # nothing listens on the host's port: the desktop's client sees the close
            return
        try:
            await asyncio.gather(_pipe(reader, host_writer), _pipe(host_reader, writer))
        finally:
            for w in (writer, host_writer):
                w.close()


Namespace = Callable[[], str | None]
"""Where a desktop's loopback is now: the path of its network namespace, or None where it shares the host's; raises
OSError where the server cannot reach it (a desktop not running, or a namespace it may not join)."""


class InboundPort:
    """The reverse of a forwarded host port: a port of the server's own address (picked free), each connection to
    which is relayed to 127.0.0.1:`port` inside the desktop's network namespace, by a socket made there
    (nethost.in_namespace) and used on the event loop. For programs outside that want a service a desktop's app
    serves on its own loopback (OSWorld's harness and Chrome's DevTools, docs/osworld.md)."""

    def __init__(self, host: str, port: int, namespace: Namespace) -> None:
        self.host = host
        self.port = port
        """The port inside the desktop."""
        self._namespace = namespace
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    @property
    def outer_port(self) -> int | None:
        """Where it listens, while it does."""
        return self._server.sockets[0].getsockname()[1] if self._server is not None else None

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, self.host, 0)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._relays):
            task.cancel()
        if self._relays:
            await asyncio.wait(self._relays, timeout=2.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or len(self._relays) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._relays.add(task)
        try:
            inner = await self._connect()
        except OSError:
            writer.close()  # nothing listens inside (or the desktop is not running): the client sees the close
            self._relays.discard(task)
            return
        inner_reader, inner_writer = inner
        try:
            await asyncio.gather(_pipe(reader, inner_writer), _pipe(inner_reader, writer))
        finally:
            for w in (writer, inner_writer):
                w.close()
            self._relays.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        path = self._namespace()
        if path is None:
            return await asyncio.open_connection("127.0.0.1", self.port)
        sock = await in_namespace(path, _unconnected)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.port))
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)


def _unconnected() -> socket.socket:
    """A TCP socket of the calling thread's namespace (it stays there), to connect from the event loop."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close travels on: the other side may still answer
    except OSError:
        writer.close()


def _listen_all(ports: list[int], wanted: list[int], field: str) -> dict[int, socket.socket]:
    """Listening sockets on 127.0.0.1 for `ports`, in the calling thread's namespace; all or none."""
    made: dict[int, socket.socket] = {}
    try:
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            made[port] = sock
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    raise
                name = f"{field}[{wanted.index(port)}]"
                raise invalid_action(f"{name}: port {port} is already in use inside the desktop", name) from None
            sock.listen(128)
            sock.setblocking(False)
    except BaseException:
        for sock in made.values():
            with contextlib.suppress(OSError):
                sock.close()
        raise
    return made
