"""The inspector's wall (`/ui/#wall`, api/ui/wall.js, docs/inspector.md "Wall") in a real headless Chromium.

Eight small desktops (the default one and seven created) on one wall: every tile shows its desktop's picture, and a
window our own X client paints on one desktop shows in its tile's pixels (read back from the page's <img>); a desktop
created meanwhile gets a tile, and loses it when deleted, without a reload; an agent's
click held for approval shows on its desktop's tile and the wall's Approve releases it (the click reaches an X
client); clicking a tile opens that desktop's live view full size, where taking control lets a click reach an app
(and handing it back clears the controller);
a view-scoped token's wall shows its one desktop. Same browser setup as tests/ui/test_inspector.py
(tests/support/inspector_fixtures.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, wait_for
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page
from tests.support.colour_window import ColourWindow
from tests.support.inspector_fixtures import click_at, click_on_screen, messages
from tests.support.xprobe import Probe

pytestmark = shared.needs_chromium

SMALL = {"width": 320, "height": 240}
DESKTOPS = 8
PATCH = (60, 50, 200, 140)  # x, y, width, height of the painted window

# The shared fixtures (tests/support/inspector_fixtures.py), bound here so pytest finds them in this module.
network, srv, browser, page_url = shared.network, shared.srv, shared.browser, shared.page_url


@pytest.fixture(scope="module")
def desktops(api: httpx.Client) -> Iterator[list[dict[str, Any]]]:
    """The default desktop and seven created ones, all 320x240; the last holds pointer actions for approval."""
    started = api.post("/v1/desktop/start", json={**SMALL, "displayNum": 291})
    assert started.status_code == 200, started.text
    made = [{"id": "default", "display": started.json()["display"]}]
    for n in range(1, DESKTOPS):
        body: dict[str, Any] = {**SMALL, "tags": {"wall": str(n)}}
        if n == DESKTOPS - 1:
            body["approve"] = ["pointer"]
        response = api.post("/v1/desktops", json=body)
        assert response.status_code == 201, response.text
        made.append(response.json())
    yield made
    for desktop in made[1:]:
        api.delete(f"/v1/desktops/{desktop['id']}")


@pytest.fixture(scope="module")
def wall(browser: Browser, page_url: str, srv: ServerProcess, desktops: list[dict[str, Any]]) -> Page:
    page = browser.new_page(f"{page_url}#wall&token={srv.token}")
    page.wait_for(f"document.querySelectorAll('#wall-tiles .wall-tile').length === {DESKTOPS}", "eight tiles", 20)
    return page


def tile(desktop_id: str, inside: str = "") -> str:
    """JS for the desktop's tile (or an element in it)."""
    return f"document.querySelector({json.dumps(f'#wall-tiles [data-desktop-id={desktop_id!r}] {inside}'.strip())})"


def tile_colour(page: Page, desktop_id: str) -> list[int]:
    """The colour at the centre of PATCH in the tile's picture, as the page decoded it."""
    x, y, w, h = PATCH
    return list(page.evaluate(f"""(() => {{
        const img = {tile(desktop_id, 'img')};
        const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const d = g.getImageData(Math.floor({x + w / 2} * c.width / {SMALL['width']}),
                                 Math.floor({y + h / 2} * c.height / {SMALL['height']}), 1, 1).data;
        return [d[0], d[1], d[2]]; }})()"""))


def steady(page: Page, element: str) -> None:
    """Wait until the element keeps its place on the page for a moment (nothing above it grows any more)."""
    where = f"JSON.stringify(({element}).getBoundingClientRect())"
    previous = page.evaluate(where)
    for _ in range(50):
        time.sleep(0.3)
        now = page.evaluate(where)
        if now == previous:
            return
        previous = now
    raise AssertionError(f"{element} kept moving")


def near(rgb: list[int], wanted: tuple[int, int, int]) -> bool:
    return all(abs(a - b) < 48 for a, b in zip(rgb, wanted, strict=True))


def test_every_tile_shows_its_desktop_and_follows_it(wall: Page, desktops: list[dict[str, Any]]) -> None:
    for desktop in desktops:
        wall.wait_for(f"{tile(desktop['id'], 'img')}?.naturalWidth > 0", f"the picture of {desktop['id']}", 20)
        assert wall.evaluate(f"{tile(desktop['id'], '.badge')}.dataset.state") == "active"
    assert wall.evaluate(f"{tile(desktops[2]['id'], '.wall-tags')}.textContent") == "wall=2"
    assert wall.evaluate(f"{tile(desktops[2]['id'], 'img')}.naturalWidth") == SMALL["width"]
    painted = desktops[3]
    window = ColourWindow(painted["display"], PATCH, (255, 0, 0))
    try:
        for rgb in ((255, 0, 0), (0, 200, 0), (0, 0, 255)):
            window.fill(rgb)
            wait_for(lambda rgb=rgb: near(tile_colour(wall, painted["id"]), rgb), f"{rgb} in the painted tile")
        assert not near(tile_colour(wall, desktops[4]["id"]), (0, 0, 255))  # the other tiles show their own
    finally:
        window.close()


def test_desktops_created_and_deleted_come_and_go_without_a_reload(wall: Page, api: httpx.Client) -> None:
    created = api.post("/v1/desktops", json={**SMALL, "tags": {"late": "yes"}})
    assert created.status_code == 201, created.text
    new = created.json()["id"]
    try:
        wall.wait_for(f"{tile(new, 'img')}?.naturalWidth > 0", "the new desktop's tile and picture", 20)
        assert wall.evaluate(f"{tile(new, '.wall-tags')}.textContent") == "late=yes"
    finally:
        api.delete(f"/v1/desktops/{new}")
    wall.wait_for(f"!{tile(new)}", "the deleted desktop's tile gone")
    assert wall.evaluate("document.querySelectorAll('#wall-tiles .wall-tile').length") == DESKTOPS


def test_a_pending_approval_shows_on_its_tile_and_the_wall_approves_it(
        wall: Page, srv: ServerProcess, api: httpx.Client, desktops: list[dict[str, Any]], tmp_path: Path) -> None:
    held = desktops[-1]
    probe = Probe(held["display"], tmp_path / "probe.jsonl", "200x150+60+50")
    try:
        with srv.client(timeout=60) as agent, ThreadPoolExecutor(1) as pool:
            answer = pool.submit(agent.post, f"/v1/desktops/{held['id']}/mouse/click", json={"x": 160, "y": 120})
            item = tile(held["id"], ".wall-approval")
            wall.wait_for(f"!!{item}", "the pending click on its tile", 15)
            assert "left click at 160,120" in wall.evaluate(f"{item}.textContent")
            assert wall.evaluate(f"{tile(held['id'])}.dataset.approvals") == "1"
            assert probe.events("ButtonPress") == []
            click_at(wall, f"{item}.querySelector('[data-decision=approve]')")
            assert answer.result(30).status_code == 200
        press = wait_for(lambda: probe.events("ButtonPress"), "the approved click in the X client")[0]
        assert (press["rootX"], press["rootY"]) == (160, 120)
        wall.wait_for(f"!{item} && {tile(held['id'])}.dataset.approvals === '0'", "the tile without the approval")
        decided = api.get("/v1/approvals", params={"desktopId": held["id"]}).json()["approvals"][0]
        assert decided["status"] == "approved" and decided["decidedBy"] == "inspector wall"
    finally:
        probe.close()


def test_a_tile_opens_the_live_view_where_taking_control_reaches_an_app(
        browser: Browser, page_url: str, srv: ServerProcess, api: httpx.Client, desktops: list[dict[str, Any]],
        tmp_path: Path) -> None:
    chosen = desktops[5]
    probe = Probe(chosen["display"], tmp_path / "probe.jsonl", "240x180+40+30")
    page = browser.new_page(f"{page_url}#wall&token={srv.token}")
    try:
        page.wait_for(f"{tile(chosen['id'], 'img')}?.naturalWidth > 0", "the chosen desktop's picture", 20)
        click_at(page, tile(chosen["id"], ".wall-picture"))
        page.wait_for("document.getElementById('wall').hidden && !document.getElementById('live').hidden",
                      "the inspector instead of the wall")
        assert page.evaluate("document.querySelector('#live-title [data-selected-desktop]').textContent") \
            == chosen["id"]
        page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", "the live view", 20)
        page.wait_for("document.getElementById('live-video').videoWidth === 320", "the desktop's first frame", 15)
        click_at(page, "document.getElementById('live-request-control')")
        page.wait_for("document.getElementById('live-control').textContent.startsWith('You have control')",
                      "control of the desktop")
        video = "document.getElementById('live-video')"
        steady(page, video)  # the panels around it fill in as their first answers come
        click_on_screen(page, video, 100, 90)
        press = wait_for(lambda: probe.events("ButtonPress"), "the click in the X client")[0]
        assert (press["rootX"], press["rootY"]) == (100, 90), messages(page)
        click_at(page, "document.getElementById('live-release-control')")  # and hand it back
        page.wait_for("document.getElementById('live-control').textContent.startsWith('Nobody has control')",
                      "control handed back")
        wait_for(lambda: api.get(f"/v1/desktops/{chosen['id']}/stream/status").json().get("controller") is None,
                 "no controller in the stream's status")
    finally:
        page.evaluate("window.inspector.live.disconnect()")
        probe.close()
        api.post(f"/v1/desktops/{chosen['id']}/stream/stop")


def test_a_view_scoped_tokens_wall_shows_its_desktop_only(browser: Browser, page_url: str, api: httpx.Client,
                                                          desktops: list[dict[str, Any]]) -> None:
    mine = desktops[2]["id"]
    issued = api.post(f"/v1/desktops/{mine}/tokens", json={"role": "view", "ttlSeconds": 600})
    assert issued.status_code == 201, issued.text
    page = browser.new_page(f"{page_url}#wall&token={issued.json()['token']}")
    page.wait_for(f"{tile(mine, 'img')}?.naturalWidth > 0", "the scoped desktop's picture", 20)
    assert page.evaluate("[...document.querySelectorAll('#wall-tiles .wall-tile')].map(t => t.dataset.desktopId)") \
        == [mine]
    assert f"sees desktop {mine} only" in page.evaluate("document.getElementById('wall-state').textContent")
    # The inspector's panels rest under the wall: nothing asked the desktops list, which this token may not read.
    assert messages(page) == [] and page.evaluate("document.getElementById('desktops').offsetParent === null")
