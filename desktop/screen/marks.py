"""Set-of-marks: numbered boxes on a screenshot's interactive elements, and the number -> element table.

A model grounds better on "click 12" than on pixel coordinates it has to estimate. The numbering is
the reading order of the interactive elements showing on the screen; the desktop keeps the table of
the last marked screenshot, so an element target may be that number (docs/accessibility.md
"Set-of-marks"). Drawing runs in the screenshot's worker thread, after scaling, so boxes and labels
keep their size whatever the scale.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from desktop.core.geometry import Bounds

COLOURS = ((230, 25, 75), (0, 130, 200), (60, 180, 75), (245, 130, 48), (145, 30, 180), (0, 128, 128),
           (128, 0, 0), (0, 0, 128))
"""Distinct, dark enough for white digits; neighbours get different ones."""
LABEL_SIZE = 13
MAX_MARKS = 500
"""A screen with more interactive elements than this gets the first ones marked (reading order)."""


@dataclass(frozen=True)
class MarkBox:
    """What the screenshot thread draws: a number and a rectangle in screen pixels."""

    number: int
    bounds: Bounds


@functools.cache
def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=LABEL_SIZE)
    except TypeError:  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def draw_marks(image: Image.Image, marks: tuple[MarkBox, ...], origin: tuple[int, int],
               region_size: tuple[int, int]) -> None:
    """Draw each mark on `image`, a capture of the screen rectangle at `origin` of `region_size` scaled to
    the image's size: an outline round the element and its number in a filled tag at its top-left."""
    draw = ImageDraw.Draw(image)
    sx, sy = image.width / region_size[0], image.height / region_size[1]
    font = _font()
    for mark in marks:
        b = mark.bounds
        left, top = round((b.x - origin[0]) * sx), round((b.y - origin[1]) * sy)
        right, bottom = round((b.x + b.width - origin[0]) * sx) - 1, round((b.y + b.height - origin[1]) * sy) - 1
        if right < 0 or bottom < 0 or left >= image.width or top >= image.height:
            continue
        colour = COLOURS[mark.number % len(COLOURS)]
        draw.rectangle((left, top, max(left, right), max(top, bottom)), outline=colour, width=2)
        text = str(mark.number)
        x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
        tag_w, tag_h = x1 - x0 + 6, y1 - y0 + 4
        tx, ty = max(0, left), max(0, top - tag_h) if top - tag_h >= 0 else max(0, top)
        draw.rectangle((tx, ty, tx + tag_w, ty + tag_h), fill=colour)
        draw.text((tx + 3 - x0, ty + 2 - y0), text, fill=(255, 255, 255), font=font)
