"""The pointer for the live view: where it is and what it looks like, read cheaply every tick.

Screen grabs never contain the cursor and moving it damages nothing, so the stream draws it
itself. Each read is one QueryPointer round trip (~0.05 ms); the cursor image (XFixes) is
fetched again only after a CursorNotify event says the shape changed.
"""

from __future__ import annotations

import contextlib
from array import array
from dataclasses import dataclass
from typing import Any

from PIL import Image
from Xlib import display as xdisplay
from Xlib.ext import xfixes

from desktop.x11.thread import open_display


@dataclass(frozen=True)
class Sprite:
    """A cursor image with straight alpha, and its hotspot."""

    serial: int
    image: Image.Image
    xhot: int
    yhot: int


@dataclass(frozen=True)
class Pointer:
    """The pointer position (the hotspot, in screen pixels) and its sprite, if XFIXES has one."""

    x: int
    y: int
    sprite: Sprite | None

    @property
    def key(self) -> tuple[int, int, int]:
        """Equal keys draw identical pixels."""
        return self.x, self.y, self.sprite.serial if self.sprite else 0


class PointerReader:
    """A python-xlib connection reading the pointer; it belongs to exactly one thread."""

    def __init__(self, display_name: str) -> None:
        self._display: xdisplay.Display = open_display(display_name)
        self._root = self._display.screen().root
        self._xfixes = self._display.has_extension("XFIXES")
        self._sprite: Sprite | None = None
        self._stale = True
        if self._xfixes:  # XFIXES answers nothing before a client announced its version
            self._display.xfixes_query_version()
            self._display.xfixes_select_cursor_input(self._root, xfixes.XFixesDisplayCursorNotifyMask)

    def read(self) -> Pointer:
        """The pointer now; the image is re-read only when the cursor shape changed."""
        while self._display.pending_events():
            self._display.next_event()  # only CursorNotify is selected: the shape changed
            self._stale = True
        if self._xfixes and self._stale:
            self._stale = False
            reply = self._display.xfixes_get_cursor_image(self._root)
            self._sprite = _sprite(reply)
            return Pointer(int(reply.x), int(reply.y), self._sprite)
        pointer = self._root.query_pointer()
        return Pointer(int(pointer.root_x), int(pointer.root_y), self._sprite)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the X server may already be gone
            self._display.close()


def _sprite(reply: Any) -> Sprite | None:
    width, height = int(reply.width), int(reply.height)
    if not width or not height:
        return None
    # 32-bit premultiplied ARGB words; little-endian bytes read as BGRa give straight RGBA.
    pixels = array("I", reply.cursor_image).tobytes()
    image = Image.frombuffer("RGBA", (width, height), pixels, "raw", "BGRa", 0, 1).copy()
    return Sprite(int(reply.cursor_serial), image, int(reply.xhot), int(reply.yhot))
