"""Gemini's computer-use functionCalls on the Gemini endpoint against a real desktop, checked by X clients of their
own (xprobe, an xterm running cat, xdotool reading the focused window's title) and Chromium on local pages."""

from __future__ import annotations

import base64
import io
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from Xlib.display import Display

from tests.api.actions.test_actions import nothing_held
from tests.api.input.test_keyboard import Cat, xdotool
from tests.api.input.test_mouse_windows import Probe
from tests.conftest import assert_problem, managed_probe, wait_for
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 331, "width": 1440, "height": 900}
SW, SH = 1440, 900
FAST = {"quietMs": 50, "timeoutMs": 2000}
PATH = "/v1/desktop/gemini/computer"
needs_chromium = pytest.mark.skipif(not shutil.which("chromium"), reason="needs chromium (scripts/setup.sh test)")


def gemini(api: httpx.Client, name: str, path: str = PATH, extra: dict | None = None, **args: Any) -> httpx.Response:
    body = {"functionCall": {"name": name, "args": args}, "settle": FAST, **(extra or {})}
    return api.post(path, json=body, timeout=60)


def parts(api: httpx.Client, name: str, path: str = PATH, size: tuple[int, int] = (SW, SH), extra: dict | None = None,
          **args: Any) -> dict[str, Any]:
    """The functionResponse's `response`, after checking the parts' shapes and the screenshot's size."""
    answer = gemini(api, name, path, extra, **args)
    assert answer.status_code == 200, answer.text
    function_response, inline = answer.json()["parts"]
    assert function_response["functionResponse"]["name"] == name
    assert inline["inlineData"]["mimeType"] == "image/png"
    image = Image.open(io.BytesIO(base64.b64decode(inline["inlineData"]["data"])))
    assert image.format == "PNG" and image.size == size
    return dict(function_response["functionResponse"]["response"])


def px(gx: int, gy: int, w: int = SW, h: int = SH) -> tuple[int, int]:
    """A grid point's screen pixel, written out independently of desktop/vendors/gemini.py."""
    return gx * w // 1000, gy * h // 1000


def grid(sx: int, sy: int) -> tuple[int, int]:
    """A grid point whose pixel is at or just past screen pixel (sx, sy)."""
    return -(-sx * 1000 // SW), -(-sy * 1000 // SH)


def pointer(display: str) -> tuple[int, int]:
    d = Display(display)
    try:
        p = d.screen().root.query_pointer()
        return p.root_x, p.root_y
    finally:
        d.close()


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    with managed_probe(api, display, tmp_path / "events.jsonl", "gemini-probe") as found:
        yield found


def test_pointer_functions_land_on_the_grid(api: httpx.Client, display: str, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    click, hover, wheel, start, end = (grid(rect["x"] + dx, rect["y"] + dy) for dx, dy in
                                       ((101, 57), (250, 120), (517, 401), (20, 300), (420, 330)))
    assert "url" not in parts(api, "click_at", x=click[0], y=click[1])  # no browser focused: no url
    parts(api, "hover_at", x=hover[0], y=hover[1])
    assert pointer(display) == px(*hover)
    parts(api, "scroll_at", x=wheel[0], y=wheel[1], direction="down", magnitude=400)  # 360 px: 4 clicks
    parts(api, "scroll_at", x=wheel[0], y=wheel[1], direction="left", magnitude=100)  # 144 px: 1 click
    parts(api, "drag_and_drop", x=start[0], y=start[1], destination_x=end[0], destination_y=end[1])

    p.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 1, count=2)
    pressed = [(e["button"], e["rootX"], e["rootY"]) for e in p.events() if e["type"] == "ButtonPress"]
    assert pressed == [(1, *px(*click)), *[(5, *px(*wheel))] * 4, (6, *px(*wheel)), (1, *px(*start))]
    released = [e for e in p.events() if e["type"] == "ButtonRelease" and e["button"] == 1][-1]
    assert (released["rootX"], released["rootY"]) == px(*end)
    assert nothing_held(display)


def test_keyboard_functions_reach_an_xterm(api: httpx.Client, display: str, tmp_path: Path) -> None:
    term = Cat(display, tmp_path / "typed.txt", "gemini-cat")  # at +10+10: grid (70, 112) is inside it
    try:
        parts(api, "type_text_at", x=70, y=112, text="héllo ✓", press_enter=True, clear_before_typing=False)
        assert term.wait_text("héllo ✓\n") == "héllo ✓\n"
        parts(api, "key_combination", keys="shift+b")
        parts(api, "key_combination", keys="Control+J")  # a terminal's newline
        assert term.wait_text("héllo ✓\nB\n") == "héllo ✓\nB\n"
        # Page Down, as Google's reference agent scrolls a document: xterm sends it on as CSI 6 ~.
        parts(api, "scroll_document", direction="down")
        parts(api, "key_combination", keys="enter")
        assert term.wait_text("héllo ✓\nB\n\x1b[6~\n").endswith("\x1b[6~\n")
        began = time.monotonic()
        parts(api, "wait_5_seconds")
        assert time.monotonic() - began >= 5
        assert nothing_held(display)
    finally:
        term.close()


def title(display: str) -> str:
    return xdotool(display, "getactivewindow", "getwindowname")


def page(folder: Path, name: str, heading: str) -> Path:
    path = folder / name
    path.write_text(f"<!doctype html><title>{heading}</title><h1>{heading}</h1>")
    return path


@needs_chromium
def test_navigate_back_forward_and_search_on_local_pages(api: httpx.Client, display: str, tmp_path: Path) -> None:
    b, c = page(tmp_path, "b.html", "Page B"), page(tmp_path, "c.html", "Page C")
    with desktop_page(api, tmp_path, "a.html", "<!doctype html><title>Page A</title><h1>Page A</h1>"):
        wait_for(lambda: title(display).startswith("Page A"), "page A")
        # The URL is read from the page's accessibility tree, which Chromium may still be building: asked again.
        wait_for(lambda: parts(api, "open_web_browser").get("url") == (tmp_path / "a.html").as_uri(), "page A's URL")
        parts(api, "navigate", url=b.as_uri())
        wait_for(lambda: title(display).startswith("Page B"), "page B", 30)
        wait_for(lambda: parts(api, "open_web_browser").get("url") == b.as_uri(), "the page's URL")
        parts(api, "go_back")
        wait_for(lambda: title(display).startswith("Page A"), "back at page A")
        parts(api, "go_forward")
        wait_for(lambda: title(display).startswith("Page B"), "forward at page B")
        # `search` goes to the request's search page: a local one here, so the test stays off the internet.
        parts(api, "search", extra={"searchUrl": c.as_uri()})
        wait_for(lambda: title(display).startswith("Page C"), "the search page")


@needs_chromium
def test_the_per_desktop_form_launches_a_browser(api: httpx.Client, tmp_path: Path) -> None:
    created = api.post("/v1/desktops", json={"width": 800, "height": 600})
    assert created.status_code == 201, created.text
    desktop = created.json()["id"]
    path = f"/v1/desktops/{desktop}/gemini/computer"
    try:
        parts(api, "hover_at", path, (800, 600), x=500, y=500)
        assert api.get(f"/v1/desktops/{desktop}/mouse/position").json()["x"] == 400
        target = page(tmp_path, "d.html", "Page D")
        parts(api, "navigate", path, (800, 600), url=target.as_uri())  # no browser yet: launched at the URL

        def browser_titles() -> list[str]:
            windows = api.get(f"/v1/desktops/{desktop}/windows").json()["windows"]
            return [w["title"] for w in windows if w["title"].startswith("Page D")]
        wait_for(browser_titles, "Chromium showing page D", 30)
    finally:
        api.delete(f"/v1/desktops/{desktop}")


def fields(response: httpx.Response, status: int, code: str) -> list[str]:
    problem = assert_problem(response, status, code)
    return [e["field"] for e in problem["errors"]]  # type: ignore[attr-defined]


def test_errors_name_the_field(api: httpx.Client) -> None:
    for name, args, field in (
        ("open_calculator", {}, "functionCall.name"),
        ("click_at", {"y": 5}, "functionCall.args.x"),
        ("click_at", {"x": "5", "y": 5}, "functionCall.args.x"),
        ("scroll_at", {"x": 1, "y": 1, "direction": "sideways"}, "functionCall.args.direction"),
        ("type_text_at", {"x": 1, "y": 1, "text": "a", "press_enter": "yes"}, "functionCall.args.press_enter"),
        ("navigate", {}, "functionCall.args.url"),
        ("drag_and_drop", {"x": 1, "y": 1, "destination_x": 2}, "functionCall.args.destination_y"),
    ):
        assert fields(gemini(api, name, **args), 422, "invalid_request") == [field], (name, args)
    for name, args, field in (
        ("click_at", {"x": 1000, "y": 5}, "functionCall.args.x"),
        ("hover_at", {"x": 5, "y": -1}, "functionCall.args.y"),
        ("scroll_at", {"x": 1, "y": 1, "direction": "up", "magnitude": 1000}, "functionCall.args.magnitude"),
        ("key_combination", {"keys": "control+nope"}, "functionCall.args.keys"),
    ):
        assert fields(gemini(api, name, **args), 400, "desktop_invalid_action") == [field], (name, args)
    assert fields(api.post(PATH, json={"part": {}}), 422, "invalid_request") == ["functionCall"]


def test_a_confirmation_is_held_for_approval(api: httpx.Client, display: str) -> None:
    created = api.post("/v1/desktops", json={"approve": ["key"], "width": 640, "height": 480})
    assert created.status_code == 201, created.text
    desktop = created.json()["id"]
    path = f"/v1/desktops/{desktop}/gemini/computer"
    try:
        # A pointer move is not a kind this desktop holds: it runs at once...
        assert gemini(api, "hover_at", path, x=100, y=100).status_code == 200
        # ...unless the model asks for confirmation.
        safety = {"decision": "require_confirmation", "explanation": "About to accept cookies."}
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(gemini, api, "hover_at", path, None, x=500, y=500, safety_decision=safety)
            [approval] = wait_for(lambda: api.get("/v1/approvals", params={
                "status": "pending", "desktopId": desktop}).json()["approvals"], "the approval")
            assert approval["source"] == "gemini" and approval["action"]["kinds"] == ["pointer"]
            steps = approval["action"]["steps"]
            assert (steps[0]["type"], steps[0]["x"], steps[0]["y"]) == ("move", 320, 240)
            assert steps[-1]["command"] == "About to accept cookies."
            assert api.post(f"/v1/approvals/{approval['id']}", json={"decision": "approve"}).status_code == 200
            done = answer.result(30)
        assert done.status_code == 200, done.text
        response = done.json()["parts"][0]["functionResponse"]["response"]
        assert response == {"safety_acknowledgement": "true"}
        assert api.get(f"/v1/desktops/{desktop}/mouse/position").json()["x"] == 320
    finally:
        api.delete(f"/v1/desktops/{desktop}")


