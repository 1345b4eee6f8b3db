"""desktop/accessibility/dbus_connection.py on a real dbus-daemon: a connection whose peer went away fails what is
sent on it at once, and neither it nor a connection refused during its Hello touches the loop's watch of the file
that took its descriptor's number."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dbus_fast import Message

from desktop.accessibility import dbus_connection
from tests.conftest import run

if TYPE_CHECKING:
    from _typeshed import HasFileno

pytestmark = pytest.mark.skipif(shutil.which("dbus-daemon") is None, reason="needs dbus-daemon")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    address = f"unix:path={tmp_path}/bus"
    proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", f"--address={address}", "--print-address"],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline()  # listening
    yield address, proc
    proc.kill()
    proc.wait()


def get_id() -> Message:
    return Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                   interface="org.freedesktop.DBus", member="GetId")


def test_calls_go_through_the_batching_writer(daemon: tuple[str, subprocess.Popen[bytes]]) -> None:
    async def scenario() -> list[object]:
        bus = await dbus_connection.connect(daemon[0])
        try:
            assert isinstance(bus._writer, dbus_connection.BatchingWriter)
            replies = await asyncio.gather(*(bus.call(get_id()) for _ in range(50)))
            return [reply.body[0] for reply in replies]
        finally:
            bus.disconnect()

    ids = run(scenario)
    assert len(set(ids)) == 1 and len(str(ids[0])) == 32  # the daemon's id, 50 times


def test_a_call_after_the_peer_ended_fails_at_once_and_another_files_watch_stays(
        daemon: tuple[str, subprocess.Popen[bytes]]) -> None:
    address, proc = daemon

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        bus = await dbus_connection.connect(address)
        number = bus._fd
        assert isinstance(number, int)
        proc.kill()
        proc.wait()
        with contextlib.suppress(Exception):  # it ended with an error: not our disconnect
            await asyncio.wait_for(bus.wait_for_disconnect(), 5)
        ours, theirs = socket.socketpair()  # the lowest free numbers: the connection's among them
        try:
            assert number in (ours.fileno(), theirs.fileno())
            other = theirs if ours.fileno() == number else ours
            woke: asyncio.Future[None] = loop.create_future()
            loop.add_reader(number, lambda: None if woke.done() else woke.set_result(None))
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(bus.call(get_id()), 5)  # before the fix: no reply, ever
            await asyncio.sleep(0.05)  # a write the call scheduled would have run by now
            other.send(b"x")
            await asyncio.wait_for(woke, 5)  # still watched
        finally:
            loop.remove_reader(number)
            ours.close()
            theirs.close()

    run(scenario)


async def closing_at_hello(path: Path) -> asyncio.Server:
    """A bus that authenticates a client, then closes when its Hello comes (as a GTK app's accessibility socket)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)  # the credentials byte
        while not (line := await reader.readline()).startswith(b"BEGIN") and line:
            writer.write(b"AGREE_UNIX_FD\r\n" if line.startswith(b"NEGOTIATE") else
                         b"OK 0123456789abcdef0123456789abcdef\r\n")
            await writer.drain()
        await reader.read(16)  # the Hello
        writer.close()
    return await asyncio.start_unix_server(serve, str(path))


def test_a_connection_refused_at_hello_lets_go_of_its_descriptor_once(tmp_path: Path) -> None:
    """The library took the loop's reader off the connection's number a loop turn after it had closed the socket,
    from whatever file had taken the number (a call into a desktop's sandbox waited for its answer for ever)."""
    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        stale: list[int] = []
        remove_reader = loop.remove_reader

        def recording(fd: int | HasFileno) -> bool:
            try:
                os.fstat(fd if isinstance(fd, int) else fd.fileno())
            except OSError:  # closed: the number is free for any file to take
                stale.append(fd if isinstance(fd, int) else fd.fileno())
            return remove_reader(fd)

        loop.remove_reader = recording  # type: ignore[method-assign]  # its own, on this loop only
        server = await closing_at_hello(tmp_path / "bus")
        try:
            for _ in range(3):
                with pytest.raises(Exception):  # noqa: B017 - the library's EOFError, or its wrapping
                    await asyncio.wait_for(dbus_connection.connect(f"unix:path={tmp_path}/bus"), 5)
                await asyncio.sleep(0.01)
        finally:
            server.close()
            loop.remove_reader = remove_reader  # type: ignore[method-assign]
        return stale

    assert run(scenario) == []
