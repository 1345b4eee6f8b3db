"""Packed X requests (desktop/x11/raw.py) against a real Xvfb: the socket path and python-xlib's queue give the
same answers, errors come back as codes, and events read on the way reach python-xlib in order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from Xlib import X, Xatom
from Xlib.display import Display

from desktop.x11 import raw as xraw
from tests.support.xvfb import free_display


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    with free_display() as name:
        yield name


@pytest.fixture(params=["socket", "queue"])
def conn(request: pytest.FixtureRequest, display: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Display]:
    if request.param == "queue":
        monkeypatch.setattr(xraw, "FAST", False)
    else:
        assert xraw.FAST, "this python-xlib is the pinned one: the socket path is the one that runs"
    d = Display(display)
    yield d
    d.close()


def test_a_motion_then_a_look_answers_where_the_pointer_went(conn: Display) -> None:
    root = conn.screen().root.id
    for x, y in ((10, 20), (600, 400)):
        pointer, = xraw.exchange(conn, [xraw.fake_input(conn, X.MotionNotify, x=x, y=y), xraw.query_pointer(root)],
                                 [False, True])
        assert isinstance(pointer, bytes)
        assert xraw.pointer_reply(pointer) == (0, x, y)
    assert conn.screen().root.query_pointer().root_x == 600, "python-xlib's own requests still line up afterwards"


def test_properties_and_errors_come_back_in_order(conn: Display) -> None:
    root = conn.screen().root
    atom = conn.intern_atom("SANDBOX_DESKTOP_TEST")
    root.change_property(atom, Xatom.CARDINAL, 32, [7, 8, 9])
    conn.sync()
    answers = xraw.exchange(conn, [xraw.get_property(root.id, atom, 2), xraw.query_pointer(0x7FFFFFF),
                                   xraw.get_property(root.id, conn.intern_atom("SANDBOX_DESKTOP_NONE"), 1),
                                   xraw.round_trip()], [True, True, True, True])
    assert xraw.property_reply(answers[0]) == (Xatom.CARDINAL, [7, 8])  # type: ignore[arg-type]
    assert answers[1] == X.BadWindow
    assert xraw.property_reply(answers[2]) == (X.NONE, [])  # type: ignore[arg-type]
    assert isinstance(answers[3], bytes)
    assert root.get_full_property(atom, Xatom.CARDINAL).value.tolist() == [7, 8, 9]


def test_events_read_on_the_way_reach_python_xlib_in_order(conn: Display) -> None:
    root = conn.screen().root
    root.change_attributes(event_mask=X.PropertyChangeMask)
    conn.sync()
    other = Display(conn.get_display_name())
    names = [other.intern_atom(f"SANDBOX_DESKTOP_EVENT_{i}") for i in range(3)]
    for atom in names:
        other.screen().root.change_property(atom, Xatom.CARDINAL, 32, [1])
    other.sync()
    other.close()
    answers = xraw.exchange(conn, [xraw.round_trip()], [True])  # the three events come before this reply
    assert isinstance(answers[0], bytes)
    conn.sync()  # python-xlib reads on: what xraw read ahead is parsed first
    seen = []
    while conn.pending_events():
        event = conn.next_event()
        if event.type == X.PropertyNotify:
            seen.append(event.atom)
    assert seen == names
    root.change_attributes(event_mask=0)
