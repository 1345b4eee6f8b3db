"""Window screenshots (XComposite) and the `window` coordinate space of batches, against a real Xvfb.

The window's pixels are known (tests/support/window_app.py paints `pattern`), so a capture is compared with
what the application drew, pixel for pixel, uncovered, covered, partly off the screen and framed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageChops

from desktop.input.coordinates import Area, CoordinateSpace
from tests.conftest import assert_problem, wait_for
from tests.support.window_app import WindowApp, pattern

DESKTOP = {"displayNum": 515, "width": 1280, "height": 800}

Opener = Callable[..., tuple[WindowApp, dict[str, Any]]]


def listed(api: httpx.Client, title: str, **query: Any) -> dict[str, Any] | None:
    windows = api.get("/v1/desktop/windows", params=query).json()["windows"]
    return next((w for w in windows if w["title"] == title), None)


@pytest.fixture
def open_window(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[Opener]:
    """Start window apps; each is listed and painted when returned, and killed after the test."""
    apps: list[WindowApp] = []

    def start(title: str, geometry: str, **kwargs: Any) -> tuple[WindowApp, dict[str, Any]]:
        app = WindowApp(display, tmp_path / f"{title}.jsonl", title, geometry, **kwargs)
        apps.append(app)
        window = wait_for(lambda: listed(api, title), f"the {title} window")
        assert app.wait_for(lambda e: e["type"] == "Expose"), "the window was never painted"
        return app, window

    yield start
    for app in apps:
        app.close()


def capture(api: httpx.Client, wid: str, **query: Any) -> tuple[Image.Image, httpx.Response]:
    response = api.get(f"/v1/desktop/windows/{wid}/screenshot", params=query)
    assert response.status_code == 200, response.text
    return Image.open(io.BytesIO(response.content)).convert("RGB"), response


def same(a: Image.Image, b: Image.Image) -> bool:
    return a.size == b.size and ImageChops.difference(a, b).getbbox() is None


def settled_capture(api: httpx.Client, wid: str, expected: Image.Image) -> Image.Image:
    """The capture once it shows `expected` (an application repaints asynchronously), else the last one."""
    last: list[Image.Image] = []

    def check() -> bool:
        last[:] = [capture(api, wid)[0]]
        return same(last[0], expected)

    with contextlib.suppress(AssertionError):
        wait_for(check, "the capture to show the window's pixels", timeout=3)
    return last[0]


def test_capture_is_the_client_area_pixel_for_pixel(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("plain", "400x300+120+110")
    image, response = capture(api, window["id"])
    assert image.size == (window["width"], window["height"]) == (400, 300)
    assert same(image, pattern(400, 300))
    headers = response.headers
    assert response.headers["content-type"] == "image/png"
    assert (int(headers["X-Window-X"]), int(headers["X-Window-Y"])) == (window["x"], window["y"])
    assert (headers["X-Window-Id"], headers["X-Window-Frame"]) == (window["id"], "false")
    assert (int(headers["X-Image-Width"]), int(headers["X-Region-X"])) == (400, window["x"])
    # What the screen shows of the uncovered window is the same picture.
    region = api.get("/v1/desktop/screenshot/region", params={"x": window["x"], "y": window["y"],
                                                              "width": 400, "height": 300})
    assert same(Image.open(io.BytesIO(region.content)).convert("RGB"), image)


def test_covered_window_capture_matches_it_uncovered(api: httpx.Client, open_window: Opener) -> None:
    _a, below = open_window("below", "400x300+100+100")
    uncovered, _ = capture(api, below["id"])
    assert same(uncovered, pattern(400, 300))
    _b, above = open_window("above", "300x200+250+200", seed=100)
    # The screen shows the covering window over `below`: the cover is real.
    overlap = api.get("/v1/desktop/screenshot/region", params={"x": above["x"], "y": above["y"], "width": 100,
                                                               "height": 80})
    on_screen = Image.open(io.BytesIO(overlap.content)).convert("RGB")
    assert same(on_screen, pattern(300, 200, 100).crop((0, 0, 100, 80)))
    assert above["x"] < below["x"] + below["width"] and above["y"] < below["y"] + below["height"]
    covered, _ = capture(api, below["id"])
    assert same(covered, uncovered)


def test_frame_capture_holds_the_decorations_and_the_client(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("framed", "320x240+200+150")
    image, response = capture(api, window["id"], frame="true")
    frame = window["frame"]
    assert image.size == (frame["width"], frame["height"])
    assert (int(response.headers["X-Window-X"]), int(response.headers["X-Window-Y"])) == (frame["x"], frame["y"])
    assert response.headers["X-Window-Frame"] == "true"
    left, top = window["x"] - frame["x"], window["y"] - frame["y"]
    assert top > 0  # openbox's title bar
    assert same(image.crop((left, top, left + 320, top + 240)), pattern(320, 240))


def test_window_partly_off_screen_is_captured_whole(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("offscreen", "300x200+100+100")
    moved = api.post(f"/v1/desktop/windows/{window['id']}/move", json={"x": -120, "y": 680}).json()
    assert (moved["x"], moved["y"]) == (-120, 680)
    image = settled_capture(api, window["id"], pattern(300, 200))
    assert same(image, pattern(300, 200))


def test_scale_and_formats_follow_the_screenshot_options(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("scaled", "400x300+150+150")
    image, response = capture(api, window["id"], scale=0.5)
    assert image.size == (200, 150) and response.headers["X-Scale"] == "0.5"
    for fmt, media in (("jpeg", "image/jpeg"), ("webp", "image/webp")):
        image, response = capture(api, window["id"], format=fmt, quality=60)
        assert response.headers["content-type"] == media and image.size == (400, 300)
    problem = assert_problem(api.get(f"/v1/desktop/windows/{window['id']}/screenshot", params={"scale": 0}), 400)
    assert problem["errors"][0]["field"] == "scale"  # type: ignore[index]


def test_unknown_and_minimised_windows(api: httpx.Client, open_window: Opener) -> None:
    assert_problem(api.get("/v1/desktop/windows/12345/screenshot"), 404, "window_not_found")
    assert_problem(api.get("/v1/desktop/windows/nope/screenshot"), 404, "window_not_found")
    _app, window = open_window("iconic", "300x200+300+300")
    assert api.post(f"/v1/desktop/windows/{window['id']}/minimize").json()["minimized"] is True
    problem = assert_problem(api.get(f"/v1/desktop/windows/{window['id']}/screenshot"), 409, "window_not_viewable")
    assert problem["windowState"] == "minimized" and problem["windowId"] == window["id"]
    assert "restore" in str(problem["detail"])
    api.post(f"/v1/desktop/windows/{window['id']}/restore")
    assert same(settled_capture(api, window["id"], pattern(300, 200)), pattern(300, 200))


# -- the `window` coordinate space of batches -------------------------------------------------------

def batch(api: httpx.Client, wid: str | None, actions: list[dict[str, Any]], **coordinates: Any) -> httpx.Response:
    space: dict[str, Any] = {"space": "window", **coordinates}
    if wid is not None:
        space["windowId"] = wid
    return api.post("/v1/desktop/actions", json={"actions": actions, "coordinates": space})


def test_a_click_in_window_space_lands_on_that_window_pixel(api: httpx.Client, open_window: Opener) -> None:
    app, window = open_window("target", "400x300+210+160")
    body = batch(api, window["id"], [{"type": "click", "x": 37, "y": 251}]).json()
    assert body["coordinates"]["space"] == "window" and body["coordinates"]["width"] == 400
    assert (body["results"][0]["x"], body["results"][0]["y"]) == (37, 251)  # answered in the window's space
    press = app.wait_for(lambda e: e["type"] == "ButtonPress")
    assert press and (press[0]["x"], press[0]["y"]) == (37, 251)
    assert (press[0]["rootX"], press[0]["rootY"]) == (window["x"] + 37, window["y"] + 251)
    # The capture's pixel (37, 251) is what the application drew there.
    image, _ = capture(api, window["id"])
    assert image.getpixel((37, 251)) == pattern(400, 300).getpixel((37, 251))


def test_zoom_in_window_space_shows_that_part_of_the_window(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("zoomed", "400x300+150+150")
    response = batch(api, window["id"], [{"type": "zoom", "region": {"x": 40, "y": 30, "width": 100, "height": 80}}])
    result = response.json()["results"][0]
    image = Image.open(io.BytesIO(base64.b64decode(result["image"]["data"]))).convert("RGB")
    assert same(image, pattern(400, 300).crop((40, 30, 140, 110)))
    assert result["image"]["frame"]["region"] == {"x": window["x"] + 40, "y": window["y"] + 30, "width": 100,
                                                  "height": 80}


def test_window_space_mistakes_name_the_field(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("bounds", "200x100+400+400")
    problem = assert_problem(batch(api, window["id"], [{"type": "click", "x": 200, "y": 5}]), 400)
    assert problem["errors"][0]["field"] == "actions[0].x"  # type: ignore[index]
    problem = assert_problem(batch(api, window["id"], [{"type": "move", "x": 5, "y": 100}]), 400)
    assert problem["errors"][0]["field"] == "actions[0].y"  # type: ignore[index]
    problem = assert_problem(batch(api, None, [{"type": "click", "x": 1, "y": 1}]), 400)
    assert problem["errors"][0]["field"] == "coordinates.windowId"  # type: ignore[index]
    problem = assert_problem(batch(api, "999999", [{"type": "click", "x": 1, "y": 1}]), 404, "window_not_found")
    documented = api.get("/v1/openapi.json").json()["paths"]["/v1/desktop/actions"]["post"]["responses"]
    assert "404" in documented, "the API document lists the 404 a batch answers"
    problem = assert_problem(api.post("/v1/desktop/actions", json={
        "actions": [{"type": "click", "x": 1, "y": 1}], "coordinates": {"space": "screen", "windowId": window["id"]}}),
        400)
    assert problem["errors"][0]["field"] == "coordinates.windowId"  # type: ignore[index]


def test_screen_change_events_still_come_with_windows_redirected(api: httpx.Client, open_window: Opener) -> None:
    """Redirection moves drawing into off-screen pixmaps; the X server's compositing must still damage the root."""
    _app, window = open_window("redirected", "300x200+100+100")
    capture(api, window["id"])  # redirection is on from here
    region = {"x": 700, "y": 400, "width": 200, "height": 150}
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(api.post, "/v1/desktop/wait", json={
            "screen": {"until": "changed", "region": region}, "timeoutMs": 8000})
        time.sleep(0.3)
        open_window("drawn", "250x180+680+380")
        body = waiting.result(timeout=15).json()
    assert body["matched"] is True, body


def test_a_window_covered_before_redirection_comes_back_whole(server_factory: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    """On a fresh server nothing is redirected until the first capture: the covered part of a window is
    then repainted by its application (the X server sends it Expose), and the capture shows it whole."""
    server = server_factory()
    with server.client() as fresh:
        started = fresh.post("/v1/desktop/start", json={"displayNum": 530, "width": 1024, "height": 768})
        display = started.json()["display"]
        apps = [WindowApp(display, tmp_path / "a.jsonl", "early", "400x300+100+100"),
                WindowApp(display, tmp_path / "b.jsonl", "cover", "300x200+250+200", seed=100)]
        try:
            early = wait_for(lambda: listed(fresh, "early"), "the early window")
            wait_for(lambda: listed(fresh, "cover"), "the covering window")
            assert apps[1].wait_for(lambda e: e["type"] == "Expose")
            assert same(settled_capture(fresh, early["id"], pattern(400, 300)), pattern(400, 300))
        finally:
            for app in apps:
                app.close()
            fresh.post("/v1/desktop/stop")


def test_window_space_arithmetic() -> None:
    window = Area(100, 50, 400, 300)
    space = CoordinateSpace.window(1280, 800, window)
    assert (space.width, space.height, space.max_x, space.max_y) == (400, 300, 399, 299)
    assert space.to_screen(0, 0) == (100, 50) and space.to_screen(399, 299) == (499, 349)
    assert space.from_screen(137, 301) == (37, 251)
    half = CoordinateSpace.window(1280, 800, window, 200, 150)  # a capture at scale 0.5
    for x, y in ((0, 0), (57, 149), (199, 3)):
        assert half.from_screen(*half.to_screen(x, y)) == (x, y)
    off = CoordinateSpace.window(1280, 800, Area(-120, 700, 300, 200))
    assert not off.on_screen(*off.to_screen(5, 5)) and off.on_screen(*off.to_screen(150, 50))
    assert off.rect_to_screen(0, 0, 300, 200) == (0, 700, 180, 100)  # cut to the screen
