"""The pointer in screenshots: read its position and real image (XFIXES), composite it, mark it.

The X server never puts the cursor into a grab, so it is drawn here: the real cursor image at its
hotspot (before scaling, so it shrinks with the picture), then a ring that keeps the same size in
the output image whatever the scale (so a thumbnail still shows where the pointer is).
"""

from __future__ import annotations

import contextlib
from array import array
from dataclasses import dataclass

from PIL import Image, ImageDraw
from Xlib import display as xdisplay

from desktop.x11.thread import open_display

MARK_COLOUR = (255, 0, 0)
HALO_COLOUR = (255, 255, 255)
MARK_RADIUS = 11
"""Radius of the red ring's outer edge in output pixels; a 1 px white halo surrounds it on both sides."""
MARK_STROKE = 2


@dataclass(frozen=True)
class Cursor:
    """Pointer position (the hotspot) in screen pixels and the cursor image, if XFIXES has one."""

    x: int
    y: int
    image: Image.Image | None = None
    """RGBA with straight alpha; None when the server lacks XFIXES."""
    xhot: int = 0
    yhot: int = 0


class CursorReader:
    """A python-xlib connection that reads the pointer; it belongs to exactly one thread."""

    def __init__(self, display_name: str) -> None:
        self._display: xdisplay.Display = open_display(display_name)
        self._root = self._display.screen().root
        self._xfixes = self._display.has_extension("XFIXES")
        if self._xfixes:  # XFIXES answers nothing before a client announced its version
            self._display.xfixes_query_version()

    def read(self) -> Cursor:
        """The pointer now: one XFixesGetCursorImage round trip (or QueryPointer without XFIXES)."""
        if not self._xfixes:
            pointer = self._root.query_pointer()
            return Cursor(pointer.root_x, pointer.root_y)
        reply = self._display.xfixes_get_cursor_image(self._root)
        image = None
        if reply.width and reply.height:
            # 32-bit ARGB words, premultiplied; little-endian bytes read as BGRa.
            pixels = array("I", reply.cursor_image).tobytes()
            image = Image.frombuffer("RGBA", (reply.width, reply.height), pixels, "raw", "BGRa", 0, 1)
        return Cursor(reply.x, reply.y, image, reply.xhot, reply.yhot)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the socket may already be broken
            self._display.close()


def composite(image: Image.Image, cursor: Cursor, origin_x: int, origin_y: int) -> None:
    """Paste the cursor image onto `image`, whose top-left is screen pixel (`origin_x`, `origin_y`)."""
    if cursor.image is None:
        return
    left = cursor.x - cursor.xhot - origin_x
    top = cursor.y - cursor.yhot - origin_y
    image.paste(cursor.image, (left, top), cursor.image)


def draw_marker(image: Image.Image, x: int, y: int) -> None:
    """A red ring with a white halo centred on image pixel (x, y); the centre stays clear."""
    draw = ImageDraw.Draw(image)
    outer = MARK_RADIUS + 1
    draw.ellipse((x - outer, y - outer, x + outer, y + outer), outline=HALO_COLOUR, width=MARK_STROKE + 2)
    r = MARK_RADIUS
    draw.ellipse((x - r, y - r, x + r, y + r), outline=MARK_COLOUR, width=MARK_STROKE)
