"""A key bound for a keysym the layout lacks is typed once the app with the focus has read the new mapping, as the
X server's RECORD extension shows it, not after a fixed pause that a busy app may outlast (desktop/input/settling.py,
desktop/x11/mapping_reads.py). Real Xvfb, real client processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from Xlib.display import Display

from desktop.input import settling
from desktop.input.keymap import Keymap
from tests.support.xvfb import free_display

READER = Path(__file__).resolve().parents[3] / "support" / "mapping_reader.py"
IDEOGRAPHS = [0x4E00 + i for i in range(8)]


@pytest.fixture
def name() -> Iterator[str]:
    with free_display() as display_name:
        yield display_name


@pytest.fixture
def keymap(name: str) -> Iterator[Keymap]:
    """A keymap on its own connection, as a desktop's X thread holds one; its bindings undone after the test."""
    display = Display(name)
    keymap = Keymap(display)
    try:
        yield keymap
    finally:
        keymap.restore_all()
        keymap.close()
        display.close()


@contextlib.contextmanager
def focused_app(name: str, delay: float, log: Path) -> Iterator[None]:
    """tests/support/mapping_reader.py running with the focus: it reads each new mapping `delay` s after hearing
    of it (never, if negative)."""
    app = subprocess.Popen([sys.executable, str(READER), name, str(delay), str(log)], stdout=subprocess.PIPE,
                           text=True)
    try:
        assert app.stdout is not None
        for line in app.stdout:  # python-xlib may print a warning first (no xauthority file)
            if line.strip() == "ready":
                break
        else:
            raise AssertionError(f"the app did not start: {app.wait()}")
        yield
    finally:
        app.kill()
        app.wait()


def settle(keymap: Keymap, keysym: int) -> tuple[float, float]:
    """Bind `keysym` and wait as the keyboard does until it may be typed: (when it was bound, when it settled)."""
    bound = time.monotonic()
    assert keymap.bind([keysym], bound, hold=0.0) == 0.0
    keymap.display.flush()
    for _ in range(10_000):
        wait = keymap.settling([keysym], time.monotonic())
        if wait <= 0:
            return bound, time.monotonic()
        time.sleep(wait)
    raise AssertionError("the binding never settled")


def reads(log: Path) -> list[float]:
    return [float(line) for line in log.read_text().split()] if log.exists() else []


def recording_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "x-mapping-reads")


def test_a_binding_is_typed_once_the_focused_app_has_read_it_and_not_before(name: str, keymap: Keymap,
                                                                            tmp_path: Path) -> None:
    log = tmp_path / "reads"
    with focused_app(name, 0.3, log):  # reads each new mapping 0.3 s after hearing of it: longer than a fixed pause
        for i, keysym in enumerate(IDEOGRAPHS[:3]):
            bound, settled = settle(keymap, keysym)
            read = reads(log)
            assert len(read) == i + 1, "settled before the app read the new mapping"
            assert bound < read[-1] <= settled
            assert settled - bound < settling.READ_WAIT_S, "the read was not seen: the wait ran out"
        assert keymap.settled(IDEOGRAPHS[:3])  # known now without asking the server (the raw jobs' check)


def test_an_app_that_never_reads_is_waited_for_twice_then_given_the_fixed_pause(name: str, keymap: Keymap,
                                                                                 tmp_path: Path) -> None:
    with focused_app(name, -1, tmp_path / "reads"):
        waits = [settled - bound for bound, settled in (settle(keymap, keysym) for keysym in IDEOGRAPHS[:3])]
    assert waits[0] >= settling.READ_WAIT_S and waits[1] >= settling.READ_WAIT_S, waits
    assert settling.MAPPING_SETTLE_S <= waits[2] < settling.READ_WAIT_S, waits


def test_the_recording_runs_only_while_a_binding_exists(name: str, keymap: Keymap, tmp_path: Path) -> None:
    log = tmp_path / "reads"
    with focused_app(name, 0.0, log):
        fds = len(os.listdir("/proc/self/fd"))
        assert recording_threads() == 0
        settle(keymap, IDEOGRAPHS[0])
        assert recording_threads() == 1
        assert len(os.listdir("/proc/self/fd")) == fds + 2  # its control and stream connections
        keymap.restore_all()  # the last binding goes: so does the recording
        keymap.display.flush()
        assert recording_threads() == 0
        assert len(os.listdir("/proc/self/fd")) == fds
        settle(keymap, IDEOGRAPHS[1])  # and starts again with the next
        assert recording_threads() == 1
        assert len(reads(log)) >= 2
        keymap.close()
        assert recording_threads() == 0
