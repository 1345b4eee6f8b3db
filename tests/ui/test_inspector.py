"""The inspector page (/ui/) in a real headless Chromium, against a real server.

The browser runs in a network namespace of its own, joined to this one by a veth pair with two
private addresses (tests/support/browser.py): WebRTC in Chromium needs a non-loopback interface, and
this one leads nowhere but to the server's end of the pair. The page is reached through a
forwarder on that end. Effects are checked outside the page: the API's own answers, and a
separate X client (tests/support/xprobe.py) that records the input it receives.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, wait_for
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page, chromium_path
from tests.support.inspector_fixtures import click, click_on_screen, fill, messages, text
from tests.support.xprobe import Probe

pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="chromium is not installed (apt-get install chromium): "
                                       "the inspector tests drive a real browser")

DISPLAY_NUM = 285
SIZE = (1024, 768)


# -- fixtures and helpers ------------------------------------------------------------------------

# The shared fixtures (tests/support/inspector_fixtures.py), bound here so pytest finds them in this module.
network, srv, browser, page_url = shared.network, shared.srv, shared.browser, shared.page_url


@pytest.fixture(scope="module")
def page(browser: Browser, page_url: str, srv: ServerProcess) -> Page:
    return browser.new_page(f"{page_url}#token={srv.token}&live=0")


def streaming_available(api: httpx.Client) -> bool:
    return api.get("/v1/desktop/stream/status").status_code == 200


@pytest.fixture(scope="module")
def desktop_display(api: httpx.Client) -> str:
    status = api.get("/v1/desktop/status").json()
    assert status["state"] == "active", "test_start_desktop_from_the_page must run first"
    return str(status["display"])


# -- the page itself -----------------------------------------------------------------------------

def test_page_is_served_without_the_token(srv: ServerProcess) -> None:
    with httpx.Client(base_url=srv.url) as anonymous:
        redirect = anonymous.get("/ui")
        assert redirect.status_code == 307 and redirect.headers["location"] == "/ui/"
        index = anonymous.get("/ui/")
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in index.text
        assert "default-src 'self'" in index.headers["content-security-policy"]
        for name in ("app.js", "api.js", "stream.js", "input.js", "socket_media.js", "viewer.js"):
            script = anonymous.get(f"/ui/{name}")
            assert script.status_code == 200 and "javascript" in script.headers["content-type"], name
        assert anonymous.get("/ui/style.css").headers["content-type"].startswith("text/css")
        assert "<sandbox-desktop-view" in anonymous.get("/ui/embed.html").text  # the embeddable live view, full page
        assert anonymous.get("/ui/missing.js").status_code == 404
        assert anonymous.get("/v1/desktop/status").status_code == 401  # the data stays behind the token


def test_token_from_the_address_is_used_and_hidden(page: Page, srv: ServerProcess) -> None:
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'inactive'",
                  "the page to show the inactive desktop (a status fetched with the token)")
    assert page.evaluate("location.hash") == ""  # the token and `live` are taken out of the address
    assert page.evaluate("sessionStorage.getItem('sandbox-desktop.token')") == srv.token
    assert text(page, "desktop-missing") == "none"
    assert messages(page) == []


def test_a_problem_from_the_api_is_shown(page: Page, api: httpx.Client) -> None:
    fill(page, "start-width", "10")
    click(page, "desktop-start")
    shown = page.wait_for("[...document.querySelectorAll('#messages li .text')].map(e => e.textContent)"
                          ".find(t => t.startsWith('start desktop'))", "the start error")
    assert "Desktop Invalid Action (400)" in shown and "width" in shown, shown
    assert api.get("/v1/desktop/status").json()["state"] == "inactive"


def test_start_desktop_from_the_page(page: Page, api: httpx.Client) -> None:
    fill(page, "start-width", str(SIZE[0]))
    fill(page, "start-height", str(SIZE[1]))
    fill(page, "start-display", str(DISPLAY_NUM))
    click(page, "desktop-start")
    page.wait_for("document.getElementById('desktop-state').dataset.state === 'active'", "the active state", 20)
    status = api.get("/v1/desktop/status").json()
    assert status["state"] == "active"
    assert (status["resolution"]["width"], status["resolution"]["height"]) == SIZE
    assert text(page, "desktop-display") == status["display"]
    assert text(page, "desktop-resolution").startswith(f"{SIZE[0]} \N{MULTIPLICATION SIGN} {SIZE[1]}")
    assert text(page, "desktop-restarts") == "0"
    assert not any(m.startswith("start desktop") for m in messages(page)), "a success clears the start error"
    shown = text(page, "desktop-processes")
    for process in status["processes"]:
        if process["name"] in ("Xvfb", "openbox"):
            assert f"{process['name']} running pid {process['pid']}" in shown, shown
    page.wait_for("/\\d+s/.test(document.getElementById('desktop-uptime').textContent)", "the uptime")


def test_screenshot_is_shown(page: Page, desktop_display: str) -> None:
    click(page, "screenshot-refresh")
    page.wait_for("(() => { const i = document.getElementById('screenshot-img');"
                  " return !i.hidden && i.complete && i.naturalWidth > 0; })()", "the screenshot")
    assert page.evaluate("[document.getElementById('screenshot-img').naturalWidth,"
                         " document.getElementById('screenshot-img').naturalHeight]") == list(SIZE)
    assert page.evaluate("document.getElementById('screenshot-img').src").startswith("blob:")
    assert "image/png" in text(page, "screenshot-info")


def test_processes_are_listed_with_their_log_tails(page: Page, api: httpx.Client, desktop_display: str) -> None:
    marker = f"inspector-log-{time.monotonic_ns()}"
    script = f"echo {marker}; echo ünïcode; sleep 60"
    created = api.post("/v1/processes", json={"command": "sh", "args": ["-c", script]})
    assert created.status_code == 200, created.text
    proc_id = created.json()["id"]
    try:
        wait_for(lambda: api.get(f"/v1/processes/{proc_id}/logs").json()["entries"], "the process's output")
        click(page, "processes-refresh")
        log = page.wait_for(f"document.querySelector('[data-process-id=\"{proc_id}\"] pre.log')?.textContent",
                            "the new process's log tail")
        assert marker in log and "ünïcode" in log, log  # base64 decoded as UTF-8
        listed = {p["command"]: p for p in api.get("/v1/processes").json()["processes"] if p["status"] == "running"}
        for command in ("Xvfb", "openbox"):
            item = page.evaluate(f"document.querySelector('[data-command=\"{command}\"]')?.innerText")
            assert item and f"pid {listed[command]['pid']}" in item and listed[command]["id"] in item, item
            assert page.evaluate(f"!!document.querySelector('[data-command=\"{command}\"] pre.log')")
    finally:
        api.post(f"/v1/processes/{proc_id}/kill")


# -- the live view -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def live(page: Page, api: httpx.Client, desktop_display: str) -> Iterator[dict[str, float]]:
    """The page's live view, connected; yields its timings (ms since Connect was clicked)."""
    if not streaming_available(api):
        pytest.skip("the server has no /v1/desktop/stream routes yet")
    click(page, "live-connect")
    page.wait_for("document.getElementById('live-state').dataset.state === 'connected'", "the WebRTC connection", 15)
    page.wait_for("document.getElementById('live-video').videoWidth > 0"
                  " && window.inspector.live.timings.firstFrame !== undefined", "the first presented frame", 10)
    timings = page.evaluate("(() => { const t = window.inspector.live.timings;"
                            " return {connected: t.connected - t.start, firstFrame: t.firstFrame - t.start}; })()")
    print(f"\ninspector live view: connected {timings['connected']:.0f} ms and first frame "
          f"{timings['firstFrame']:.0f} ms after Connect")
    yield timings
    click(page, "live-disconnect")
    api.post("/v1/desktop/stream/stop")


@pytest.fixture
def probe(desktop_display: str, tmp_path: Path) -> Iterator[Probe]:
    p = Probe(desktop_display, tmp_path / "events.jsonl", "360x260+300+200", override_redirect=False,
              title="inspector-probe")
    yield p
    p.close()


def probe_window(api: httpx.Client) -> dict[str, Any]:
    return dict(wait_for(lambda: next((w for w in api.get("/v1/desktop/windows").json()["windows"]
                                       if w["title"] == "inspector-probe"), None), "the probe in the window list"))


def test_live_view_connects_and_decodes_frames(page: Page, live: dict[str, float], probe: Probe,
                                               api: httpx.Client) -> None:
    state = page.evaluate("window.inspector.live.pc.connectionState")
    assert state == "connected"
    assert page.evaluate("[document.getElementById('live-video').videoWidth,"
                         " document.getElementById('live-video').videoHeight]") == list(SIZE)
    decoded = "document.getElementById('live-video').getVideoPlaybackQuality().totalVideoFrames"
    before = page.evaluate(decoded)
    assert before > 0
    probe_window(api)  # the probe window appearing changes the picture: new frames must follow
    page.wait_for(f"{decoded} > {before}", "more decoded frames after the screen changed", 10)
    page.wait_for("window.inspector.live.channel?.readyState === 'open'", "the input data channel")
    page.wait_for("window.inspector.live.stats.rttMs !== null", "a ping answered over the data channel", 6)
    # The inspector joins as a watcher (docs/control.md) and takes control only when asked to.
    assert text(page, "live-control") == "Nobody has control: you watch"
    click(page, "live-request-control")
    # control/host and control/takeover are two messages: the page shows the first before the second arrives.
    page.wait_for("document.getElementById('live-control').textContent.trim()"
                  " === 'You have control (agent input is held off)'", "control, holding the desktop")


def test_click_and_key_on_the_video_reach_an_x_client(page: Page, live: dict[str, float], probe: Probe,
                                                      api: httpx.Client) -> None:
    window = probe_window(api)
    target = (window["x"] + window["width"] // 3, window["y"] + window["height"] // 2)
    click_on_screen(page, "document.getElementById('live-video')", *target)
    press = wait_for(lambda: probe.events("ButtonPress"), "the click in the X client")[0]
    assert press["button"] == 1
    assert abs(press["rootX"] - target[0]) <= 1 and abs(press["rootY"] - target[1]) <= 1, (press, target)
    wait_for(lambda: probe.events("ButtonRelease"), "the button release")
    assert page.evaluate("document.activeElement.id") == "live-video"  # clicking the view gives it the keyboard

    page.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "q", "code": "KeyQ", "text": "q",
                                         "windowsVirtualKeyCode": 81})
    page.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": "q", "code": "KeyQ", "windowsVirtualKeyCode": 81})
    key = wait_for(lambda: probe.events("KeyPress"), "the key in the X client")[0]
    assert key["keysym"] == ord("q")
    wait_for(lambda: probe.events("KeyRelease"), "the key release")

    # Ctrl+] gives the keyboard back to the page, and the Ctrl already sent is released on the desktop.
    ctrl = {"key": "Control", "code": "ControlLeft", "windowsVirtualKeyCode": 17, "modifiers": 2}
    page.call("Input.dispatchKeyEvent", {"type": "rawKeyDown", **ctrl})
    page.call("Input.dispatchKeyEvent", {"type": "rawKeyDown", "key": "]", "code": "BracketRight",
                                         "windowsVirtualKeyCode": 221, "modifiers": 2})
    page.wait_for("document.activeElement.id !== 'live-video'", "the view to let go of the keyboard", 5)
    control_l = 0xFFE3
    wait_for(lambda: [e for e in probe.events("KeyRelease") if e["keysym"] == control_l], "Control released")
    assert [e["keysym"] for e in probe.events("KeyPress")] == [ord("q"), control_l]  # "]" was not sent


# -- recordings ----------------------------------------------------------------------------------

def test_record_and_download_from_the_page(page: Page, browser: Browser, api: httpx.Client, desktop_display: str,
                                           tmp_path: Path) -> None:
    if api.get("/v1/desktop/recordings").status_code != 200:
        pytest.skip("the server has no /v1/desktop/recordings routes yet")
    browser.devtools.call("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    fill(page, "recording-fps", "10")
    click(page, "recording-start")
    row = "document.querySelector('#recording-list [data-recording-id]')"
    rec_id = page.wait_for(f"{row}?.dataset.recordingId", "the recording in the list")
    assert api.get(f"/v1/desktop/recordings/{rec_id}").json()["status"] == "recording"
    time.sleep(1)  # a second of video
    click(page, "recording-stop")
    page.wait_for(f"{row}?.querySelector('.badge').textContent === 'completed'", "the completed recording", 15)
    page.evaluate(f"{row}.querySelector('button').click()")  # Download (fetch with the token → blob → file)
    saved = tmp_path / f"{rec_id}.mp4"
    wait_for(lambda: saved.exists() and saved.stat().st_size > 0 and not list(tmp_path.glob("*.crdownload")),
             "the downloaded file")
    assert saved.read_bytes() == api.get(f"/v1/desktop/recordings/{rec_id}/download").content
    assert saved.read_bytes()[4:8] == b"ftyp"
