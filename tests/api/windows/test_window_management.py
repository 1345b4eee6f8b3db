"""Window states, close and listing filters, each checked from outside: xprop and xwininfo (x11-utils)
read what the X server holds, the screen's pixels show what is on top, the app logs what it received."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageChops

from tests.conftest import assert_problem, wait_for
from tests.support.window_app import WindowApp, pattern

DESKTOP = {"displayNum": 517, "width": 1280, "height": 800}

Opener = Callable[..., tuple[WindowApp, dict[str, Any]]]


@pytest.fixture
def open_window(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[Opener]:
    apps: list[WindowApp] = []

    def start(title: str, geometry: str = "400x300+100+100", **kwargs: Any) -> tuple[WindowApp, dict[str, Any]]:
        app = WindowApp(display, tmp_path / f"{title}.jsonl", title, geometry, **kwargs)
        apps.append(app)
        window = wait_for(lambda: next((w for w in api.get("/v1/desktop/windows").json()["windows"]
                                        if w["title"] == title), None), f"the {title} window")
        assert app.wait_for(lambda e: e["type"] == "Expose")
        return app, window

    yield start
    for app in apps:
        app.close()


def x11(display: str, *args: str) -> str:
    return subprocess.run(args, env={**os.environ, "DISPLAY": display}, capture_output=True, text=True,
                          timeout=10, check=True).stdout


def net_states(display: str, wid: str) -> str:
    return x11(display, "xprop", "-id", wid, "_NET_WM_STATE", "WM_STATE")


def map_state(display: str, wid: str) -> str:
    line = next(ln for ln in x11(display, "xwininfo", "-id", wid).splitlines() if "Map State" in ln)
    return line.split(":")[1].strip()


def stacking(display: str) -> list[int]:
    """_NET_CLIENT_LIST_STACKING, bottom to top."""
    text = x11(display, "xprop", "-root", "_NET_CLIENT_LIST_STACKING").split("#", 1)[1]
    return [int(v, 16) for v in text.replace(",", " ").split()]


def shows(api: httpx.Client, x: int, y: int, expected: Image.Image) -> bool:
    """Whether the screen at (x, y) shows `expected` (what is on top there)."""
    shot = api.get("/v1/desktop/screenshot/region", params={"x": x, "y": y, "width": expected.width,
                                                            "height": expected.height})
    return ImageChops.difference(Image.open(io.BytesIO(shot.content)).convert("RGB"), expected).getbbox() is None


def post(api: httpx.Client, wid: str, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = api.post(f"/v1/desktop/windows/{wid}/{action}", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_minimise_and_restore(api: httpx.Client, display: str, open_window: Opener) -> None:
    _app, window = open_window("mini")
    wid = window["id"]
    assert post(api, wid, "minimize")["minimized"] is True
    assert "Iconic" in net_states(display, wid) and "_NET_WM_STATE_HIDDEN" in net_states(display, wid)
    assert map_state(display, wid) == "IsUnMapped"
    assert wid not in [w["id"] for w in api.get("/v1/desktop/windows").json()["windows"]]
    hidden = [w for w in api.get("/v1/desktop/windows", params={"minimized": "true"}).json()["windows"]
              if w["id"] == wid]
    assert hidden and hidden[0]["minimized"] is True
    restored = post(api, wid, "restore")
    assert restored["minimized"] is False and map_state(display, wid) == "IsViewable"
    assert "Normal" in net_states(display, wid)


def test_maximise_then_restore_gives_back_the_size(api: httpx.Client, display: str, open_window: Opener) -> None:
    _app, window = open_window("maxi", "400x300+150+120")
    wid = window["id"]
    big = post(api, wid, "maximize")
    assert big["maximized"] is True
    states = net_states(display, wid)
    assert "_NET_WM_STATE_MAXIMIZED_VERT" in states and "_NET_WM_STATE_MAXIMIZED_HORZ" in states
    assert big["width"] > 1200 and big["height"] > 700  # the whole 1280x800 screen but the decorations
    geometry = x11(display, "xwininfo", "-id", wid)
    assert f"Width: {big['width']}" in geometry and f"Height: {big['height']}" in geometry
    back = post(api, wid, "restore")
    assert back["maximized"] is False and "MAXIMIZED" not in net_states(display, wid)
    assert (back["width"], back["height"]) == (400, 300)
    # Maximising a minimised window shows it too.
    post(api, wid, "minimize")
    assert post(api, wid, "maximize")["maximized"] is True and map_state(display, wid) == "IsViewable"


def test_raise_puts_a_window_on_top_without_focusing_it(api: httpx.Client, display: str,
                                                        open_window: Opener) -> None:
    _a, below = open_window("lower", "400x300+100+100")
    _b, above = open_window("upper", "400x300+200+150", seed=100)
    overlap = (above["x"] + 10, above["y"] + 10)
    lower_there = pattern(400, 300).crop((overlap[0] - below["x"], overlap[1] - below["y"],
                                          overlap[0] - below["x"] + 50, overlap[1] - below["y"] + 50))
    assert not shows(api, *overlap, lower_there)
    active = api.get("/v1/desktop/windows/focused").json()["id"]
    raised = post(api, below["id"], "raise")
    assert raised["id"] == below["id"]
    assert stacking(display)[-1] == int(below["id"])
    assert wait_for(lambda: shows(api, *overlap, lower_there), "the raised window's pixels on top", timeout=3)
    assert api.get("/v1/desktop/windows/focused").json()["id"] == active


def test_always_on_top_stays_above_a_focused_window(api: httpx.Client, display: str,
                                                    open_window: Opener) -> None:
    _a, pinned = open_window("pinned", "300x200+300+300")
    _b, other = open_window("other", "300x200+350+350", seed=100)
    assert post(api, pinned["id"], "always-on-top", {"enabled": True})["alwaysOnTop"] is True
    assert "_NET_WM_STATE_ABOVE" in net_states(display, pinned["id"])
    post(api, other["id"], "focus")
    order = stacking(display)
    assert order.index(int(pinned["id"])) > order.index(int(other["id"]))
    x, y = other["x"] + 10, other["y"] + 10  # where `other` overlaps `pinned`
    corner = pattern(300, 200).crop((x - pinned["x"], y - pinned["y"], x - pinned["x"] + 40, y - pinned["y"] + 40))
    assert wait_for(lambda: shows(api, x, y, corner), "the pinned window on top", timeout=3)
    assert post(api, pinned["id"], "always-on-top", {"enabled": False})["alwaysOnTop"] is False
    assert "_NET_WM_STATE_ABOVE" not in net_states(display, pinned["id"])
    post(api, other["id"], "focus")
    order = stacking(display)
    assert order.index(int(pinned["id"])) < order.index(int(other["id"]))


def test_close_asks_politely_first(api: httpx.Client, open_window: Opener) -> None:
    app, window = open_window("polite")
    done = post(api, window["id"], "close", {"timeoutMs": 5000})
    assert done == {"id": window["id"], "closed": True, "forced": False, "elapsedMs": done["elapsedMs"]}
    assert app.events("DeleteWindow") and app.exited(5) and app.proc.returncode == 0
    assert done["elapsedMs"] < 5000


def test_close_forces_an_app_that_ignores_the_request(api: httpx.Client, open_window: Opener) -> None:
    app, window = open_window("stubborn", ignore_delete=True)
    done = post(api, window["id"], "close", {"timeoutMs": 400})
    assert (done["closed"], done["forced"]) == (True, True) and done["elapsedMs"] >= 400
    assert app.events("DeleteWindow")  # it was asked first
    assert app.exited(5)  # its X connection was cut: python-xlib ends the process
    listed = [w["id"] for w in api.get("/v1/desktop/windows", params={"minimized": "true"}).json()["windows"]]
    assert window["id"] not in listed


def test_close_without_force_leaves_a_stubborn_app(api: httpx.Client, open_window: Opener) -> None:
    app, window = open_window("kept", ignore_delete=True)
    done = post(api, window["id"], "close", {"timeoutMs": 200, "force": False})
    assert (done["closed"], done["forced"]) == (False, False)
    assert app.proc.poll() is None
    assert window["id"] in [w["id"] for w in api.get("/v1/desktop/windows").json()["windows"]]


def test_listing_filters(api: httpx.Client, open_window: Opener) -> None:
    app_a, a = open_window("filt-a", "200x100+100+100")
    _app_b, b = open_window("filt-b", "200x100+400+100")
    _app_c, _c = open_window("other-c", "200x100+700+100")

    def ids(**query: Any) -> set[str]:
        response = api.get("/v1/desktop/windows", params=query)
        assert response.status_code == 200, response.text
        return {w["id"] for w in response.json()["windows"]}

    assert ids(pid=app_a.proc.pid) == {a["id"]}
    assert ids(titleRegex=r"^filt-[ab]$") == {a["id"], b["id"]}
    assert ids(titleRegex="b$", **{"class": "windowapp"}) == {b["id"]}
    assert ids(**{"class": "filt-a"}) == {a["id"]}  # the instance name
    window = next(w for w in api.get("/v1/desktop/windows", params={"pid": app_a.proc.pid}).json()["windows"])
    assert (window["instanceName"], window["className"]) == ("filt-a", "WindowApp")
    assert ids(pid=app_a.proc.pid, titleRegex="filt-b") == set()


@pytest.mark.parametrize(("query", "field"), [({"titleRegex": "("}, "titleRegex"), ({"pid": "abc"}, "pid"),
                                              ({"pid": "0"}, "pid"), ({"class": ""}, "class"),
                                              ({"titleRegex": "x" * 1001}, "titleRegex")])
def test_bad_filters_are_400_naming_the_field(api: httpx.Client, query: dict[str, str], field: str) -> None:
    problem = assert_problem(api.get("/v1/desktop/windows", params=query), 400, "desktop_invalid_action")
    assert problem["errors"][0]["field"] == field  # type: ignore[index]


@pytest.mark.parametrize("action", ["minimize", "maximize", "restore", "raise", "always-on-top", "close"])
def test_unknown_windows_are_404(api: httpx.Client, action: str) -> None:
    for wid in ("4242", "0x10", "window"):
        assert_problem(api.post(f"/v1/desktop/windows/{wid}/{action}", json={}), 404, "window_not_found")


def test_bad_bodies_name_the_field(api: httpx.Client, open_window: Opener) -> None:
    _app, window = open_window("bodies")
    wid = window["id"]
    problem = assert_problem(api.post(f"/v1/desktop/windows/{wid}/close", json={"timeoutMs": -1}), 400)
    assert problem["errors"][0]["field"] == "timeoutMs"  # type: ignore[index]
    problem = assert_problem(api.post(f"/v1/desktop/windows/{wid}/always-on-top", json={"enabled": "yes"}), 422)
    assert problem["errors"][0]["field"] == "enabled"  # type: ignore[index]
    post(api, wid, "minimize")
    problem = assert_problem(api.post(f"/v1/desktop/windows/{wid}/raise"), 409, "window_not_viewable")
    assert problem["windowState"] == "minimized"
