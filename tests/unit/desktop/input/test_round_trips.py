"""A move and a click cost one job and one X round trip while the pointer stays over the same window, and with the
X thread idle the job runs on the event loop (docs/benchmarks.md, "Peers"); a key press costs one round trip while
the keyboard mapping stays as it was read. Counted on a real Xvfb with openbox in the desktop's own configuration and
a managed window under the pointer, by watching every way a job waits for the server (desktop/x11/raw.py's socket
path, on the thread or the loop; python-xlib's own replies)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from Xlib import XK, X
from Xlib.display import Display
from Xlib.protocol import display as xprotocol

from desktop.input import mouse
from desktop.input.keyboard import Keyboard
from desktop.lifecycle.home import prepare_home
from desktop.x11 import on_loop
from desktop.x11 import raw as xraw
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from tests.support.xvfb import free_display

CLIENT = (100, 100)
"""Where the managed window the actions land on (an xterm of 40x10 characters) is put."""


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An Xvfb with openbox as a desktop runs it (desktop/lifecycle/home.py's rc.xml) and one xterm."""
    home = tmp_path_factory.mktemp("home")
    prepare_home(home)
    with free_display() as name:
        env = dict(os.environ, DISPLAY=name)
        wm = subprocess.Popen(["openbox", "--config-file", str(home / ".config" / "openbox" / "rc.xml")], env=env,
                              stderr=subprocess.DEVNULL)
        d = Display(name)
        term = None
        try:
            deadline = time.monotonic() + 30
            while d.screen().root.get_full_property(d.get_atom("_NET_SUPPORTING_WM_CHECK"), 0) is None:
                assert time.monotonic() < deadline, "openbox did not start"
                time.sleep(0.05)
            term = subprocess.Popen(["xterm", "-geometry", "40x10+{}+{}".format(*CLIENT[:2])], env=env,
                                    stderr=subprocess.DEVNULL)
            clients = d.get_atom("_NET_CLIENT_LIST")
            while not (listed := d.screen().root.get_full_property(clients, 0)) or not len(listed.value) or \
                    d.create_resource_object("window", listed.value[0]).get_attributes().map_state != X.IsViewable:
                assert time.monotonic() < deadline, "openbox did not show the xterm"
                time.sleep(0.05)
            yield name
        finally:
            if term is not None:
                term.kill()
                term.wait()
            d.close()
            wm.terminate()
            wm.wait()


class Waits:
    """How often a job waited for the X server, how many jobs ran, and how many of them on the event loop."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.round_trips = self.jobs = self.on_loop = 0
        written, through_queue = xraw.written, xraw._through_queue
        send_and_recv = xprotocol.Display.send_and_recv

        def counted_written(p: Any, requests: Any, answered: Any) -> Any:  # the socket path, thread or loop
            self.round_trips += any(answered)
            return written(p, requests, answered)

        def counted_queue(p: Any, requests: Any, answered: Any) -> Any:
            self.round_trips += any(answered)
            return through_queue(p, requests, answered)

        def xlib_waits(display: Any, *args: Any, **kwargs: Any) -> Any:
            self.round_trips += kwargs.get("request") is not None  # python-xlib waiting for a reply of its own
            return send_and_recv(display, *args, **kwargs)

        monkeypatch.setattr(xraw, "written", counted_written)
        monkeypatch.setattr(xraw, "_through_queue", counted_queue)
        monkeypatch.setattr(xprotocol.Display, "send_and_recv", xlib_waits)
        start = on_loop.start

        def counted_start(*args: Any) -> Any:
            self.on_loop += 1
            return start(*args)
        monkeypatch.setattr(on_loop, "start", counted_start)

    def job(self, x: XThread) -> None:
        """Count the jobs of `x`: raw jobs (on the loop or the thread) and other jobs on the thread."""
        submit, raw = x.submit, x.raw

        def counted_submit(fn: Any, *args: Any) -> Any:
            self.jobs += fn is not xraw.run_job  # a raw job handed to the thread is counted by `raw`
            return submit(fn, *args)

        def counted_raw(job: Any, *args: Any) -> Any:
            self.jobs += 1
            return raw(job, *args)
        x.submit = counted_submit  # type: ignore[method-assign]
        x.raw = counted_raw  # type: ignore[method-assign]


def test_a_move_and_a_click_are_one_job_and_one_round_trip_each(desktop: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    inside = [(CLIENT[0] + 80 + 10 * i, CLIENT[1] + 70) for i in range(2)]
    outside = [(500 + 10 * i, 400) for i in range(2)]

    async def run() -> list[tuple[str, int, int]]:
        x = XThread(desktop, "round-trips")
        try:
            # Warm: the connection opens, atoms are interned and the path to the window under the pointer is found.
            await mouse._click(x, inside[0], 1, 1)
            await mouse._settled(x, await x.raw(mouse._move_job, *outside[0]), outside[0])
            waits = Waits(monkeypatch)
            waits.job(x)
            found = []
            for where, points in (("over the window", inside), ("over the root", outside)):
                for action in ("move", "click"):
                    # Not counted: a look into a window the pointer was not over before descends to its client,
                    # a round trip per level (desktop/input/pointer.py), once.
                    await mouse._settled(x, await x.raw(mouse._move_job, *points[1]), points[1])
                    waits.round_trips = waits.jobs = waits.on_loop = 0
                    for i in range(20):
                        at = points[i % 2]
                        if action == "move":
                            state = await mouse._settled(x, await x.raw(mouse._move_job, *at), at)
                        else:
                            state = await mouse._click(x, at, 1, 1)
                        assert (state.x, state.y) == at
                        assert (state.window is not None) == (points is inside), f"{action} {where}: {state}"
                    found.append((f"{action} {where}", waits.round_trips, waits.jobs, waits.on_loop))
            return found
        finally:
            await x.close()

    for name, round_trips, jobs, looped in asyncio.run(run()):
        assert (round_trips, jobs) == (20, 20), f"{name}: {round_trips} round trips and {jobs} jobs for 20 calls"
        assert looped == 20, f"{name}: {looped} of the 20 jobs ran on the event loop (the X thread was idle)"


def test_a_key_press_is_one_round_trip_on_the_loop_until_another_client_changes_the_mapping(
        desktop: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    press, eacute = [XK.string_to_keysym("Control_L"), XK.string_to_keysym("a")], XK.string_to_keysym("eacute")
    env = dict(os.environ, DISPLAY=desktop)

    async def run() -> list[tuple[str, int, int, int]]:
        x, keyboard = XThread(desktop, "keys"), Keyboard()
        session = Session(desktop, 1280, 800, x, env, str(tmp_path))
        try:
            # Warm: the connection opens and the keymap is read; the first XTest key switches the core keyboard to
            # XTest's device, which the server tells every client with a MappingNotify: the keymap is read again.
            for _ in range(2):
                await keyboard.press_keysyms(session, press)
            waits = Waits(monkeypatch)
            waits.job(x)
            found = []
            for name, action in (("press", lambda: keyboard.press_keysyms(session, press)),
                                 ("down and up", lambda: keyboard.chord_down(session, press))):
                waits.round_trips = waits.jobs = waits.on_loop = 0
                for _ in range(10):
                    await action()
                    if name == "down and up":
                        await keyboard.chord_up(session, press)
                found.append((name, waits.round_trips, waits.jobs, waits.on_loop))
            assert keyboard._keymap is not None
            assert not keyboard._keymap.in_layout(eacute)
            # Another client changes the layout: é gets a key of its own (French AZERTY), which only a keymap read
            # again after the change knows.
            subprocess.run(["setxkbmap", "-layout", "fr"], env=env, check=True, timeout=10)
            waits.round_trips = waits.jobs = waits.on_loop = 0
            await keyboard.press_keysyms(session, press)
            assert keyboard._keymap.in_layout(eacute), "the keymap was not read again after the layout changed"
            found.append(("press after the change", waits.round_trips, waits.jobs, waits.on_loop))
            return found
        finally:
            subprocess.run(["setxkbmap", "-layout", "us"], env=env, check=True, timeout=10)
            await keyboard.close()
            await x.close()

    found = asyncio.run(run())
    assert found == [("press", 10, 10, 10), ("down and up", 20, 20, 20),
                     # declined on the loop (a change told of), then the thread's step: the mapping read, the press
                     ("press after the change", 3, 2, 1)], found
