"""The pointer as the X server shows it: its position and real image (XFIXES), for screenshots and the live view.

The X server never puts the cursor into a grab, so whoever shows the screen draws it: a screenshot
composites the real cursor image at its hotspot (before scaling, so it shrinks with the picture),
then a ring that keeps the same size in the output image whatever the scale (so a thumbnail still
shows where the pointer is); the live view (streaming/canvas.py) draws the image into each picture.

`CursorReader` is the one reader of both. A screenshot wants the cursor exact at the moment of its
grab: one XFixesGetCursorImage round trip gives position and image together. The live view reads
every tick and moving the pointer damages nothing, so its reader asks for CursorNotify events and
re-reads the image only after one said the shape changed; every other tick is one QueryPointer
round trip (~0.05 ms).
"""

from __future__ import annotations

import contextlib
from array import array
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw
from Xlib import display as xdisplay
from Xlib.ext import xfixes

from desktop.x11.thread import open_display

MARK_COLOUR = (255, 0, 0)
HALO_COLOUR = (255, 255, 255)
MARK_RADIUS = 11
"""Radius of the red ring's outer edge in output pixels; a 1 px white halo surrounds it on both sides."""
MARK_STROKE = 2


@dataclass(frozen=True)
class Sprite:
    """A cursor image with straight alpha, and its hotspot."""

    serial: int
    """The server's number of this cursor image: equal serials, equal images."""
    image: Image.Image
    """RGBA with straight alpha."""
    xhot: int
    yhot: int


@dataclass(frozen=True)
class Cursor:
    """The pointer position (the hotspot, in screen pixels) and its sprite, if XFIXES has one."""

    x: int
    y: int
    sprite: Sprite | None = None
    """None when the server lacks XFIXES (or the cursor is empty)."""

    @property
    def key(self) -> tuple[int, int, int]:
        """Equal keys draw identical pixels."""
        return self.x, self.y, self.sprite.serial if self.sprite else 0


class CursorReader:
    """A python-xlib connection that reads the pointer; it belongs to exactly one thread.

    With `follow_shape` (a reader called every tick), the image is fetched again only after a
    CursorNotify; without, every read fetches it (exact at that moment, for a screenshot).
    """

    def __init__(self, display_name: str, *, follow_shape: bool = False) -> None:
        self._display: xdisplay.Display = open_display(display_name)
        self._root = self._display.screen().root
        self._xfixes = self._display.has_extension("XFIXES")
        self._follow = follow_shape
        self._sprite: Sprite | None = None
        self._stale = True
        """Whether the next read fetches the image; stays True unless the shape is followed."""
        if self._xfixes:  # XFIXES answers nothing before a client announced its version
            self._display.xfixes_query_version()
            if follow_shape:
                self._display.xfixes_select_cursor_input(self._root, xfixes.XFixesDisplayCursorNotifyMask)

    def read(self) -> Cursor:
        """The pointer now: one XFixesGetCursorImage round trip when the image is wanted, else one QueryPointer."""
        if self._follow:
            while self._display.pending_events():
                self._display.next_event()  # only CursorNotify is selected: the shape changed
                self._stale = True
        if self._xfixes and self._stale:
            self._stale = not self._follow
            reply = self._display.xfixes_get_cursor_image(self._root)
            self._sprite = _sprite(reply)
            return Cursor(int(reply.x), int(reply.y), self._sprite)
        pointer = self._root.query_pointer()
        return Cursor(int(pointer.root_x), int(pointer.root_y), self._sprite)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the socket may already be broken
            self._display.close()


def _sprite(reply: Any) -> Sprite | None:
    width, height = int(reply.width), int(reply.height)
    if not width or not height:
        return None
    # 32-bit ARGB words, premultiplied; little-endian bytes read as BGRa give straight RGBA (a decoding copy).
    pixels = array("I", reply.cursor_image).tobytes()
    image = Image.frombuffer("RGBA", (width, height), pixels, "raw", "BGRa", 0, 1)
    return Sprite(int(reply.cursor_serial), image, int(reply.xhot), int(reply.yhot))


def composite(image: Image.Image, cursor: Cursor, origin_x: int, origin_y: int) -> None:
    """Paste the cursor image onto `image`, whose top-left is screen pixel (`origin_x`, `origin_y`)."""
    sprite = cursor.sprite
    if sprite is None:
        return
    left = cursor.x - sprite.xhot - origin_x
    top = cursor.y - sprite.yhot - origin_y
    image.paste(sprite.image, (left, top), sprite.image)


def draw_marker(image: Image.Image, x: int, y: int) -> None:
    """A red ring with a white halo centred on image pixel (x, y); the centre stays clear."""
    draw = ImageDraw.Draw(image)
    outer = MARK_RADIUS + 1
    draw.ellipse((x - outer, y - outer, x + outer, y + outer), outline=HALO_COLOUR, width=MARK_STROKE + 2)
    r = MARK_RADIUS
    draw.ellipse((x - r, y - r, x + r, y + r), outline=MARK_COLOUR, width=MARK_STROKE)
