"""What OSWorld's tasks assume of the VM image (docs/osworld.md "What tasks assume"), on real sandboxed desktops
created with `osworld`: their HOME at /home/user (each its own), pyautogui from `python` moving the desktop's own
pointer, `google-chrome` on PATH, and Chrome's DevTools inside each desktop reached from outside on its cdpPort."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.vendors.test_gemini import pointer
from tests.conftest import wait_for

SMALL = {"width": 640, "height": 400}
OSWORLD_PYTHON = True  # the module server's desktops get the desktops' Python (tests/conftest.py)
PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
needs_chromium = pytest.mark.skipif(not shutil.which("chromium"), reason="needs chromium (scripts/setup.sh test)")
needs_vlc = pytest.mark.skipif(not shutil.which("vlc"), reason="needs VLC (sandbox-desktop install osworld)")


@pytest.fixture(scope="module")
def desktops(api: httpx.Client) -> Iterator[list[dict[str, Any]]]:
    made = []
    for _ in range(2):
        created = api.post("/v1/desktops", json={**SMALL, "osworld": True})
        assert created.status_code == 201, created.text
        made.append(created.json())
    yield made
    for desktop in made:
        api.delete(f"/v1/desktops/{desktop['id']}")


def execute(desktop: dict[str, Any], command: str | list[str], shell: bool = False) -> dict[str, Any]:
    answer = httpx.post(desktop["osworld"]["url"] + "/execute", json={"command": command, "shell": shell},
                        timeout=60)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_resource_reports_the_ports_and_home(desktops: list[dict[str, Any]]) -> None:
    ports = set()
    for desktop in desktops:
        guest = desktop["osworld"]
        assert guest["homeUser"] is True
        ports |= {guest["port"], guest["cdpPort"], guest["vlcPort"]}
    assert len(ports) == 6  # every port of every desktop its own


def test_each_desktop_has_its_own_home_user(desktops: list[dict[str, Any]]) -> None:
    for index, desktop in enumerate(desktops):
        assert execute(desktop, f"echo desktop-{index} > /home/user/x.txt", shell=True)["returncode"] == 0
    for index, desktop in enumerate(desktops):
        assert execute(desktop, ["cat", "/home/user/x.txt"])["output"] == f"desktop-{index}\n"
        # The same folder as its HOME: what a task writes to ~ its checker reads at /home/user, and back.
        assert execute(desktop, "cat ~/x.txt", shell=True)["output"] == f"desktop-{index}\n"
        fetched = httpx.post(desktop["osworld"]["url"] + "/file", data={"file_path": "/home/user/x.txt"})
        assert fetched.status_code == 200 and fetched.text == f"desktop-{index}\n"
        # The machine's other homes are out of sight.
        assert execute(desktop, ["ls", "/home"])["output"].split() == ["user"]


def test_pyautogui_from_execute_moves_the_desktops_own_pointer(desktops: list[dict[str, Any]]) -> None:
    first, second = desktops
    before = pointer(second["display"])
    # With the prefix OSWorld's harness puts before every action (a fresh pointer sits in pyautogui's fail-safe
    # corner).
    moved = execute(first, ["python", "-c", f"{PREFIX}pyautogui.moveTo(100, 200)"])
    assert moved["returncode"] == 0, moved
    assert pointer(first["display"]) == (100, 200)
    assert pointer(second["display"]) == before
    # `python3` too: OSWorld's harness sends either.
    assert execute(first, ["python3", "-c", f"{PREFIX}pyautogui.moveTo(50, 60)"])["returncode"] == 0
    assert pointer(first["display"]) == (50, 60)


def test_pyautogui_clicks_from_execute(desktops: list[dict[str, Any]]) -> None:
    # pyautogui's click runs `dconf read` for the mouse's handedness and fails where there is no dconf: the
    # machine's (dconf-cli) or the stand-in the desktop's PATH has without it (most of OSWorld's actions click).
    clicked = execute(desktops[0], ["python", "-c", f"{PREFIX}pyautogui.click(30, 40); pyautogui.rightClick(31, 41)"])
    assert clicked["returncode"] == 0, clicked
    assert pointer(desktops[0]["display"]) == (31, 41)


@needs_chromium
def test_chromes_devtools_inside_each_desktop_on_its_cdp_port(desktops: list[dict[str, Any]]) -> None:
    first, second = desktops
    where = execute(first, "command -v google-chrome", shell=True)["output"].strip()
    assert where.endswith("/vm-image-bin/google-chrome")
    # As OSWorld's tasks start it, with the port the harness reaches through the desktop's cdpPort.
    launched = httpx.post(first["osworld"]["url"] + "/setup/launch", json={"command": [
        "google-chrome", "--remote-debugging-port=9222", "--no-first-run", "--user-data-dir=/tmp/cdp-profile",
        "about:blank"]})
    assert launched.status_code == 200, launched.text
    cdp = f"http://127.0.0.1:{first['osworld']['cdpPort']}/json/version"

    def version() -> dict[str, Any] | None:
        try:
            return dict(httpx.get(cdp, timeout=5).json())
        except (httpx.HTTPError, ValueError):
            return None

    wait_for(lambda: version() is not None, "Chrome's DevTools through the cdpPort", 60)
    answer = version()
    assert answer is not None and "Chrome" in answer["Browser"] and answer["webSocketDebuggerUrl"]
    # The other desktop's cdpPort reaches its own loopback, where nothing listens: closed, not the first's Chrome.
    deadline = time.monotonic() + 5
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{second['osworld']['cdpPort']}/json/version",
                  timeout=max(1.0, deadline - time.monotonic()))
    execute(first, ["pkill", "-f", "cdp-profile"])


@needs_vlc
def test_vlcs_http_interface_inside_a_desktop_on_its_vlc_port(desktops: list[dict[str, Any]]) -> None:
    first, second = desktops
    where = execute(first, "command -v vlc", shell=True)["output"].strip()
    assert where.endswith("/vm-image-bin/vlc")
    # As OSWorld's VLC tasks start it; the harness's getters ask its HTTP interface with the image's password.
    launched = httpx.post(first["osworld"]["url"] + "/setup/launch", json={"command": ["vlc", "--no-video-title"]})
    assert launched.status_code == 200, launched.text
    status = f"http://127.0.0.1:{first['osworld']['vlcPort']}/requests/status.xml"

    def answered() -> httpx.Response | None:
        try:
            response = httpx.get(status, auth=("", "password"), timeout=5)
        except httpx.HTTPError:
            return None
        # VLC's web server listens before its Lua interface has added its pages: until then a page is its 404.
        return None if response.status_code == 404 else response

    response = wait_for(answered, "VLC's HTTP interface through the vlcPort", 60)
    assert response.status_code == 200 and b"<state>" in response.content, response.text[:200]
    assert httpx.get(status, auth=("", "wrong"), timeout=5).status_code == 401
    with pytest.raises(httpx.HTTPError):  # the other desktop's VLC port reaches its own loopback: nothing there
        httpx.get(f"http://127.0.0.1:{second['osworld']['vlcPort']}/requests/status.xml", timeout=5)
    execute(first, ["pkill", "-x", "vlc"])


def test_ports_close_with_the_guest(api: httpx.Client) -> None:
    created = api.post("/v1/desktops", json={**SMALL, "osworld": True})
    assert created.status_code == 201, created.text
    desktop = created.json()
    try:
        cdp = desktop["osworld"]["cdpPort"]
        off = api.patch(f"/v1/desktops/{desktop['id']}", json={"osworld": False})
        assert off.status_code == 200 and off.json().get("osworld") is None
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{cdp}/json/version", timeout=5)
    finally:
        api.delete(f"/v1/desktops/{desktop['id']}")


def test_turned_on_later_the_image_comes_with_the_next_start(api: httpx.Client) -> None:
    created = api.post("/v1/desktops", json=SMALL)
    assert created.status_code == 201, created.text
    desktop_id = created.json()["id"]
    try:
        on = api.patch(f"/v1/desktops/{desktop_id}", json={"osworld": True}).json()
        assert on["osworld"]["homeUser"] is False and on["osworld"]["cdpPort"]  # its sandbox is the one it had
        assert api.post(f"/v1/desktops/{desktop_id}/stop").status_code == 200
        assert api.post(f"/v1/desktops/{desktop_id}/start", json=SMALL).status_code == 200
        again = api.get(f"/v1/desktops/{desktop_id}").json()
        assert again["osworld"]["homeUser"] is True
        assert execute(again, "echo later > /home/user/y.txt && cat ~/y.txt", shell=True)["output"] == "later\n"
    finally:
        api.delete(f"/v1/desktops/{desktop_id}")
