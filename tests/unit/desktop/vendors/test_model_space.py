"""The open models' coordinate conventions (desktop/vendors/model_space.py), pure: every convention round-trips
within a pixel both ways, over a grid of points at three screen sizes."""

from __future__ import annotations

import pytest

from desktop.vendors.model_space import (
    QWEN3_BOUNDS,
    QWEN_BOUNDS,
    UI_TARS_BOUNDS,
    ModelSpace,
    ResizeBounds,
    smart_resize,
)
from sandbox_desktop_wire.open_models import CoordinateConvention

SCREENS = [(1440, 900), (1920, 1080), (1280, 1024)]
SMALL = ResizeBounds(28, 3136, 1280 * 28 * 28)
"""A processor capped at 1280 visual tokens, as many Qwen2.5-VL deployments run it: the image shrinks."""
BOUNDS = [QWEN_BOUNDS, QWEN3_BOUNDS, UI_TARS_BOUNDS, SMALL]
STEP = 11


@pytest.mark.parametrize(("screen", "bounds", "size"), [
    ((1920, 1080), QWEN_BOUNDS, (1932, 1092)),  # each side rounded to the nearest multiple of 28
    ((1440, 900), QWEN_BOUNDS, (1428, 896)),
    ((1280, 1024), QWEN_BOUNDS, (1288, 1036)),
    ((1920, 1080), QWEN3_BOUNDS, (1920, 1088)),
    ((1920, 1080), SMALL, (1316, 728)),  # over max_pixels: scaled by sqrt(area / max), floored to the factor
    ((100, 30), QWEN_BOUNDS, (112, 28)),  # under min_pixels: scaled up, ceiled to the factor
])
def test_smart_resize_is_the_processors_size(screen: tuple[int, int], bounds: ResizeBounds,
                                             size: tuple[int, int]) -> None:
    w, h = smart_resize(*screen, bounds)
    assert (w, h) == size
    assert w % bounds.factor == 0 and h % bounds.factor == 0 and bounds.min_pixels <= w * h <= bounds.max_pixels


def model_unit_in_pixels(space: ModelSpace) -> tuple[float, float]:
    """How many screen pixels one unit of the model's space spans on each axis."""
    return space.screen_width / space.width, space.screen_height / space.height


def model_points(space: ModelSpace) -> list[tuple[float, float]]:
    """A grid of points of the model's space, in its own units (fractions for relative)."""
    if space.convention is CoordinateConvention.RELATIVE:
        return [(i / 97, j / 89) for i in range(97) for j in range(89)]
    return [(float(x), float(y)) for x in range(0, space.width, STEP) for y in range(0, space.height, STEP)]


@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("convention", list(CoordinateConvention))
def test_every_convention_round_trips_within_a_pixel(screen: tuple[int, int],
                                                     convention: CoordinateConvention) -> None:
    sw, sh = screen
    for bounds in BOUNDS if convention is CoordinateConvention.SMART_RESIZE else BOUNDS[:1]:
        space = ModelSpace.of(convention, sw, sh, bounds)
        bad = []
        # screen -> model -> screen: the pixel comes back, give or take one
        for x in range(0, sw, STEP):
            for y in range(0, sh, STEP):
                mx, my = space.from_screen(x, y)
                assert space.contains(mx, my)
                back = space.to_screen(mx, my)
                if abs(back[0] - x) > 1 or abs(back[1] - y) > 1:
                    bad.append(((x, y), (mx, my), back))
        # model -> screen -> model: the point comes back within one screen pixel's worth of model units
        ux, uy = model_unit_in_pixels(space)
        for mx, my in model_points(space):
            sx, sy = space.to_screen(mx, my)
            assert 0 <= sx < sw and 0 <= sy < sh
            bx, by = space.from_screen(sx, sy)
            if abs(bx - mx) * ux > 1 + 1e-9 or abs(by - my) * uy > 1 + 1e-9:
                bad.append(((mx, my), (sx, sy), (bx, by)))
        assert bad == [], f"{convention} {bounds} at {sw}x{sh}: {len(bad)} points off by more than a pixel: {bad[:5]}"


def test_the_spaces_extent_and_screenshot_size() -> None:
    resized = ModelSpace.of(CoordinateConvention.SMART_RESIZE, 1920, 1080, QWEN_BOUNDS)
    assert (resized.width, resized.height, resized.resized) == (1932, 1092, (1932, 1092))
    exact = ModelSpace.of(CoordinateConvention.SMART_RESIZE, 1792, 1120, QWEN_BOUNDS)  # already multiples of 28
    assert exact.resized is None
    grid = ModelSpace.of(CoordinateConvention.GRID_1000, 1920, 1080, QWEN_BOUNDS)
    assert (grid.width, grid.height, grid.resized) == (1000, 1000, None)
    assert grid.to_screen(1000, 1000) == (1919, 1079) and grid.contains(1000, 1000)
    assert grid.to_screen(500, 500) == (960, 540)
    relative = ModelSpace.of(CoordinateConvention.RELATIVE, 1920, 1080, QWEN_BOUNDS)
    assert relative.to_screen(0.5, 0.5) == (960, 540) and relative.to_screen(1.0, 1.0) == (1919, 1079)
    assert not relative.contains(1.01, 0.5)
    screen = ModelSpace.of(CoordinateConvention.SCREEN, 1920, 1080, QWEN_BOUNDS)
    assert screen.to_screen(1919, 0) == (1919, 0) and not screen.contains(1920, 0)
