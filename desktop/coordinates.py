"""Coordinate frames: map points between screen pixels, a scaled screenshot's pixels and a 0-1000 grid.

Pure integer arithmetic, no X. A point in a space `extent` units wide stands for the centre of its
cell, `(v + 0.5) * screen / extent`, so image -> screen -> image is exact for any downscale and
screen -> image -> screen is off by at most half an image pixel in screen pixels (<= 1 at scale >= 0.5).
The 0-1000 grid follows Gemini's own denormalisation, `value / 1000 * screen`, so a model's point
lands where its vendor's samples put it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from desktop.encode import scaled_size

SpaceKind = Literal["screen", "image", "normalized"]
NORMALIZED_EXTENT = 1000
"""The normalised grid (Gemini style): 0-1000 on both axes, whatever the screen's aspect."""
_FIT_ROUNDS = 16


def to_screen_axis(value: int, extent: int, screen: int) -> int:
    """The screen pixel under the centre of cell `value` of an axis `extent` cells long, on the screen."""
    if extent == screen:
        return min(max(value, 0), screen - 1)
    return min(max((2 * value + 1) * screen // (2 * extent), 0), screen - 1)


def from_screen_axis(pixel: int, extent: int, screen: int) -> int:
    """The cell of an axis `extent` cells long that holds the centre of screen pixel `pixel`."""
    if extent == screen:
        return min(max(pixel, 0), extent - 1)
    return min(max((2 * pixel + 1) * extent // (2 * screen), 0), extent - 1)


def grid_to_screen_axis(value: int, screen: int) -> int:
    """A 0-1000 grid value as a screen pixel the way Gemini's samples denormalise: `value / 1000 * screen`."""
    return min(max(value * screen // NORMALIZED_EXTENT, 0), screen - 1)


def screen_to_grid_axis(pixel: int, screen: int) -> int:
    """The smallest grid value that denormalises to `pixel` or past it (exact inverse when screen >= 1000)."""
    return min(max(-(-pixel * NORMALIZED_EXTENT // screen), 0), NORMALIZED_EXTENT)


def edge_to_screen(edge: int, extent: int, screen: int) -> int:
    """A cell boundary (0..extent) as the nearest screen pixel boundary (0..screen)."""
    return min(max((2 * edge * screen + extent) // (2 * extent), 0), screen)


@dataclass(frozen=True)
class CoordinateSpace:
    """The frame a client's coordinates are in: screen pixels, image pixels of `width`x`height`, or 0-1000."""

    kind: SpaceKind
    screen_width: int
    screen_height: int
    width: int
    height: int
    """The extent of the space: the screen size, the image size, or 1000x1000."""

    @classmethod
    def screen(cls, screen_width: int, screen_height: int) -> CoordinateSpace:
        return cls("screen", screen_width, screen_height, screen_width, screen_height)

    @classmethod
    def image(cls, screen_width: int, screen_height: int, width: int, height: int) -> CoordinateSpace:
        if width < 1 or height < 1:
            raise ValueError(f"an image space needs a positive size, got {width}x{height}")
        return cls("image", screen_width, screen_height, width, height)

    @classmethod
    def normalized(cls, screen_width: int, screen_height: int) -> CoordinateSpace:
        return cls("normalized", screen_width, screen_height, NORMALIZED_EXTENT, NORMALIZED_EXTENT)

    @property
    def max_x(self) -> int:
        """The largest x a client may send (1000 is allowed on the normalised grid, as Gemini sends it)."""
        return NORMALIZED_EXTENT if self.kind == "normalized" else self.width - 1

    @property
    def max_y(self) -> int:
        return NORMALIZED_EXTENT if self.kind == "normalized" else self.height - 1

    def to_screen(self, x: int, y: int) -> tuple[int, int]:
        """A client point as the screen pixel it designates (clamped to the screen)."""
        if self.kind == "normalized":
            return grid_to_screen_axis(x, self.screen_width), grid_to_screen_axis(y, self.screen_height)
        return (to_screen_axis(x, self.width, self.screen_width),
                to_screen_axis(y, self.height, self.screen_height))

    def from_screen(self, x: int, y: int) -> tuple[int, int]:
        """A screen pixel as a point of this space."""
        if self.kind == "normalized":
            return screen_to_grid_axis(x, self.screen_width), screen_to_grid_axis(y, self.screen_height)
        return (from_screen_axis(x, self.width, self.screen_width),
                from_screen_axis(y, self.height, self.screen_height))

    def rect_to_screen(self, x: int, y: int, width: int, height: int) -> tuple[int, int, int, int]:
        """A rectangle of this space as the screen rectangle it covers: (x, y, width, height), >= 1x1."""
        left = edge_to_screen(x, self.width, self.screen_width)
        top = edge_to_screen(y, self.height, self.screen_height)
        right = edge_to_screen(x + width, self.width, self.screen_width)
        bottom = edge_to_screen(y + height, self.height, self.screen_height)
        left, top = min(left, self.screen_width - 1), min(top, self.screen_height - 1)
        return left, top, max(1, right - left), max(1, bottom - top)


@dataclass(frozen=True)
class ImageFit:
    """How a capture is shrunk: the scale to pass to the screen and the image size it gives."""

    scale: float
    width: int
    height: int


def fit_image(width: int, height: int, *, scale: float | None = None, target_width: int | None = None,
              target_height: int | None = None, max_long_edge: int | None = None,
              max_pixels: int | None = None) -> ImageFit:
    """The largest image of a `width`x`height` capture (never enlarged) that meets every given limit.

    The size is `scaled_size(width, height, scale)` (what `Screen.capture` produces), so the scale is
    nudged down until the rounded size obeys the limits too.
    """
    limits = [1.0]
    if scale is not None:
        limits.append(scale)
    if target_width is not None:
        limits.append(target_width / width)
    if target_height is not None:
        limits.append(target_height / height)
    if max_long_edge is not None:
        limits.append(max_long_edge / max(width, height))
    if max_pixels is not None:
        limits.append(math.sqrt(max_pixels / (width * height)))
    chosen = min(limits)
    size = scaled_size(width, height, chosen)
    for _ in range(_FIT_ROUNDS):
        w, h = size
        too_big = ((target_width is not None and w > target_width)
                   or (target_height is not None and h > target_height)
                   or (max_long_edge is not None and max(w, h) > max_long_edge)
                   or (max_pixels is not None and w * h > max_pixels))
        if not too_big or (w, h) == (1, 1):
            break
        chosen -= 0.5 / max(width, height)  # about half a pixel off the long edge per round
        size = scaled_size(width, height, max(chosen, 1e-9))
    return ImageFit(chosen, size[0], size[1])
