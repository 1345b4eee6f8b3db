"""What the inspector tests share: a private network, a server the browser may reach, the browser, the page's
address and a few helpers for driving the page.

The browser runs in a network namespace of its own, joined to this one by a veth pair with two private addresses
(tests/support/browser.py): WebRTC in Chromium needs a non-loopback interface, and this one leads nowhere but to the
server's end of the pair. The page is reached through a forwarder on that end. A test module imports the
fixtures it uses by name; each module then gets its own (they are module-scoped).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ServerProcess, launch_server
from tests.support.browser import Browser, Forwarder, Page, PrivateNetwork, chromium_path

needs_chromium = pytest.mark.skipif(chromium_path() is None,
                                    reason="chromium is not installed (apt-get install chromium): "
                                           "the inspector tests drive a real browser")


@pytest.fixture(scope="module")
def network() -> Iterator[PrivateNetwork]:
    with PrivateNetwork.create() as net:
        yield net


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, network: PrivateNetwork) -> Iterator[ServerProcess]:
    """conftest's `srv`, answering also to the address the browser reaches it by (the forwarder's)."""
    server = launch_server(tmp_path_factory.mktemp("inspector"), "--allowed-host", network.outer)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(network: PrivateNetwork) -> Iterator[Browser]:
    b = Browser.launch(netns=network.name)
    yield b
    b.close()


@pytest.fixture(scope="module")
def page_url(srv: ServerProcess, network: PrivateNetwork) -> Iterator[str]:
    """The inspector's address as the browser sees it: the forwarder on our end of the pair."""
    port = urlsplit(srv.url).port
    assert port is not None
    served = httpx.get(f"{srv.url}/ui/", timeout=10).status_code
    assert served == 200, f"GET /ui/ answered {served}: api/app.py must mount api.routes.ui.ROUTES"
    forwarder = Forwarder(network.outer, ("127.0.0.1", port))
    host, fport = forwarder.address
    yield f"http://{host}:{fport}/ui/"
    forwarder.close()


def text(page: Page, element_id: str) -> str:
    return str(page.evaluate(f"document.getElementById({element_id!r}).textContent.trim()"))


def click(page: Page, element_id: str) -> None:
    """A real click on the centre of an element."""
    click_at(page, f"document.getElementById({element_id!r})")


CLICK_ATTEMPTS = 3


def click_at(page: Page, element: str) -> None:
    """A real click on the centre of the element a JS expression finds (it must find one), once it is enabled:
    a button stays disabled while its previous action runs, and a click on it then would be lost.

    The page may move between finding the centre and the click landing (the desktop panel above the live
    view re-renders every 2 s, and a longer process list pushes everything below it down): a click the element
    did not get, because only the page around it was there, is sent again at its new place."""
    page.wait_for(f"!({element}).disabled", "the element to be enabled")
    for _ in range(CLICK_ATTEMPTS):
        box = page.evaluate(f"(() => {{ const e = {element}; window.__clicked = false;"
                            " e.addEventListener('click', () => { window.__clicked = true; }, {once: true});"
                            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                            " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        page.click(*box)
        if page.evaluate("window.__clicked"):
            return
    raise AssertionError(f"{element} got none of {CLICK_ATTEMPTS} clicks at its centre")


def click_on_screen(page: Page, element: str, x: int, y: int) -> None:
    """A trusted click where screen pixel (x, y) is drawn in the live view's letterboxed picture (object-fit:
    contain): the <video> of WebRTC or the <canvas> of the WebSocket transport, as a JS expression finds it."""
    box = page.evaluate(f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'center'}});"
                        " const r = e.getBoundingClientRect();"
                        " return {left: r.left, top: r.top, width: r.width, height: r.height,"
                        " w: e.videoWidth ?? e.width, h: e.videoHeight ?? e.height}; })()")
    scale = min(box["width"] / box["w"], box["height"] / box["h"])
    left = box["left"] + (box["width"] - box["w"] * scale) / 2
    top = box["top"] + (box["height"] - box["h"] * scale) / 2
    page.click(left + (x + 0.5) * scale, top + (y + 0.5) * scale)


def fill(page: Page, element_id: str, value: str) -> None:
    page.evaluate(f"document.getElementById({element_id!r}).value = {json.dumps(value)}")


def messages(page: Page) -> list[str]:
    return list(page.evaluate("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"))
