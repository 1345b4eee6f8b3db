"""Coordinate frames: map points between screen pixels, a scaled screenshot's pixels, a 0-1000 grid
and a window's own pixels (its client area, as a window screenshot shows it).

Pure integer arithmetic, no X. A point in a space `extent` units wide stands for the centre of its
cell, `(v + 0.5) * screen / extent`, so image -> screen -> image is exact for any downscale and
screen -> image -> screen is off by at most half an image pixel in screen pixels (<= 1 at scale >= 0.5).
The 0-1000 grid follows Gemini's own denormalisation, `value / 1000 * screen`, so a model's point
lands where its vendor's samples put it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from desktop.screen.encode import scaled_size
from sandbox_desktop_wire.enums import CoordinateSpaceKind

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
class Area:
    """A rectangle in screen pixels that a space spans (a window's client area may reach off the screen)."""

    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class CoordinateSpace:
    """The frame a client's coordinates are in: screen pixels, image pixels of `width`x`height`, 0-1000,
    or a window's client area (`area`, optionally seen scaled to `width`x`height`)."""

    kind: CoordinateSpaceKind
    screen_width: int
    screen_height: int
    width: int
    height: int
    """The extent of the space: the screen size, the image size, 1000x1000, or the window (image) size."""
    area: Area | None = None
    """The screen rectangle the space spans; None for the whole screen."""

    @classmethod
    def screen(cls, screen_width: int, screen_height: int) -> CoordinateSpace:
        return cls(CoordinateSpaceKind.SCREEN, screen_width, screen_height, screen_width, screen_height)

    @classmethod
    def image(cls, screen_width: int, screen_height: int, width: int, height: int) -> CoordinateSpace:
        if width < 1 or height < 1:
            raise ValueError(f"an image space needs a positive size, got {width}x{height}")
        return cls(CoordinateSpaceKind.IMAGE, screen_width, screen_height, width, height)

    @classmethod
    def normalized(cls, screen_width: int, screen_height: int) -> CoordinateSpace:
        return cls(CoordinateSpaceKind.NORMALIZED, screen_width, screen_height, NORMALIZED_EXTENT, NORMALIZED_EXTENT)

    @classmethod
    def window(cls, screen_width: int, screen_height: int, area: Area, width: int | None = None,
               height: int | None = None) -> CoordinateSpace:
        """A window's client area `area`; `width`x`height` when the client saw a scaled capture of it."""
        width, height = width or area.width, height or area.height
        if min(width, height, area.width, area.height) < 1:
            raise ValueError(f"a window space needs a positive size, got {width}x{height} of {area}")
        return cls(CoordinateSpaceKind.WINDOW, screen_width, screen_height, width, height, area)

    @property
    def span(self) -> Area:
        """The screen rectangle the space covers."""
        return self.area or Area(0, 0, self.screen_width, self.screen_height)

    def on_screen(self, x: int, y: int) -> bool:
        """Whether a screen pixel is on the screen (a window's point may lie off it)."""
        return 0 <= x < self.screen_width and 0 <= y < self.screen_height

    @property
    def max_x(self) -> int:
        """The largest x a client may send (1000 is allowed on the normalised grid, as Gemini sends it)."""
        return NORMALIZED_EXTENT if self.kind is CoordinateSpaceKind.NORMALIZED else self.width - 1

    @property
    def max_y(self) -> int:
        return NORMALIZED_EXTENT if self.kind is CoordinateSpaceKind.NORMALIZED else self.height - 1

    def to_screen(self, x: int, y: int) -> tuple[int, int]:
        """A client point as the screen pixel it designates (clamped to the space's area)."""
        if self.kind is CoordinateSpaceKind.NORMALIZED:
            return grid_to_screen_axis(x, self.screen_width), grid_to_screen_axis(y, self.screen_height)
        a = self.span
        return a.x + to_screen_axis(x, self.width, a.width), a.y + to_screen_axis(y, self.height, a.height)

    def from_screen(self, x: int, y: int) -> tuple[int, int]:
        """A screen pixel as a point of this space (clamped to it)."""
        if self.kind is CoordinateSpaceKind.NORMALIZED:
            return screen_to_grid_axis(x, self.screen_width), screen_to_grid_axis(y, self.screen_height)
        a = self.span
        return from_screen_axis(x - a.x, self.width, a.width), from_screen_axis(y - a.y, self.height, a.height)

    def rect_to_screen(self, x: int, y: int, width: int, height: int) -> tuple[int, int, int, int]:
        """A rectangle of this space as the screen rectangle it covers, cut to the screen: (x, y, width,
        height), >= 1x1."""
        a = self.span
        left = max(a.x + edge_to_screen(x, self.width, a.width), 0)
        top = max(a.y + edge_to_screen(y, self.height, a.height), 0)
        right = min(a.x + edge_to_screen(x + width, self.width, a.width), self.screen_width)
        bottom = min(a.y + edge_to_screen(y + height, self.height, a.height), self.screen_height)
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
