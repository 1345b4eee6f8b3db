"""Shared control and the clipboard in two real Chromium inspector pages (docs/control.md).

Alice's page uses the server token (an admin); Bob's a `control` scoped token. Both join as watchers, then
pass control with the page's own buttons; what each page shows is read from its DOM, and the effects are
checked outside the pages: the server's status, an agent's REST call (409 while a person holds control)
and the desktop's real clipboard (the REST API reads the X selection).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem, wait_for
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page
from tests.support.inspector_fixtures import click, fill, text

pytestmark = shared.needs_chromium

DESKTOP = {"displayNum": 618, "width": 800, "height": 600, "streamVideoCodec": "h264",
           "webrtcPortRange": "59561-59580"}

network, srv, page_url = shared.network, shared.srv, shared.page_url


@pytest.fixture(scope="module")
def browser(network: shared.PrivateNetwork, page_url: str) -> Iterator[Browser]:
    """The shared fixture's browser, treating the page's origin as secure: the browser reaches the server by a
    private address over plain HTTP, and the clipboard API exists only in secure contexts (https, localhost)."""
    parts = urlsplit(page_url)
    b = Browser.launch(netns=network.name,
                       extra=(f"--unsafely-treat-insecure-origin-as-secure={parts.scheme}://{parts.netloc}",))
    yield b
    b.close()


@pytest.fixture(scope="module")
def desktop(api: httpx.Client) -> Iterator[None]:
    started = api.post("/v1/desktop/start", json=DESKTOP).json()
    assert started.get("state") == "active", started
    yield
    api.post("/v1/desktop/stream/stop")
    api.post("/v1/desktop/stop")


def open_viewer(browser: Browser, page_url: str, token: str, name: str) -> Page:
    page = browser.new_page(f"{page_url}#token={token}&live=0")
    # Every page of the headless browser counts as focused: the clipboard API needs a focused document.
    page.call("Emulation.setFocusEmulationEnabled", {"enabled": True})
    fill(page, "live-name", name)
    click(page, "live-connect")
    page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", f"{name}'s connection", 20)
    return page


@pytest.fixture(scope="module")
def pages(browser: Browser, page_url: str, srv: ServerProcess, api: httpx.Client,
          desktop: None) -> Iterator[tuple[Page, Page]]:
    issued = api.post("/v1/desktops/default/tokens", json={"role": "control", "ttlSeconds": 600})
    assert issued.status_code == 201, issued.text
    assert srv.token
    alice = open_viewer(browser, page_url, srv.token, "alice")
    bob = open_viewer(browser, page_url, issued.json()["token"], "bob")
    yield alice, bob
    for page in (alice, bob):
        browser.devtools.call("Target.closeTarget", {"targetId": page.target})


def shows(page: Page, wanted: str, what: str) -> None:
    page.wait_for(f"document.getElementById('live-control').textContent === {json.dumps(wanted)}", what)


def roles(page: Page) -> dict[str, str]:
    return dict(page.evaluate("Object.fromEntries([...document.querySelectorAll('#live-viewers li')]"
                              ".map(li => [li.dataset.viewer, li.dataset.role]))"))


def visible(page: Page, element_id: str) -> bool:
    return not page.evaluate(f"document.getElementById({element_id!r}).closest('[hidden]') !== null")


def controller(api: httpx.Client) -> str | None:
    return api.get("/v1/desktop/stream/status").json().get("controller")


def test_two_inspectors_pass_control_with_their_buttons(pages: tuple[Page, Page], api: httpx.Client) -> None:
    alice, bob = pages
    for page in pages:
        shows(page, "Nobody has control: you watch", "both watching")
        page.wait_for("document.querySelectorAll('#live-viewers li').length === 2", "both viewers listed")
    assert roles(alice) == {"alice": "watcher", "bob": "watcher"}
    assert visible(bob, "live-request-control") and not visible(bob, "live-take-control")

    click(bob, "live-request-control")  # "Take control": bob holds the desktop at once
    shows(bob, "You have control (agent input is held off)", "bob in control")
    shows(alice, "bob has control (agent input is held off): your input is ignored", "alice told")
    assert roles(alice) == {"alice": "watcher", "bob": "controller"}
    refused = api.post("/v1/desktop/mouse/move", json={"x": 5, "y": 5})
    assert assert_problem(refused, 409, "desktop_controlled_by_viewer")["controller"] == "bob"

    # Bob gives control to Alice with "Give control to…".
    assert bob.evaluate("[...document.getElementById('live-give-to').options].map(o => o.value)") == ["alice"]
    click(bob, "live-give-control")
    shows(alice, "You have control (agent input is held off)", "alice given control")
    shows(bob, "alice has control (agent input is held off): your input is ignored", "bob told")
    click(alice, "live-release-control")
    shows(alice, "Nobody has control: you watch", "released")
    assert controller(api) is None
    assert api.post("/v1/desktop/mouse/move", json={"x": 6, "y": 6}).status_code == 200  # the agent again

    # Alice (an admin) takes control from Bob; her release hands it back to him.
    shows(bob, "Nobody has control: you watch", "bob told of the release")  # the page settled: nothing moves
    click(bob, "live-request-control")
    shows(alice, "bob has control (agent input is held off): your input is ignored", "bob in control again")
    alice.wait_for("!document.getElementById('live-take-control').hidden", "alice's Take button")
    assert text(alice, "live-take-control") == "Take control from bob"
    click(alice, "live-take-control")
    shows(alice, "You have control (agent input is held off)", "alice took control")
    assert controller(api) == "alice"
    click(alice, "live-release-control")
    shows(bob, "You have control", "control back with bob, who has not acted since")
    click(bob, "live-release-control")
    shows(bob, "Nobody has control: you watch", "bob released")


def test_clipboard_flows_both_ways_with_the_browser(pages: tuple[Page, Page], api: httpx.Client,
                                                    browser: Browser, page_url: str) -> None:
    alice, bob = pages
    parts = urlsplit(page_url)
    browser.devtools.call("Browser.grantPermissions", {
        "origin": f"{parts.scheme}://{parts.netloc}", "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    alice.evaluate("navigator.clipboard.writeText('')")
    click(alice, "live-clipboard-sync")
    click(alice, "live-request-control")
    shows(alice, "You have control (agent input is held off)", "alice in control")

    # Desktop → browser: copied on the desktop, in the browser's clipboard.
    copied = "copied on the desktop ✓"
    assert api.post("/v1/desktop/clipboard", json={"text": copied}).status_code == 200
    alice.wait_for(f"navigator.clipboard.readText().then(t => t === {json.dumps(copied)})",
                   "the desktop's text in the browser clipboard")

    # Browser → desktop: copied in the browser, on the desktop once the view has the focus again.
    pasted = "copied in the browser ✓"
    alice.evaluate(f"navigator.clipboard.writeText({json.dumps(pasted)})")
    alice.evaluate("document.getElementById('live-video').blur(); document.getElementById('live-video').focus()")
    wait_for(lambda: api.get("/v1/desktop/clipboard").json()["text"] == pasted, "the browser's text on the desktop")
    assert text(alice, "live-clipboard").startswith("clipboard synced")

    # A watcher gets nothing and sets nothing.
    assert not bob.evaluate("window.inspector.live.clipboardSync")
    click(alice, "live-release-control")
    shows(alice, "Nobody has control: you watch", "released")
