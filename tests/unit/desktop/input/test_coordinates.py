"""The pure coordinate-frame math of desktop/input/coordinates.py: exhaustive round trips and image fitting."""

from __future__ import annotations

import itertools

import pytest

from desktop.input.coordinates import CoordinateSpace, edge_to_screen, fit_image
from desktop.screen.encode import scaled_size

SCREENS = [(1440, 900), (1280, 800), (1024, 768), (1921, 1081), (2560, 1600), (3840, 2160), (333, 777), (64, 64)]


def image_space(screen: tuple[int, int], scale: float) -> CoordinateSpace:
    return CoordinateSpace.image(*screen, *scaled_size(*screen, scale))


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("scale", [1.0, 0.6, 0.5, 0.3333, 0.1])
def test_image_to_screen_to_image_is_exact(screen: tuple[int, int], scale: float) -> None:
    space = image_space(screen, scale)
    for x, y in itertools.zip_longest(range(space.width), range(space.height), fillvalue=0):
        sx, sy = space.to_screen(x, y)
        assert 0 <= sx < screen[0] and 0 <= sy < screen[1]
        assert space.from_screen(sx, sy) == (x, y)


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("scale", [1.0, 0.9, 0.75, 0.6, 0.5])
def test_screen_to_image_to_screen_is_within_one_pixel(screen: tuple[int, int], scale: float) -> None:
    space = image_space(screen, scale)
    for x, y in itertools.zip_longest(range(screen[0]), range(screen[1]), fillvalue=0):
        back = space.to_screen(*space.from_screen(x, y))
        assert abs(back[0] - x) <= 1 and abs(back[1] - y) <= 1, (x, y, back)
        if scale == 1.0:
            assert back == (x, y)


@pytest.mark.parametrize("screen", SCREENS)
def test_screen_space_is_the_identity(screen: tuple[int, int]) -> None:
    space = CoordinateSpace.screen(*screen)
    for x in range(screen[0]):
        assert space.to_screen(x, 0) == (x, 0) == space.from_screen(x, 0)


@pytest.mark.parametrize("screen", SCREENS)
def test_normalized_grid(screen: tuple[int, int]) -> None:
    space = CoordinateSpace.normalized(*screen)
    w, h = screen
    assert space.to_screen(0, 0) == (0, 0)
    assert space.to_screen(1000, 1000) == (w - 1, h - 1)  # 1000 is accepted and clamped onto the screen
    assert space.to_screen(500, 250) == (w // 2, h // 4)
    for n in range(1001):
        sx, sy = space.to_screen(n, n)
        assert (sx, sy) == (min(w - 1, n * w // 1000), min(h - 1, n * h // 1000))  # x / 1000 * width, exactly
        if w >= 1000 and n < 1000:
            assert space.from_screen(sx, 0)[0] == n  # grid -> screen -> grid is exact
    for x in range(w):  # screen -> grid -> screen lands within one grid cell
        back = space.to_screen(*space.from_screen(x, 0))[0]
        assert 0 <= back - x < max(1, w / 1000) or back == w - 1


def test_rounding_examples() -> None:
    half = CoordinateSpace.image(1440, 900, 720, 450)
    assert half.to_screen(120, 80) == (241, 161)  # as docs/screenshots.md states for scale 0.5
    assert half.from_screen(241, 161) == (120, 80)
    assert half.to_screen(719, 449) == (1439, 899)
    six = CoordinateSpace.image(1440, 900, 864, 540)
    assert six.to_screen(0, 0) == (0, 0) and six.to_screen(863, 539) == (1439, 899)


def test_values_off_the_space_are_clamped_onto_the_screen() -> None:
    space = CoordinateSpace.image(1440, 900, 864, 540)
    assert space.to_screen(-5, 10_000) == (0, 899)
    assert space.from_screen(5000, -1) == (863, 0)


def test_rectangles_cover_the_screen_pixels_of_their_cells() -> None:
    space = CoordinateSpace.image(1440, 900, 864, 540)
    assert space.rect_to_screen(0, 0, 864, 540) == (0, 0, 1440, 900)
    x, y, w, h = space.rect_to_screen(100, 50, 60, 30)
    assert (x, y, w, h) == (167, 83, 100, 50)
    assert space.rect_to_screen(863, 539, 1, 1)[2:] == (2, 2)
    norm = CoordinateSpace.normalized(1440, 900)
    assert norm.rect_to_screen(250, 250, 500, 500) == (360, 225, 720, 450)
    assert edge_to_screen(1000, 1000, 1440) == 1440


@pytest.mark.parametrize("screen", SCREENS)
def test_vendor_limits_are_met_exactly(screen: tuple[int, int]) -> None:
    fit = fit_image(*screen, max_long_edge=1568, max_pixels=1_150_000)
    assert (fit.width, fit.height) == scaled_size(*screen, fit.scale)
    assert max(fit.width, fit.height) <= 1568 and fit.width * fit.height <= 1_150_000
    assert fit.scale <= 1.0
    if screen[0] * screen[1] <= 1_150_000 and max(screen) <= 1568:
        assert (fit.width, fit.height) == screen and fit.scale == 1.0
    else:  # as large as allowed: one more pixel on the long edge would break a limit
        assert max(fit.width, fit.height) >= 1568 - 2 or fit.width * fit.height >= 1_150_000 * 0.995
    # The aspect ratio is kept to within a pixel.
    assert abs(fit.width / screen[0] * screen[1] - fit.height) <= 1
    # Clicks in that image land within a pixel and a half (the image is at most ~1.7x smaller here).
    space = CoordinateSpace.image(*screen, fit.width, fit.height)
    for x in range(0, screen[0], 7):
        assert abs(space.to_screen(*space.from_screen(x, 0))[0] - x) <= screen[0] / fit.width / 2 + 0.5


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("target", [(1024, 768), (800, 800), (1280, 720), (333, 100), (1, 1), (99999, 99999)])
def test_target_size_fits_inside_and_keeps_the_aspect(screen: tuple[int, int], target: tuple[int, int]) -> None:
    fit = fit_image(*screen, target_width=target[0], target_height=target[1])
    assert fit.width <= target[0] and fit.height <= target[1]
    assert fit.width <= screen[0] and fit.height <= screen[1]  # never enlarged
    # As large as allowed: it touches a target edge (within rounding) unless the screen itself fits.
    assert fit.width >= min(target[0], screen[0]) - 1 or fit.height >= min(target[1], screen[1]) - 1
    assert (fit.width, fit.height) == scaled_size(*screen, fit.scale)


def test_scale_alone_matches_the_screenshot_endpoint() -> None:
    fit = fit_image(1440, 900, scale=0.6)
    assert (fit.width, fit.height) == (864, 540) and fit.scale == 0.6
    assert fit_image(1440, 900).scale == 1.0


def test_an_image_space_needs_a_size() -> None:
    with pytest.raises(ValueError):
        CoordinateSpace.image(1440, 900, 0, 10)
