"""The one cursor reader (desktop/screen/cursor.py) against a real Xvfb: exact reads for screenshots, and the
live view's cheap ones that fetch the image again only after the shape changed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from Xlib import Xcursorfont, display

from desktop.screen.cursor import Cursor, CursorReader
from tests.conftest import wait_for

DISPLAY = ":251"


@pytest.fixture
def xvfb() -> Iterator[display.Display]:
    """The server, and a client of its own that moves the pointer and sets the root window's cursor."""
    proc = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", "640x480x24", "-nolisten", "tcp", "-noreset"],
                            stderr=subprocess.DEVNULL)
    wait_for(lambda: subprocess.run(["xdpyinfo", "-display", DISPLAY], capture_output=True).returncode == 0,
             f"Xvfb on {DISPLAY}")
    other = display.Display(DISPLAY)
    yield other
    other.close()
    proc.kill()
    proc.wait()


def move(d: display.Display, x: int, y: int) -> None:
    d.screen().root.warp_pointer(x, y)
    d.sync()


def set_cursor(d: display.Display, shape: int) -> None:
    font = d.open_font("cursor")
    cursor = font.create_glyph_cursor(font, shape, shape + 1, (0, 0, 0), (0xFFFF, 0xFFFF, 0xFFFF))
    d.screen().root.change_attributes(cursor=cursor)
    d.sync()


class Counting:
    """Counts the reader's XFixesGetCursorImage requests."""

    def __init__(self, reader: CursorReader) -> None:
        self.fetches = 0
        fetch = reader._display.xfixes_get_cursor_image

        def counted(*args: Any) -> Any:
            self.fetches += 1
            return fetch(*args)

        reader._display.xfixes_get_cursor_image = counted  # type: ignore[method-assign]


def test_an_exact_read_fetches_position_and_image_every_time(xvfb: display.Display) -> None:
    reader = CursorReader(DISPLAY)
    counting = Counting(reader)
    try:
        move(xvfb, 120, 80)
        first = reader.read()
        assert (first.x, first.y) == (120, 80) and first.sprite is not None
        move(xvfb, 200, 90)
        second = reader.read()
        assert (second.x, second.y) == (200, 90) and counting.fetches == 2
    finally:
        reader.close()


def test_a_following_read_fetches_the_image_only_after_the_shape_changed(xvfb: display.Display) -> None:
    reader = CursorReader(DISPLAY, follow_shape=True)
    counting = Counting(reader)
    try:
        first = reader.read()
        assert first.sprite is not None and counting.fetches == 1
        move(xvfb, 300, 200)
        moved = reader.read()  # one QueryPointer: the same sprite, the new position
        assert (moved.x, moved.y) == (300, 200) and moved.sprite is first.sprite and counting.fetches == 1
        assert moved.key != first.key
        set_cursor(xvfb, Xcursorfont.xterm)
        wait_for(lambda: reader.read().key[2] != first.key[2], "the new cursor shape")
        assert counting.fetches == 2
        again = reader.read()
        assert again.sprite is not None and again.sprite.serial != first.key[2] and counting.fetches == 2
    finally:
        reader.close()


def test_without_a_cursor_image_the_position_is_still_read(xvfb: display.Display) -> None:
    reader = CursorReader(DISPLAY, follow_shape=True)
    try:
        reader._xfixes = False  # as on a server without XFIXES
        move(xvfb, 10, 20)
        assert reader.read() == Cursor(10, 20, None)
    finally:
        reader.close()
