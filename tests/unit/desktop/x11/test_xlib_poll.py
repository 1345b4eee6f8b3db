"""python-xlib waiting with poll() (desktop/x11/xlib_poll.py) on a real Xvfb, its connection's descriptor
numbered above FD_SETSIZE (1024), where python-xlib's own select() fails."""

from __future__ import annotations

import os
import resource
import select
import socket
from collections.abc import Iterator

import pytest
import Xlib.protocol.display as xlib_display
from Xlib import X, Xatom
from Xlib.display import Display

from desktop.x11 import xlib_poll
from tests.support.xvfb import free_display

HIGH = 1500


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    with free_display() as name:
        yield name


@pytest.fixture
def high_display(display: str) -> Iterator[Display]:
    """A python-xlib connection whose socket is descriptor HIGH or above."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft <= HIGH + 10:
        if hard != resource.RLIM_INFINITY and hard <= HIGH + 10:
            pytest.skip(f"needs a descriptor limit above {HIGH + 10}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 100, hard))
    d = Display(display)
    sock = d.display.socket
    moved = socket.socket(fileno=os.dup2(sock.fileno(), HIGH + 1, inheritable=False))
    sock.close()
    d.display.socket = moved  # the same connection, now at a number select() refuses
    yield d
    d.close()
    if soft != resource.getrlimit(resource.RLIMIT_NOFILE)[0]:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_without_the_patch_python_xlib_fails_at_a_high_descriptor(high_display: Display,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xlib_display, "select", select)
    with pytest.raises(ValueError, match="out of range"):
        high_display.screen().root.get_geometry()


def test_replies_events_and_flushes_work_at_a_high_descriptor(high_display: Display) -> None:
    assert xlib_poll.install(), "this python-xlib is the pinned one"
    assert high_display.fileno() > 1024
    root = high_display.screen().root
    assert root.get_geometry().width == 640  # a reply: send_and_recv waits for it
    root.change_attributes(event_mask=X.PropertyChangeMask)
    atom = high_display.intern_atom("SANDBOX_DESKTOP_HIGH_FD")
    root.change_property(atom, Xatom.CARDINAL, 32, [1, 2, 3])
    high_display.flush()  # a flush: a zero-timeout wait for the socket to be writable
    high_display.sync()
    # The event arrives on the socket: pending_events reads it with a zero-timeout wait.
    assert high_display.pending_events() >= 1
    event = high_display.next_event()
    assert event.type == X.PropertyNotify and event.atom == atom
    assert root.get_full_property(atom, Xatom.CARDINAL).value.tolist() == [1, 2, 3]
    assert high_display.pending_events() == 0


def test_poll_select_answers_as_select_does() -> None:
    a, b = socket.socketpair()
    try:
        assert xlib_poll.poll_select([a], [a], [], 0) == ([], [a], [])  # nothing to read; room to write
        b.send(b"x")
        assert xlib_poll.poll_select([a], [], [], 1) == ([a], [], [])
        b.close()
        a.recv(1)
        assert xlib_poll.poll_select([a], [], [], 0) == ([a], [], []), "a hang-up reads as readable (recv -> b'')"
        assert a.recv(1) == b""
    finally:
        a.close()
    with pytest.raises(OSError):
        xlib_poll.poll_select([10**6 - 1], [], [], 0)


def test_another_python_xlib_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xlib_display, "select", select)
    monkeypatch.setattr(xlib_poll, "PINNED_XLIB", (0, 99))
    assert not xlib_poll.install()
    assert xlib_display.select is select
