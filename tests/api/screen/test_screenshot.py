"""Screenshots against a real Xvfb: pixels of a window of known colours at known screen coordinates.

The test process draws the reference itself (python-xlib, an override-redirect window the window
manager cannot move, split into four solid quadrants) and moves the pointer with xdotool, so what the
server returns is checked against effects it did not produce.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image
from Xlib import X, display

from tests.conftest import ServerProcess, assert_problem
from tests.support.pids import child_host_pid

SCREEN_W, SCREEN_H = 1024, 768
WIN_X, WIN_Y, WIN_W, WIN_H = 100, 80, 400, 300
HALF_W, HALF_H = WIN_W // 2, WIN_H // 2
# Quadrant colours: none is pure red, which only the cursor mark uses.
TL, TR, BL, BR = (200, 30, 40), (20, 180, 60), (30, 60, 220), (240, 220, 20)
MARK = (255, 0, 0)
POINTER = (WIN_X + 130, WIN_Y + 80)  # inside the top-left quadrant
Params = dict[str, str | int | float]
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "jpeg": b"\xff\xd8\xff", "webp": b"RIFF"}


def quadrant_colour(x: int, y: int) -> tuple[int, int, int] | None:
    """The colour the test window shows at screen pixel (x, y), or None outside it."""
    if not (WIN_X <= x < WIN_X + WIN_W and WIN_Y <= y < WIN_Y + WIN_H):
        return None
    left, top = x < WIN_X + HALF_W, y < WIN_Y + HALF_H
    return {(True, True): TL, (False, True): TR, (True, False): BL, (False, False): BR}[(left, top)]


def interior_points() -> list[tuple[int, int]]:
    """Screen points well inside each quadrant (far from edges, so scaling keeps their colour)."""
    xs = (WIN_X + HALF_W // 2, WIN_X + HALF_W + HALF_W // 2)
    ys = (WIN_Y + HALF_H // 2, WIN_Y + HALF_H + HALF_H // 2)
    return [(x, y) for x in xs for y in ys]


def to_image(response: httpx.Response, sx: int, sy: int) -> tuple[int, int]:
    """Map screen pixel (sx, sy) into the image, using only the response's frame headers."""
    h = response.headers
    rx, ry = int(h["X-Region-X"]), int(h["X-Region-Y"])
    kx = int(h["X-Image-Width"]) / int(h["X-Region-Width"])
    ky = int(h["X-Image-Height"]) / int(h["X-Region-Height"])
    return int((sx - rx + 0.5) * kx), int((sy - ry + 0.5) * ky)


def decode(response: httpx.Response, fmt: str = "png") -> Image.Image:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == f"image/{fmt}"
    assert response.headers["cache-control"] == "no-store"
    assert response.content.startswith(MAGIC[fmt])
    encoded = Image.open(io.BytesIO(response.content))
    assert encoded.format is not None and encoded.format.lower() == fmt
    image = encoded.convert("RGB")
    assert image.size == (int(response.headers["X-Image-Width"]), int(response.headers["X-Image-Height"]))
    return image


def rgb(image: Image.Image, xy: tuple[int, int]) -> tuple[int, ...]:
    pixel = image.getpixel(xy)
    assert isinstance(pixel, tuple), pixel
    return pixel


def close_to(actual: tuple[int, ...], expected: tuple[int, int, int] | None, tolerance: int) -> bool:
    assert expected is not None
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected, strict=True))


def mark_centre(image: Image.Image) -> tuple[float, float, int]:
    """Centroid and count of the pure-red pixels of the cursor ring."""
    width = image.width
    points = [(i % width, i // width) for i, px in enumerate(image.get_flattened_data()) if px == MARK]
    if not points:
        return (-1.0, -1.0, 0)
    return (sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points), len(points))


def changed_pixels(a: Image.Image, b: Image.Image) -> list[tuple[int, int]]:
    assert a.size == b.size
    width = a.width
    pairs = zip(a.get_flattened_data(), b.get_flattened_data(), strict=True)
    return [(i % width, i // width) for i, (p, q) in enumerate(pairs) if p != q]


@pytest.fixture(scope="module")
def desk(api: httpx.Client) -> Iterator[str]:
    """An active 1024x768 desktop with the four-colour window; yields the display name."""
    response = api.post("/v1/desktop/start", json={"width": SCREEN_W, "height": SCREEN_H, "displayNum": 180})
    assert response.status_code == 200, response.text
    name = response.json()["display"]
    conn = display.Display(name)
    screen = conn.screen()
    window = screen.root.create_window(WIN_X, WIN_Y, WIN_W, WIN_H, 0, screen.root_depth, X.InputOutput,
                                       X.CopyFromParent, background_pixel=0, override_redirect=True)
    for colour, (dx, dy) in zip((TL, TR, BL, BR), ((0, 0), (HALF_W, 0), (0, HALF_H), (HALF_W, HALF_H)),
                                strict=True):
        pixel = (colour[0] << 16) | (colour[1] << 8) | colour[2]
        window.create_window(dx, dy, HALF_W, HALF_H, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
                             background_pixel=pixel).map()
    window.map()
    conn.sync()  # the server paints window backgrounds as it maps them
    move_pointer(name, *POINTER)
    yield name
    with contextlib.suppress(Exception):  # the X server may have been killed by the last test
        conn.close()
    api.post("/v1/desktop/stop")


def move_pointer(name: str, x: int, y: int) -> None:
    subprocess.run(["xdotool", "mousemove", str(x), str(y)], env=dict(os.environ, DISPLAY=name),
                   check=True, timeout=10)


def test_screenshot_before_start_is_409_inactive(api: httpx.Client) -> None:
    assert_problem(api.get("/v1/desktop/screenshot"), 409, "desktop_runtime_inactive")
    region = api.get("/v1/desktop/screenshot/region", params={"x": 0, "y": 0, "width": 10, "height": 10})
    assert_problem(region, 409, "desktop_runtime_inactive")


def test_full_png_has_exact_pixels_and_frame_headers(api: httpx.Client, desk: str) -> None:
    response = api.get("/v1/desktop/screenshot", headers={"Accept": "image/*"})
    image = decode(response)
    assert image.size == (SCREEN_W, SCREEN_H)
    h = response.headers
    assert (h["X-Screen-Width"], h["X-Screen-Height"]) == (str(SCREEN_W), str(SCREEN_H))
    assert (h["X-Region-X"], h["X-Region-Y"], h["X-Region-Width"], h["X-Region-Height"]) == (
        "0", "0", str(SCREEN_W), str(SCREEN_H))
    assert float(h["X-Scale"]) == 1.0
    assert "X-Cursor-X" not in h and "X-Cursor-Y" not in h
    assert "X-Image-Width" in h["Access-Control-Expose-Headers"]
    # Every pixel of the window is exactly where and what it was drawn, edges included.
    for y in range(WIN_Y, WIN_Y + WIN_H, 7):
        for x in range(WIN_X, WIN_X + WIN_W, 7):
            assert image.getpixel((x, y)) == quadrant_colour(x, y), (x, y)
    for x, y in ((WIN_X + HALF_W - 1, WIN_Y), (WIN_X + HALF_W, WIN_Y), (WIN_X, WIN_Y + HALF_H),
                 (WIN_X + WIN_W - 1, WIN_Y + WIN_H - 1)):
        assert image.getpixel((x, y)) == quadrant_colour(x, y), (x, y)
    for x, y in ((WIN_X - 1, WIN_Y), (WIN_X, WIN_Y - 1), (WIN_X + WIN_W, WIN_Y + WIN_H)):
        assert image.getpixel((x, y)) not in (TL, TR, BL, BR), (x, y)


@pytest.mark.parametrize("fmt", ["jpeg", "webp"])
@pytest.mark.parametrize("quality", [30, 85])
def test_lossy_formats_match_within_tolerance(api: httpx.Client, desk: str, fmt: str, quality: int) -> None:
    response = api.get("/v1/desktop/screenshot", params={"format": fmt, "quality": quality})
    image = decode(response, fmt)
    assert image.size == (SCREEN_W, SCREEN_H)
    for x, y in interior_points():
        assert close_to(rgb(image, (x, y)), quadrant_colour(x, y), 24), (x, y, rgb(image, (x, y)))


def test_quality_changes_the_lossy_encoding(api: httpx.Client, desk: str) -> None:
    low = api.get("/v1/desktop/screenshot", params={"format": "jpeg", "quality": 10}).content
    high = api.get("/v1/desktop/screenshot", params={"format": "jpeg", "quality": 95}).content
    assert len(low) < len(high)


@pytest.mark.parametrize(("fmt", "scale", "size"), [("png", 0.5, (512, 384)), ("png", 0.3, (307, 230)),
                                                     ("jpeg", 0.5, (512, 384)), ("webp", 0.3, (307, 230))])
def test_scaled_image_maps_back_through_the_headers(api: httpx.Client, desk: str, fmt: str, scale: float,
                                                    size: tuple[int, int]) -> None:
    response = api.get("/v1/desktop/screenshot", params={"format": fmt, "scale": scale, "quality": 90})
    image = decode(response, fmt)
    assert image.size == size
    assert float(response.headers["X-Scale"]) == scale
    assert response.headers["X-Region-Width"] == str(SCREEN_W)
    tolerance = 2 if fmt == "png" else 24
    for sx, sy in interior_points():
        pixel = rgb(image, to_image(response, sx, sy))
        assert close_to(pixel, quadrant_colour(sx, sy), tolerance), (sx, sy, pixel)


def test_region_is_cropped_at_the_exact_screen_coordinates(api: httpx.Client, desk: str) -> None:
    rx, ry = WIN_X + HALF_W - 50, WIN_Y + HALF_H - 40
    response = api.get("/v1/desktop/screenshot/region", params={"x": rx, "y": ry, "width": 100, "height": 80})
    image = decode(response)
    assert image.size == (100, 80)
    h = response.headers
    assert (h["X-Region-X"], h["X-Region-Y"], h["X-Region-Width"], h["X-Region-Height"]) == (
        str(rx), str(ry), "100", "80")
    assert (h["X-Screen-Width"], h["X-Screen-Height"]) == (str(SCREEN_W), str(SCREEN_H))
    for x in range(100):
        for y in range(0, 80, 3):
            assert image.getpixel((x, y)) == quadrant_colour(rx + x, ry + y), (x, y)
    assert image.getpixel((49, 39)) == TL and image.getpixel((50, 39)) == TR
    assert image.getpixel((49, 40)) == BL and image.getpixel((50, 40)) == BR


def test_scaled_region(api: httpx.Client, desk: str) -> None:
    params: Params = {"x": WIN_X, "y": WIN_Y, "width": WIN_W, "height": WIN_H, "scale": 0.5, "format": "png"}
    response = api.get("/v1/desktop/screenshot/region", params=params)
    image = decode(response)
    assert image.size == (WIN_W // 2, WIN_H // 2)
    for sx, sy in interior_points():
        assert image.getpixel(to_image(response, sx, sy)) == quadrant_colour(sx, sy)


@pytest.mark.parametrize(("x", "y", "width", "height"), [
    (WIN_X - 7, WIN_Y + 5, 37, 23),  # odd sizes across the window edge
    (SCREEN_W - 16, SCREEN_H - 9, 16, 9),  # touching the far edges is allowed
    (0, 0, 1, 1),
])
def test_region_equals_the_same_crop_of_the_full_screen(api: httpx.Client, desk: str, x: int, y: int, width: int,
                                                       height: int) -> None:
    full = decode(api.get("/v1/desktop/screenshot"))
    params = {"x": x, "y": y, "width": width, "height": height}
    region = decode(api.get("/v1/desktop/screenshot/region", params=params))
    assert region.size == (width, height)
    assert region.tobytes() == full.crop((x, y, x + width, y + height)).tobytes()


@pytest.mark.parametrize(("params", "fields"), [
    ({"x": 1000, "y": 700, "width": 100, "height": 100}, {"width", "height"}),
    ({"x": 1000, "y": 0, "width": 100, "height": 100}, {"width"}),
    ({"x": 0, "y": 768, "width": 10, "height": 10}, {"y"}),
    ({"x": 1024, "y": 0, "width": 1, "height": 1}, {"x"}),
])
def test_region_off_the_screen_is_400_with_the_screen_size(api: httpx.Client, desk: str, params: Params,
                                                          fields: set[str]) -> None:
    problem = assert_problem(api.get("/v1/desktop/screenshot/region", params=params), 400, "desktop_invalid_action")
    detail = str(problem["detail"])
    assert f"region {params['width']}x{params['height']} at ({params['x']},{params['y']})" in detail
    assert "exceeds the 1024x768 screen" in detail
    assert {e["field"] for e in problem["errors"]} == fields  # type: ignore[attr-defined]


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/v1/desktop/screenshot", {"format": "gif"}, "format"),
    ("/v1/desktop/screenshot", {"quality": 300}, "quality"),
    ("/v1/desktop/screenshot", {"quality": 0}, "quality"),
    ("/v1/desktop/screenshot", {"scale": 0}, "scale"),
    ("/v1/desktop/screenshot", {"scale": 1.5}, "scale"),
    ("/v1/desktop/screenshot", {"scale": "nan"}, "scale"),
    ("/v1/desktop/screenshot", {"showCursor": "maybe"}, "showCursor"),
    ("/v1/desktop/screenshot/region", {"y": 0, "width": 10, "height": 10}, "x"),
    ("/v1/desktop/screenshot/region", {"x": -1, "y": 0, "width": 10, "height": 10}, "x"),
    ("/v1/desktop/screenshot/region", {"x": 0, "y": 0, "width": 0, "height": 10}, "width"),
    ("/v1/desktop/screenshot/region", {"x": 0, "y": 0, "width": 10, "height": 10, "format": "bmp"}, "format"),
])
def test_bad_values_are_400_naming_the_field(api: httpx.Client, desk: str, path: str, params: Params,
                                             field: str) -> None:
    problem = assert_problem(api.get(path, params=params), 400, "desktop_invalid_action")
    assert [e["field"] for e in problem["errors"]] == [field], problem  # type: ignore[attr-defined]
    assert field in str(problem["detail"])


@pytest.mark.parametrize(("name", "scale"), [("showCursor", 1.0), ("show_cursor", 0.5), ("showCursor", 0.3)])
def test_cursor_mark_is_drawn_at_the_pointer_after_scaling(api: httpx.Client, desk: str, name: str,
                                                          scale: float) -> None:
    plain = api.get("/v1/desktop/screenshot", params={"scale": scale})
    marked = api.get("/v1/desktop/screenshot", params={"scale": scale, name: "true"})
    assert (marked.headers["X-Cursor-X"], marked.headers["X-Cursor-Y"]) == (str(POINTER[0]), str(POINTER[1]))
    without, with_mark = decode(plain), decode(marked)
    assert mark_centre(without)[2] == 0  # nothing red without the option
    ex, ey = to_image(marked, *POINTER)
    cx, cy, count = mark_centre(with_mark)
    assert count > 20 and abs(cx - ex) <= 1.5 and abs(cy - ey) <= 1.5, (cx, cy, ex, ey)
    # Nothing else changed: every difference lies around the pointer.
    diff = changed_pixels(without, with_mark)
    assert diff and all(abs(x - ex) <= 24 and abs(y - ey) <= 24 for x, y in diff)


def test_real_cursor_image_is_composited_at_the_hotspot(api: httpx.Client, desk: str) -> None:
    plain = decode(api.get("/v1/desktop/screenshot"))
    marked = decode(api.get("/v1/desktop/screenshot", params={"showCursor": "true"}))
    # The grab itself never contains the pointer...
    assert plain.getpixel(POINTER) == TL
    # ...and inside the ring, where the marker draws nothing, the cursor image does.
    inner = [(x, y) for x, y in changed_pixels(plain, marked) if (x - POINTER[0]) ** 2 + (y - POINTER[1]) ** 2 < 49]
    assert len(inner) >= 5, inner


def test_cursor_in_a_region_uses_region_coordinates(api: httpx.Client, desk: str) -> None:
    rx, ry = POINTER[0] - 60, POINTER[1] - 40
    params: Params = {"x": rx, "y": ry, "width": 160, "height": 120, "showCursor": "true"}
    response = api.get("/v1/desktop/screenshot/region", params=params)
    cx, cy, count = mark_centre(decode(response))
    assert count > 20 and abs(cx - 60) <= 1.5 and abs(cy - 40) <= 1.5, (cx, cy)
    scaled = api.get("/v1/desktop/screenshot/region", params={**params, "scale": 0.5})
    cx, cy, count = mark_centre(decode(scaled))
    ex, ey = to_image(scaled, *POINTER)
    assert count > 20 and abs(cx - ex) <= 1.5 and abs(cy - ey) <= 1.5, (cx, cy, ex, ey)


def test_cursor_outside_the_region_draws_nothing(api: httpx.Client, desk: str) -> None:
    params: Params = {"x": WIN_X + HALF_W + 20, "y": WIN_Y + HALF_H + 20, "width": 120, "height": 100}
    plain = api.get("/v1/desktop/screenshot/region", params=params)
    marked = api.get("/v1/desktop/screenshot/region", params={**params, "showCursor": "true"})
    assert decode(plain).tobytes() == decode(marked).tobytes()
    assert (marked.headers["X-Cursor-X"], marked.headers["X-Cursor-Y"]) == (str(POINTER[0]), str(POINTER[1]))
    # Just left of and above the region (where the reference still drew) nothing is drawn either.
    move_pointer(desk, int(params["x"]) - 3, int(params["y"]) - 3)
    try:
        near = api.get("/v1/desktop/screenshot/region", params={**params, "showCursor": "true"})
        assert decode(near).tobytes() == decode(plain).tobytes()
    finally:
        move_pointer(desk, *POINTER)


def test_every_shot_is_a_fresh_grab(api: httpx.Client, desk: str) -> None:
    params = {"x": WIN_X, "y": WIN_Y, "width": 20, "height": 20}
    assert decode(api.get("/v1/desktop/screenshot/region", params=params)).getpixel((5, 5)) == TL
    conn = display.Display(desk)
    try:
        screen = conn.screen()
        cover = screen.root.create_window(WIN_X, WIN_Y, 20, 20, 0, screen.root_depth, X.InputOutput,
                                          X.CopyFromParent, background_pixel=0x00FFFF, override_redirect=True)
        cover.map()
        conn.sync()
        assert decode(api.get("/v1/desktop/screenshot/region", params=params)).getpixel((5, 5)) == (0, 255, 255)
        cover.destroy()
        conn.sync()
        assert decode(api.get("/v1/desktop/screenshot/region", params=params)).getpixel((5, 5)) == TL
    finally:
        conn.close()


def test_concurrent_screenshots_all_succeed(srv: ServerProcess, desk: str) -> None:
    results: list[tuple[int, bytes]] = []

    def shoot(fmt: str) -> None:
        with srv.client() as client:
            for _ in range(3):
                response = client.get("/v1/desktop/screenshot/region",
                                      params={"x": WIN_X, "y": WIN_Y, "width": 50, "height": 50, "format": fmt})
                results.append((response.status_code, response.content[:4]))

    threads = [threading.Thread(target=shoot, args=(fmt,)) for fmt in ("png", "jpeg", "webp", "png", "jpeg", "webp")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 18 and all(status == 200 for status, _ in results), results


def test_screenshots_work_again_after_the_x_server_restarts(api: httpx.Client, desk: str) -> None:
    """Last in the module: it kills Xvfb (and with it the test window)."""
    assert decode(api.get("/v1/desktop/screenshot", params={"scale": 0.1})).size == (102, 77)
    os.kill(child_host_pid(api.get("/v1/desktop/status").json(), "Xvfb"), signal.SIGKILL)
    deadline = time.monotonic() + 20
    response = api.get("/v1/desktop/screenshot", params={"scale": 0.1})
    while response.status_code != 200 and time.monotonic() < deadline:
        assert response.status_code in (409, 502, 503), response.text
        time.sleep(0.1)
        response = api.get("/v1/desktop/screenshot", params={"scale": 0.1})
    image = decode(response)
    assert image.size == (102, 77)
    assert image.getpixel(to_image(response, *interior_points()[0])) != TL  # a new server: the window is gone
