"""The inspector's "Fit to window" control (api/ui/display.js) in a real headless Chromium, against a real server.

The browser reaches the server over the private network of tests/support/browser.py (WebRTC in Chromium needs a
non-loopback interface). The effect is checked outside the page: the X server's own screen size, the API's
display info, and the size of the video the page decodes after the change.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from Xlib.display import Display

from tests.conftest import ServerProcess
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page, chromium_path
from tests.support.inspector_fixtures import click, messages

pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="chromium is not installed (apt-get install chromium): "
                                       "the inspector tests drive a real browser")

DISPLAY_NUM = 299
SIZE = (1024, 768)
PORTS = "59570-59579"

network, srv, browser, page_url = shared.network, shared.srv, shared.browser, shared.page_url


@pytest.fixture(scope="module")
def desktop(api: httpx.Client) -> Iterator[str]:
    started = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM, "width": SIZE[0], "height": SIZE[1],
                                                  "webrtcPortRange": PORTS})
    assert started.status_code == 200, started.text
    yield str(started.json()["display"])
    api.post("/v1/desktop/stop")


@pytest.fixture(scope="module")
def page(browser: Browser, page_url: str, srv: ServerProcess, desktop: str) -> Page:
    return browser.new_page(f"{page_url}#token={srv.token}&live=0")


def x_size(display: str) -> tuple[int, int]:
    conn = Display(display)
    try:
        geometry = conn.screen().root.get_geometry()
        return int(geometry.width), int(geometry.height)
    finally:
        conn.close()


def test_fit_size_is_even_and_within_the_limits(page: Page) -> None:
    fit = "(await import('./display.js')).fitSize"
    assert page.evaluate(f"(async () => {fit}({{width: 801.7, height: 500.2}}, 2560, 1600))()") == {
        "width": 800, "height": 500}
    assert page.evaluate(f"(async () => {fit}({{width: 3001, height: 10}}, 2560, 1600))()") == {
        "width": 2560, "height": 64}


def test_fit_to_window_resizes_the_desktop_to_the_video_area(page: Page, api: httpx.Client, desktop: str) -> None:
    page.wait_for("document.getElementById('live-fit') !== null", "the Fit to window button")
    click(page, "live-connect")
    page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", "the WebRTC connection", 20)
    page.wait_for(f"document.getElementById('live-video').videoWidth === {SIZE[0]}", "the first frames", 10)
    area = page.evaluate("(() => { const r = document.getElementById('live-video').parentElement"
                         ".getBoundingClientRect(); return [r.width, r.height]; })()")
    expected = (int(area[0]) // 2 * 2, int(area[1]) // 2 * 2)
    assert expected != SIZE
    click(page, "live-fit")
    page.wait_for("document.getElementById('live-fit').dataset.applied !== undefined", "the resize answered", 10)
    assert page.evaluate("document.getElementById('live-fit').dataset.applied") == f"{expected[0]}x{expected[1]}"
    assert not any(m.startswith("Fit to window") for m in messages(page)), messages(page)
    # The X server has it, the API reports it, and the page's video follows.
    assert x_size(desktop) == expected
    resolution = api.get("/v1/desktop/display/info").json()["resolution"]
    assert (resolution["width"], resolution["height"]) == expected
    page.wait_for(f"document.getElementById('live-video').videoWidth === {expected[0]}"
                  f" && document.getElementById('live-video').videoHeight === {expected[1]}",
                  "the video at the new size", 10)
    page.wait_for(f"document.getElementById('live-display').dataset.width === '{expected[0]}'", "the size shown")
    click(page, "live-disconnect")
    api.post("/v1/desktop/stream/stop")
