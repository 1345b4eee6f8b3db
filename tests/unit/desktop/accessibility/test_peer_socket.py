"""An app's own accessibility socket reached from inside its desktop's sandbox (desktop/accessibility/peer_socket.py):
a D-Bus server run as the sandbox's user lets in only that uid, as an app's accessibility bridge does; the server's
own connection is refused, the one made in the sandbox works."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

import pytest
from dbus_fast import AuthError, Message

from desktop.accessibility import dbus_connection, peer_socket
from desktop.accessibility.peer_socket import unix_target
from desktop.accessibility.service import in_sandbox, unix_stream
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.sandbox import Sandbox
from tests.unit.desktop.sandbox.test_sandbox import ENV, scenario

REFUSED = (ConnectionResetError, BrokenPipeError, EOFError, AuthError)
"""How a peer that closes a connection it will not have shows, by when it closes; a socket that is not there
(FileNotFoundError) or not listening (ConnectionRefusedError) is none of these."""


def test_a_dbus_address_gives_its_unix_target() -> None:
    assert unix_target("unix:path=/run/user/1000/at-spi2-AB12/socket") == "/run/user/1000/at-spi2-AB12/socket"
    assert unix_target("unix:abstract=/tmp/dbus-x1,guid=00ff") == b"\0/tmp/dbus-x1"
    assert unix_target("tcp:host=localhost,port=1;unix:path=/a%20b") == "/a b"
    assert unix_target("unix:path=/run/%c3%a9t%c3%a9") == "/run/été"  # escaped bytes, UTF-8 here
    with pytest.raises(ValueError, match="no unix path"):
        unix_target("tcp:host=localhost,port=1")


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes with their own uids need root")
def test_a_socket_that_lets_in_only_the_sandboxes_user_is_reached_from_inside(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        read, write = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:  # a session bus daemon admits its own uid only, as at-spi2's bridge does (`user_check`)
            daemon = await sandbox.spawn(["dbus-daemon", "--session", "--nofork", "--address=unix:path=/tmp/peer.sock",
                                          "--print-address=1"], ENV, "/", {0: null, 1: write, 2: null})
        finally:
            os.close(write)
            os.close(null)
        try:
            address = (await asyncio.wait_for(asyncio.to_thread(os.read, read, 200), 10)).decode().strip()
            assert address.startswith("unix:path=/tmp/peer.sock")
            outside = f"unix:path=/proc/{daemon.pid}/root/tmp/peer.sock"  # the same socket, seen from the host
            with pytest.raises(REFUSED):  # reached, and closed on it: root is not the daemon's uid
                await asyncio.wait_for(dbus_connection.connect(outside), 5)

            bus = await in_sandbox(sandbox)(address)
            assert bus is not None and bus.connected
            try:
                reply = await bus.call(_get_id())
                assert reply is not None and isinstance(reply.body[0], str) and len(reply.body[0]) == 32
            finally:
                bus.disconnect()
            assert await in_sandbox(sandbox)("unix:path=/tmp/no-such.sock") is None  # the daemon's way then
        finally:
            os.close(read)
            daemon.send_signal(signal.SIGKILL)
            await daemon.gone(5)

    scenario(tmp_path, body, preload=(peer_socket.__name__,))


def _get_id() -> Message:
    return Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                   interface="org.freedesktop.DBus", member="GetId")


def test_only_aunix_stream_socket_is_taken_from_the_sandbox() -> None:
    read, write = os.pipe()
    udp = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ours, theirs = socket.socketpair()
    try:
        assert unix_stream(read) is None and os.fstat(read)  # left open: the caller closes what it was given
        assert unix_stream(udp.fileno()) is None and udp.fileno() >= 0
        taken = unix_stream(ours.detach())
        assert taken is not None and taken.type == socket.SOCK_STREAM
        taken.close()
    finally:
        for fd in (read, write):
            os.close(fd)
        udp.close()
        theirs.close()
