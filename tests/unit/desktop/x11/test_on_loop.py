"""Raw jobs on the event loop (desktop/x11/on_loop.py) over an idle X thread's connection, against a real Xvfb:
the same answers as on the thread, a stopped X server holding the job but never the loop, a busy thread keeping
the job, a lost connection retried on a new one, events read on the way left for python-xlib."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest
from Xlib import X, Xatom
from Xlib.display import Display

from desktop.x11 import raw as xraw
from desktop.x11.thread import XThread
from tests.support.xvfb import free_xvfb


@pytest.fixture(scope="module")
def xvfb() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with free_xvfb() as server:
        yield server


def move_and_look(d: Display, x: int, y: int) -> xraw.RawJob[tuple[str, int, int]]:
    """A motion and a look at the pointer in one exchange; which thread ran it, and where the pointer is."""
    ran_on = threading.current_thread().name
    pointer, = yield xraw.Exchange([xraw.fake_input(d, X.MotionNotify, x=x, y=y),
                                    xraw.query_pointer(d.screen().root.id)], [False, True])
    assert isinstance(pointer, bytes)
    _child, px, py = xraw.pointer_reply(pointer)
    return ran_on, px, py


def root_pointer(d: Display) -> tuple[int, int]:
    reply = d.screen().root.query_pointer()
    return reply.root_x, reply.root_y


def on_a_warm_thread(display: str, name: str, body: Callable[[XThread], Awaitable[None]]) -> None:
    """`body(x)` on an event loop of its own, with an X thread whose connection a job on the thread opened (until
    then there is nothing to borrow); the thread closed afterwards."""
    async def run() -> None:
        x = XThread(display, name)
        try:
            await x.call(root_pointer)
            await body(x)
        finally:
            await x.close()
    asyncio.run(run())


def test_a_job_runs_on_the_loop_while_the_thread_is_idle_with_the_same_answers(xvfb: tuple[str, object]) -> None:
    async def body(x: XThread) -> None:
        for point in ((10, 20), (600, 400), (321, 123)):
            assert await x.raw(move_and_look, *point) == (threading.current_thread().name, *point)
            assert await x.call(root_pointer) == point, "python-xlib's own requests still line up afterwards"
        on_thread = await x.submit(xraw.run_job, move_and_look, 50, 60)
        assert on_thread == (f"x-{x.name}", 50, 60), "the same job, run on the thread, answers the same"
    on_a_warm_thread(xvfb[0], "on-loop", body)


def test_a_stopped_x_server_holds_the_job_and_the_thread_but_never_the_loop(
        xvfb: tuple[str, subprocess.Popen[bytes]]) -> None:
    name, server = xvfb

    async def body(x: XThread) -> None:
        os.kill(server.pid, signal.SIGSTOP)
        try:
            job = x.raw(move_and_look, 70, 80)
            await asyncio.sleep(0.1)  # the loop runs on while the job waits for its reply
            assert not job.done()
            queued = x.call(root_pointer)  # the thread's next job waits for the loan to end
            behind = asyncio.ensure_future(queued)
            await asyncio.sleep(0.1)
            assert not behind.done()
            job.cancel()  # its caller went away: the job still reads its replies to the end
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert await asyncio.wait_for(behind, 10) == (70, 80)
        assert (await x.raw(move_and_look, 90, 100))[1:] == (90, 100), "the connection is still in step"
    on_a_warm_thread(name, "stopped", body)


def test_a_job_started_while_the_thread_is_busy_runs_on_the_thread_after_it(xvfb: tuple[str, object]) -> None:
    async def body(x: XThread) -> None:
        release = threading.Event()
        order: list[str] = []

        def blocking(d: Display) -> None:
            release.wait(10)
            order.append("first")

        first = x.submit(blocking)
        second = x.raw(move_and_look, 11, 12)
        await asyncio.sleep(0.05)
        assert not second.done()
        release.set()
        await first
        order.append("second")
        assert await second == (f"x-{x.name}", 11, 12)
        assert order == ["first", "second"]
    on_a_warm_thread(xvfb[0], "busy", body)


def test_a_connection_lost_under_a_job_on_the_loop_is_retried_on_a_new_one(xvfb: tuple[str, object]) -> None:
    async def body(x: XThread) -> None:
        lent = x._display
        assert lent is not None
        lent.display.socket.shutdown(socket.SHUT_RDWR)
        assert await x.raw(move_and_look, 33, 44) == (f"x-{x.name}", 33, 44)
        assert x._display is not lent, "the thread opened a new connection"
        assert (await x.raw(move_and_look, 55, 66))[0] == threading.current_thread().name, \
            "and lends the new one"
    on_a_warm_thread(xvfb[0], "lost", body)


def test_events_read_by_a_job_on_the_loop_reach_python_xlib_in_order(xvfb: tuple[str, object]) -> None:
    name = xvfb[0]

    def watch(d: Display) -> None:
        d.screen().root.change_attributes(event_mask=X.PropertyChangeMask)
        d.sync()

    def seen(d: Display) -> list[int]:
        d.sync()
        atoms = []
        while d.pending_events():
            event = d.next_event()
            if event.type == X.PropertyNotify:
                atoms.append(event.atom)
        d.screen().root.change_attributes(event_mask=0)
        return atoms

    def round_trip(d: Display) -> xraw.RawJob[None]:
        yield xraw.Exchange([xraw.round_trip()], [True])

    async def body(x: XThread) -> None:
        await x.call(watch)
        other = Display(name)
        names = [other.intern_atom(f"SANDBOX_DESKTOP_ON_LOOP_{i}") for i in range(3)]
        for atom in names:
            other.screen().root.change_property(atom, Xatom.CARDINAL, 32, [1])
        other.sync()
        other.close()
        await x.raw(round_trip)  # the three events come before its reply
        assert await x.call(seen) == names
    on_a_warm_thread(name, "events", body)
