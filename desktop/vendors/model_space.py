"""The coordinate conventions of open computer-use models, both ways: a model's point to the screen pixel it means,
and a screen pixel to the point the model would print for it.

Pure arithmetic, no X. Smart-resize is the image processor of Qwen2-VL and its descendants (Qwen2.5-VL, UI-TARS 1.5,
OpenCUA, Fara): each side rounded to a multiple of `factor`, then the area brought within [min_pixels, max_pixels]
keeping the aspect as nearly as those multiples allow. The model sees that image and prints pixels of it, so the
size is computed the processor's way exactly (Python's `round`, half to even, as the processor rounds) and the
screenshot sent back is that size (api/routes/vendors.py), which may stretch one axis by a few pixels or enlarge.
Pixel spaces map cell centres as desktop/input/coordinates.py does; the 0-1000 grid is `v / 1000 * size`, the
denormalisation Qwen3-VL's and UI-TARS's samples use; relative is a fraction of the screen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from desktop.input.coordinates import CoordinateSpace
from sandbox_desktop_wire.open_models import CoordinateConvention, ModelFamily

MAX_RATIO = 200
"""The processor refuses an image more elongated than this."""


@dataclass(frozen=True)
class ResizeBounds:
    factor: int
    min_pixels: int
    max_pixels: int


QWEN_BOUNDS = ResizeBounds(28, 56 * 56, 28 * 28 * 16384)
"""Qwen2.5-VL's processor defaults (min 3136, max 12845056 pixels), which OpenCUA and Fara, built on it, keep unless
their deployment sets others (then the request's `minPixels`/`maxPixels`)."""
UI_TARS_BOUNDS = ResizeBounds(28, 100 * 28 * 28, 16384 * 28 * 28)
"""UI-TARS 1.5's parser's bounds."""
QWEN3_BOUNDS = ResizeBounds(32, 64 * 32 * 32, 16384 * 32 * 32)
"""Qwen3-VL's processor (patch 16, merge 2), for a caller who runs it in pixels rather than on its grid."""

DEFAULTS: dict[ModelFamily, tuple[CoordinateConvention, ResizeBounds]] = {
    ModelFamily.QWEN25_VL: (CoordinateConvention.SMART_RESIZE, QWEN_BOUNDS),
    ModelFamily.QWEN3_VL: (CoordinateConvention.GRID_1000, QWEN3_BOUNDS),
    ModelFamily.UI_TARS_1: (CoordinateConvention.GRID_1000, UI_TARS_BOUNDS),
    ModelFamily.UI_TARS_15: (CoordinateConvention.SMART_RESIZE, UI_TARS_BOUNDS),
    ModelFamily.OPENCUA: (CoordinateConvention.SMART_RESIZE, QWEN_BOUNDS),
    ModelFamily.FARA: (CoordinateConvention.SMART_RESIZE, QWEN_BOUNDS),
}
"""Each family's convention and resize bounds when the request names none."""


def smart_resize(width: int, height: int, bounds: ResizeBounds) -> tuple[int, int]:
    """The (width, height) the processor resizes a `width`x`height` image to."""
    if max(width, height) / min(width, height) > MAX_RATIO:
        raise ValueError(f"an aspect ratio above {MAX_RATIO} cannot be resized ({width}x{height})")
    f = bounds.factor
    w, h = max(f, round(width / f) * f), max(f, round(height / f) * f)
    if w * h > bounds.max_pixels:
        beta = math.sqrt(width * height / bounds.max_pixels)
        w, h = max(f, math.floor(width / beta / f) * f), max(f, math.floor(height / beta / f) * f)
    elif w * h < bounds.min_pixels:
        beta = math.sqrt(bounds.min_pixels / (width * height))
        w, h = math.ceil(width * beta / f) * f, math.ceil(height * beta / f) * f
    return w, h


@dataclass(frozen=True)
class ModelSpace:
    """A model's coordinate space over a `screen_width`x`screen_height` screen; `width`x`height` is its extent (the
    resized image, 1000x1000, 1x1 or the screen)."""

    convention: CoordinateConvention
    screen_width: int
    screen_height: int
    width: int
    height: int

    @classmethod
    def of(cls, convention: CoordinateConvention, screen_width: int, screen_height: int,
           bounds: ResizeBounds) -> ModelSpace:
        match convention:
            case CoordinateConvention.SMART_RESIZE:
                w, h = smart_resize(screen_width, screen_height, bounds)
            case CoordinateConvention.GRID_1000:
                w, h = 1000, 1000
            case CoordinateConvention.RELATIVE:
                w, h = 1, 1
            case _:
                w, h = screen_width, screen_height
        return cls(convention, screen_width, screen_height, w, h)

    @property
    def resized(self) -> tuple[int, int] | None:
        """The screenshot size the model expects when it is not the screen's own (smart-resize)."""
        if self.convention is CoordinateConvention.SMART_RESIZE and (self.width, self.height) != (
                self.screen_width, self.screen_height):
            return self.width, self.height
        return None

    def contains(self, x: float, y: float) -> bool:
        """Whether a model point lies in its space (the grid's 1000 and relative 1.0 included, as models print them)."""
        closed = self.convention in (CoordinateConvention.GRID_1000, CoordinateConvention.RELATIVE)
        return (0 <= x <= self.width and 0 <= y <= self.height) if closed else (
            0 <= x < self.width and 0 <= y < self.height)

    def to_screen(self, x: float, y: float) -> tuple[int, int]:
        """The screen pixel a model point means (clamped to the screen)."""
        sw, sh = self.screen_width, self.screen_height
        match self.convention:
            case CoordinateConvention.RELATIVE:
                return min(max(math.floor(x * sw), 0), sw - 1), min(max(math.floor(y * sh), 0), sh - 1)
            case CoordinateConvention.GRID_1000:
                return CoordinateSpace.normalized(sw, sh).to_screen(math.floor(x), math.floor(y))
        # A pixel space: a fractional pixel is the cell it falls in.
        return CoordinateSpace.image(sw, sh, self.width, self.height).to_screen(math.floor(x), math.floor(y))

    def from_screen(self, x: int, y: int) -> tuple[float, float]:
        """The point a model would print for screen pixel (x, y) (its centre, for relative)."""
        sw, sh = self.screen_width, self.screen_height
        match self.convention:
            case CoordinateConvention.RELATIVE:
                return (x + 0.5) / sw, (y + 0.5) / sh
            case CoordinateConvention.GRID_1000:
                return CoordinateSpace.normalized(sw, sh).from_screen(x, y)
        return CoordinateSpace.image(sw, sh, self.width, self.height).from_screen(x, y)
