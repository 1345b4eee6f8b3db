"""The PNG writer (desktop/screen/encode.py): every picture decodes to its pixels, whichever way its rows went."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image, ImageChops, ImageDraw

from desktop.screen.encode import SLICE_BYTES, _incompressible, png_bytes
from tests.support.window_app import pattern


def screen_like(width: int, height: int) -> Image.Image:
    """Flat panels and lines of text: what deflates well."""
    image = Image.new("RGB", (width, height), (236, 236, 236))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width, 28), fill=(40, 60, 90))
    for line in range(40, height - 14, 16):
        draw.text((12, line), f"line {line}: the quick brown fox jumps over the lazy dog", fill=(20, 20, 20))
    return image


def noise(width: int, height: int) -> Image.Image:
    return Image.frombytes("RGB", (width, height), random.Random(7).randbytes(width * height * 3))


def decoded(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()  # checks every chunk's CRC and the zlib stream's Adler-32 on the way
    return image


@pytest.mark.parametrize("make, size", [
    (screen_like, (1440, 900)), (pattern, (800, 600)), (noise, (640, 480)), (pattern, (333, 77)),
    (noise, (3, 2)), (screen_like, (1, 1)),
])
def test_every_picture_decodes_to_its_pixels(make: object, size: tuple[int, int]) -> None:
    image = make(*size)  # type: ignore[operator]
    back = decoded(png_bytes(image))
    assert back.mode == "RGB" and back.size == image.size
    assert ImageChops.difference(back, image).getbbox() is None


def test_what_does_not_deflate_is_stored_and_screen_content_is_deflated() -> None:
    raw = 800 * 600 * 3
    gradient = png_bytes(pattern(800, 600))
    assert raw < len(gradient) < raw * 1.01, "stored blocks: the rows plus a few bytes a slice"
    assert len(png_bytes(screen_like(800, 600))) < raw / 10


def test_a_picture_half_gradient_half_screen_decodes_whichever_way_it_goes() -> None:
    image = screen_like(1440, 900)
    image.paste(pattern(1440, 300), (0, 300))  # mostly screen: one deflate stream over a gradient many slices long
    assert 4 * SLICE_BYTES < 1440 * 3 * 300
    assert ImageChops.difference(decoded(png_bytes(image)), image).getbbox() is None
    photo = noise(1440, 900)
    photo.paste(screen_like(1440, 150), (0, 150))  # between the samples: slice by slice, the text found by a probe
    assert _incompressible(memoryview(photo.tobytes("raw", "RGB", 1440 * 3 + 1, 1))[:-1])
    data = png_bytes(photo)
    assert ImageChops.difference(decoded(data), photo).getbbox() is None
    assert len(data) < 1440 * 900 * 3 * 0.95, "the screen-like slices deflated"
