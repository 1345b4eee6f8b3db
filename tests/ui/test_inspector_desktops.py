"""The inspector's desktops panel (/ui/, docs/inspector.md) in a real headless Chromium, against a real server.

The page creates, lists, selects, pauses, resumes and deletes desktops of `/v1/desktops` (docs/desktops.md); the
effects are checked through the API. Selecting a desktop must point the other panels at it: its screenshot has
the created desktop's size, which differs from the default desktop's. Same browser setup as tests/ui/test_inspector.py
(tests/support/inspector_fixtures.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, wait_for
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page
from tests.support.inspector_fixtures import click, click_at, fill, messages, text

pytestmark = shared.needs_chromium

DEFAULT_SIZE = (1024, 768)
CREATED_SIZE = (800, 600)
TAGS = {"agent": "a1", "team": "qa ops"}

# The shared fixtures (tests/support/inspector_fixtures.py), bound here so pytest finds them in this module.
network, srv, browser, page_url = shared.network, shared.srv, shared.browser, shared.page_url


@pytest.fixture(scope="module")
def default_desktop(api: httpx.Client) -> dict[str, Any]:
    started = api.post("/v1/desktop/start", json={"width": DEFAULT_SIZE[0], "height": DEFAULT_SIZE[1],
                                                   "displayNum": 287})
    assert started.status_code == 200 and started.json()["state"] == "active", started.text
    return dict(started.json())


@pytest.fixture(scope="module")
def page(browser: Browser, page_url: str, srv: ServerProcess, default_desktop: dict[str, Any]) -> Page:
    return browser.new_page(f"{page_url}#token={srv.token}&live=0")


@pytest.fixture(scope="module")
def created(api: httpx.Client) -> dict[str, Any]:
    """The desktop test_create_desktop_from_the_page made, as the API lists it."""
    found = api.get("/v1/desktops", params={"tag": "agent=a1"}).json()["desktops"]
    assert len(found) == 1, "test_create_desktop_from_the_page must run first"
    return dict(found[0])


def row(desktop_id: str, inside: str = "") -> str:
    """JS for the desktop's row in the list (or an element in it)."""
    return f"document.querySelector({json.dumps(f'#desktop-list [data-desktop-id={desktop_id!r}] {inside}'.strip())})"


def desktop_state(api: httpx.Client, desktop_id: str) -> str:
    return str(api.get(f"/v1/desktops/{desktop_id}").json()["state"])


def screenshot_size(page: Page) -> list[int]:
    page.evaluate("document.getElementById('screenshot-img').removeAttribute('src')")
    click(page, "screenshot-refresh")
    page.wait_for("(() => { const i = document.getElementById('screenshot-img');"
                  " return !i.hidden && i.complete && i.naturalWidth > 0; })()", "the screenshot")
    return list(page.evaluate("[document.getElementById('screenshot-img').naturalWidth,"
                              " document.getElementById('screenshot-img').naturalHeight]"))


def labels(page: Page) -> set[str]:
    """The desktop id every desktop panel's heading shows."""
    return set(page.evaluate("[...document.querySelectorAll('[data-selected-desktop]')].map(e => e.textContent)"))


# -- the list and the default desktop -----------------------------------------------------------

def test_the_default_desktop_is_listed_and_selected(page: Page, default_desktop: dict[str, Any]) -> None:
    page.wait_for(f"{row('default', '.badge')}?.dataset.state === 'active'", "the default desktop, active")
    cells = page.evaluate(f"[...{row('default')}.cells].map(c => c.textContent.trim())")
    assert cells[0] == "default" and cells[2] == default_desktop["display"], cells
    assert cells[3] == f"{DEFAULT_SIZE[0]} \N{MULTIPLICATION SIGN} {DEFAULT_SIZE[1]}", cells
    assert page.evaluate(f"{row('default', '[data-action=select]')}.getAttribute('aria-pressed')") == "true"
    assert page.evaluate(f"{row('default', '[data-action=delete]')}") is None  # stopped, never deleted
    assert labels(page) == {"default"} and page.evaluate("location.hash") == ""
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'active'", "the default status")
    assert screenshot_size(page) == list(DEFAULT_SIZE)


def test_bad_tags_are_refused_before_anything_is_created(page: Page, api: httpx.Client) -> None:
    fill(page, "create-tags", "agent=a1\nnovalue")
    click(page, "desktop-create")
    shown = page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                          ".find(t => t.startsWith('create desktop'))", "the tags error")
    assert 'line 2 ("novalue") is not key=value' in shown, shown
    fill(page, "create-tags", "")
    fill(page, "create-ttl", str(31 * 24 * 3600))  # over the server's limit (30 days), not the form's
    click(page, "desktop-create")
    page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                  ".some(t => t.startsWith('create desktop') && t.includes('(400)') && t.includes('ttlSeconds'))",
                  "the server's problem naming ttlSeconds")
    assert [d["id"] for d in api.get("/v1/desktops").json()["desktops"]] == ["default"]


# -- create, select, pause, resume, delete ------------------------------------------------------

def test_create_desktop_from_the_page(page: Page, api: httpx.Client) -> None:
    assert CREATED_SIZE != DEFAULT_SIZE
    fill(page, "create-width", str(CREATED_SIZE[0]))
    fill(page, "create-height", str(CREATED_SIZE[1]))
    fill(page, "create-tags", "\n".join(f"{k}={v}" for k, v in TAGS.items()) + "\n")
    fill(page, "create-ttl", "3600")
    fill(page, "create-idle", "600")
    fill(page, "create-on-idle", "pause")
    click(page, "desktop-create")
    new_id = page.wait_for("[...document.querySelectorAll('#desktop-list [data-desktop-id]')]"
                           ".map(r => r.dataset.desktopId).find(id => id !== 'default')", "the new desktop listed", 20)
    listed = api.get(f"/v1/desktops/{new_id}").json()
    assert listed["state"] == "active" and listed["tags"] == TAGS, listed
    assert (listed["resolution"]["width"], listed["resolution"]["height"]) == CREATED_SIZE
    assert listed["idleTimeoutSeconds"] == 600 and listed["onIdle"] == "pause" and listed["expiresAt"], listed
    page.wait_for(f"{row(new_id, '.badge')}?.dataset.state === 'active'", "the new desktop, active")
    cells = page.evaluate(f"[...{row(new_id)}.cells].map(c => c.textContent.trim())")
    assert cells[2] == listed["display"] and cells[3] == f"{CREATED_SIZE[0]} \N{MULTIPLICATION SIGN} {CREATED_SIZE[1]}"
    assert page.evaluate(f"[...{row(new_id)}.querySelectorAll('.tags code')].map(c => c.textContent)") == \
        [f"{k}={v}" for k, v in TAGS.items()]
    assert cells[5].startswith("in 59m") and "idle → pause in" in cells[5], cells  # TTL and idle countdowns
    assert any(new_id in m and listed["display"] in m for m in messages(page)), messages(page)
    assert not any(m.startswith("create desktop") for m in messages(page)), "a success clears the create errors"
    assert labels(page) == {"default"}, "creating a desktop does not change the one shown"


def test_selecting_a_desktop_points_the_panels_at_it(page: Page, created: dict[str, Any]) -> None:
    desktop_id = created["id"]
    click_at(page, row(desktop_id, "[data-action=select]"))
    page.wait_for(f"location.hash === '#desktop={desktop_id}'", "the selection in the address")
    assert labels(page) == {desktop_id}
    assert page.evaluate(f"{row(desktop_id)}.classList.contains('selected')")
    assert page.evaluate(f"{row('default', '[data-action=select]')}.getAttribute('aria-pressed')") == "false"
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'active'"
                  f" && document.getElementById('desktop-display').textContent === {created['display']!r}",
                  "the selected desktop's status")
    assert text(page, "desktop-resolution").startswith(f"{CREATED_SIZE[0]} \N{MULTIPLICATION SIGN} {CREATED_SIZE[1]}")
    page.wait_for("document.getElementById('recording-list').textContent.includes('No recordings.')",
                  "the selected desktop's (empty) recordings")
    assert not page.evaluate("document.getElementById('desktop-quiet').hidden"), "it has an idle timeout"
    assert screenshot_size(page) == list(CREATED_SIZE)  # its screenshot, not the default desktop's
    assert page.evaluate("document.getElementById('screenshot-img').dataset.desktopId") == desktop_id


def test_live_view_and_recordings_follow_the_selection(page: Page, api: httpx.Client,
                                                      created: dict[str, Any]) -> None:
    mine = f"/v1/desktops/{created['id']}"
    click(page, "live-connect")
    page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", "the WebRTC connection", 15)
    page.wait_for("document.getElementById('live-video').videoWidth > 0", "the first frame", 10)
    assert page.evaluate("[document.getElementById('live-video').videoWidth,"
                         " document.getElementById('live-video').videoHeight]") == list(CREATED_SIZE)
    assert api.get(f"{mine}/stream/status").json()["active"] is True
    assert api.get("/v1/desktop/stream/status").json()["active"] is False, "the default desktop streams nothing"
    click_at(page, row("default", "[data-action=select]"))  # another desktop: this viewer disconnects
    page.wait_for("document.getElementById('live-state').dataset.state === 'idle'", "the viewer disconnected")
    click_at(page, row(created["id"], "[data-action=select]"))
    page.wait_for(f"location.hash === '#desktop={created['id']}'", "the desktop selected again")
    click(page, "stream-stop")
    wait_for(lambda: api.get(f"{mine}/stream/status").json()["active"] is False, "the stream stopped")

    fill(page, "recording-fps", "10")
    click(page, "recording-start")
    rec_id = page.wait_for("document.querySelector('#recording-list [data-recording-id]')?.dataset.recordingId",
                           "the recording in the list")
    assert [r["id"] for r in api.get(f"{mine}/recordings").json()["recordings"]] == [rec_id]
    assert api.get("/v1/desktop/recordings").json()["recordings"] == []
    click(page, "recording-stop")
    wait_for(lambda: api.get(f"{mine}/recordings/{rec_id}").json()["status"] == "completed", "the recording done")


def test_the_selection_survives_a_reload(page: Page, created: dict[str, Any]) -> None:
    page.evaluate("window.beforeReload = true")
    page.call("Page.reload")
    page.wait_for("!window.beforeReload && document.readyState === 'complete'", "the reloaded page")
    assert page.evaluate("location.hash") == f"#desktop={created['id']}"
    page.wait_for(f"document.getElementById('desktop-display').textContent === {created['display']!r}",
                  "the selected desktop's status after the reload")
    assert labels(page) == {created["id"]}
    page.wait_for(f"{row(created['id'], '[data-action=select]')}?.getAttribute('aria-pressed') === 'true'",
                  "the selected row after the reload")
    assert messages(page) == [] and page.errors() == []


def test_watching_does_not_keep_an_idle_desktop_alive(page: Page, api: httpx.Client, created: dict[str, Any]) -> None:
    def last_activity() -> str:
        return str(api.get(f"/v1/desktops/{created['id']}").json()["lastActivityAt"])

    def settled() -> str | None:  # requests the page made earlier (the reload's) have all arrived
        first = last_activity()
        time.sleep(0.5)
        return first if last_activity() == first else None

    before = wait_for(settled, "no more requests to the desktop")
    # What the page's timers run (app.js), awaited here rather than waited for.
    page.evaluate("window.inspector.poll().then(() => window.inspector.refreshLists(true))")
    page.evaluate("window.inspector.poll()")
    assert last_activity() == before, "background polls must not count as activity for the idle timeout"
    click(page, "desktop-refresh")  # asking is activity
    wait_for(lambda: last_activity() != before, "the explicit refresh to reach the desktop")


def test_pause_and_resume_from_the_page(page: Page, api: httpx.Client, created: dict[str, Any]) -> None:
    desktop_id = created["id"]
    toggle = row(desktop_id, ".row-actions [data-action]")
    assert page.evaluate(f"{toggle}.dataset.action") == "pause"
    click_at(page, toggle)
    wait_for(lambda: desktop_state(api, desktop_id) == "paused", "the desktop paused")
    assert api.get("/v1/desktop/status").json()["state"] == "active", "only the selected desktop is paused"
    page.wait_for(f"{row(desktop_id, '.badge')}.dataset.state === 'paused' && {toggle}.dataset.action === 'resume'",
                  "the paused row with Resume")
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'paused'", "the paused status")
    click(page, "screenshot-refresh")  # a paused desktop refuses actions, and the page says so
    page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                  f".some(t => t.startsWith('screenshot of {desktop_id}') && t.includes('Desktop Paused (409)'))",
                  "the paused desktop's problem")
    click_at(page, toggle)
    wait_for(lambda: desktop_state(api, desktop_id) == "active", "the desktop resumed")
    page.wait_for(f"{row(desktop_id, '.badge')}.dataset.state === 'active' && {toggle}.dataset.action === 'pause'",
                  "the active row with Pause")
    assert screenshot_size(page) == list(CREATED_SIZE)
    assert not any(m.startswith(f"screenshot of {desktop_id}") for m in messages(page))


def test_stop_and_start_the_selected_desktop(page: Page, api: httpx.Client, created: dict[str, Any]) -> None:
    desktop_id = created["id"]
    click(page, "desktop-stop")
    wait_for(lambda: desktop_state(api, desktop_id) == "inactive", "the selected desktop stopped")
    assert api.get("/v1/desktop/status").json()["state"] == "active", "the default desktop keeps running"
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'inactive'", "the stopped status")
    page.wait_for(f"{row(desktop_id, '.badge')}.dataset.state === 'inactive'", "the stopped row")
    fill(page, "start-width", str(CREATED_SIZE[0]))
    fill(page, "start-height", str(CREATED_SIZE[1]))
    click(page, "desktop-start")
    wait_for(lambda: desktop_state(api, desktop_id) == "active", "the selected desktop started again")
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'active'", "the active status")
    assert screenshot_size(page) == list(CREATED_SIZE)


def test_delete_from_the_page(page: Page, api: httpx.Client, created: dict[str, Any]) -> None:
    desktop_id = created["id"]
    delete = row(desktop_id, "[data-action=delete]")
    click_at(page, delete)
    assert page.evaluate(f"{delete}.textContent") == "Confirm delete"  # the first click only asks
    assert desktop_state(api, desktop_id) == "active"
    click_at(page, delete)
    wait_for(lambda: desktop_state(api, desktop_id) == "deleted", "the desktop deleted")
    assert api.get(f"/v1/desktops/{desktop_id}").json()["endedReason"] == "deleted"
    page.wait_for(f"{row(desktop_id)} === null", "the row gone")
    # The page falls back to the default desktop, without a message: this page deleted it.
    page.wait_for("location.hash === ''", "the default desktop selected")
    assert labels(page) == {"default"}
    display = api.get("/v1/desktop/status").json()["display"]
    page.wait_for(f"document.getElementById('desktop-display').textContent === {display!r}",
                  "the default desktop's status")
    assert screenshot_size(page) == list(DEFAULT_SIZE)
    assert not any("showing the default desktop" in m for m in messages(page)), messages(page)


def test_a_desktop_gone_elsewhere_falls_back_to_the_default(page: Page, api: httpx.Client) -> None:
    other = api.post("/v1/desktops", json={"width": 640, "height": 480}).json()["id"]
    page.evaluate(f"location.hash = 'desktop={other}'")  # selecting by the address works too
    page.wait_for("document.getElementById('desktop-resolution').textContent"
                  ".startsWith('640 \N{MULTIPLICATION SIGN} 480')", "the desktop named in the address")
    assert api.delete(f"/v1/desktops/{other}").status_code == 204  # another client deletes it
    shown = page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                          ".find(t => t.includes('showing the default desktop'))", "the fallback message")
    assert shown == f"desktop {other}: deleted (deleted); showing the default desktop", shown
    assert labels(page) == {"default"} and page.evaluate("location.hash") == ""

    page.evaluate("location.hash = 'desktop=dsk_000000000000'")
    page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                  ".includes('desktop dsk_000000000000: no desktop with this id; showing the default desktop')",
                  "the unknown desktop's message")
    page.wait_for("location.hash === ''", "the default desktop again")
    assert labels(page) == {"default"} and page.errors() == []
