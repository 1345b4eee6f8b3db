"""Anthropic's computer_toolset_20260801 on the Anthropic endpoint against a real desktop, checked by X clients of
their own (xprobe, an xterm running cat, the keymap)."""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from Xlib import X

from tests.api.actions.test_actions import nothing_held
from tests.api.input.test_keyboard import Cat
from tests.api.input.test_mouse_windows import Probe
from tests.conftest import assert_problem, managed_probe

DESKTOP = {"displayNum": 319, "width": 1440, "height": 900}
SW, SH = 1440, 900
TOOL = {"type": "computer_toolset_20260801"}
FAST = {"quietMs": 50, "timeoutMs": 2000}
MAX_LONG_EDGE, MAX_PIXELS = 1568, 1_150_000  # the model's image limits (docs/actions.md)
PATH = "/v1/desktop/anthropic/computer"


def call(api: httpx.Client, name: str, path: str = PATH, tool: dict = TOOL, **params: Any) -> httpx.Response:
    return api.post(path, json={"tool": tool, "name": name, "input": params, "settle": FAST}, timeout=30)


def answer(api: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = call(api, name, **params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def said(api: httpx.Client, name: str, **params: Any) -> str:
    """The text of a pure action's acknowledgement."""
    body = answer(api, name, **params)
    assert "is_error" not in body, body
    (block,) = body["content"]
    assert block["type"] == "text"
    return str(block["text"])


def image(block: dict[str, Any]) -> Image.Image:
    assert block["type"] == "image" and block["source"]["type"] == "base64", block
    assert block["source"]["media_type"] == "image/png"
    shot = Image.open(io.BytesIO(base64.b64decode(block["source"]["data"])))
    assert shot.width <= MAX_LONG_EDGE and shot.height <= MAX_LONG_EDGE and shot.width * shot.height <= MAX_PIXELS
    return shot


def screenshot(api: httpx.Client, path: str = PATH) -> Image.Image:
    response = call(api, "screenshot", path)
    assert response.status_code == 200, response.text
    (block,) = response.json()["content"]
    return image(block)


def to_model(sx: int, sy: int, w: int, h: int) -> tuple[int, int]:
    """A screen pixel written in a w x h screenshot (floor), independently of desktop/input/coordinates.py."""
    return sx * w // SW, sy * h // SH


def to_screen(x: int, y: int, w: int, h: int) -> tuple[int, int]:
    """Where a screenshot point lands: the centre of its pixel (docs/actions.md)."""
    return (2 * x + 1) * SW // (2 * w), (2 * y + 1) * SH // (2 * h)


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    with managed_probe(api, display, tmp_path / "events.jsonl", "toolset-probe") as found:
        yield found


def test_the_screenshot_is_within_the_limits_and_its_points_land_exactly(
        api: httpx.Client, display: str, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    shot = screenshot(api)
    w, h = shot.size
    assert (w, h) != (SW, SH) and abs(w / h - SW / SH) < 0.01  # scaled down to the limits, the screen's shape
    at = lambda dx, dy: to_model(rect["x"] + dx, rect["y"] + dy, w, h)  # noqa: E731
    click, right, middle, double, triple, wheel, a, b, start, end = (at(*d) for d in (
        (101, 57), (150, 70), (170, 90), (203, 111), (250, 140), (517, 401), (50, 50), (300, 200), (20, 300),
        (420, 330)))

    assert said(api, "left_click", coordinate=list(click), text="ctrl") == "Clicked."
    assert said(api, "right_click", coordinate=list(right)) == "Right-clicked."
    assert said(api, "middle_click", coordinate=list(middle)) == "Middle-clicked."
    assert said(api, "double_click", coordinate=list(double)) == "Double-clicked."
    time.sleep(0.6)  # the double click's clicks are not counted into the triple click
    assert said(api, "triple_click", coordinate=list(triple)) == "Triple-clicked."
    assert said(api, "scroll", coordinate=list(wheel), scroll_direction="down", scroll_amount=3,
                text="shift") == "Scrolled down."
    assert said(api, "mouse_move", coordinate=list(a)) == "Moved the mouse."
    assert said(api, "left_mouse_down") == "Left mouse button pressed."
    assert not nothing_held(display)  # still down after the request, as a drag by hand needs
    said(api, "mouse_move", coordinate=list(b))
    assert said(api, "left_mouse_up") == "Left mouse button released."
    assert said(api, "left_click_drag", start_coordinate=list(start), coordinate=list(end)) == "Dragged."
    assert answer(api, "cursor_position") == {"content": [{"type": "text", "text": f"X={end[0]},Y={end[1]}"}]}

    p.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 1, count=8)
    presses = [(e["button"], e["rootX"], e["rootY"]) for e in p.events("ButtonPress")]
    c, r, m, d, t, s, pa, ps = (to_screen(*pt, w, h) for pt in (click, right, middle, double, triple, wheel, a,
                                                                 start))
    assert presses == [(1, *c), (3, *r), (2, *m), *[(1, *d)] * 2, *[(1, *t)] * 3, *[(5, *s)] * 3, (1, *pa),
                       (1, *ps)]
    events = p.events("ButtonPress")
    assert events[0]["state"] & X.ControlMask and all(e["state"] & X.ShiftMask for e in events if e["button"] == 5)
    releases = [(e["rootX"], e["rootY"]) for e in p.events("ButtonRelease") if e["button"] == 1]
    assert releases[-2:] == [to_screen(*b, w, h), to_screen(*end, w, h)]  # the hand-made drag, then the drag
    assert nothing_held(display)


def test_keyboard_members_reach_an_xterm(api: httpx.Client, display: str, tmp_path: Path) -> None:
    term = Cat(display, tmp_path / "typed.txt", "toolset-cat")
    try:
        assert said(api, "type", text="héllo ✓") == "Typed."
        assert said(api, "key", text="Return", repeat=2) == "Pressed Return."
        assert term.wait_text("héllo ✓\n\n") == "héllo ✓\n\n"
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(said, api, "hold_key", text="shift", duration=1)
            started = time.monotonic()
            while nothing_held(display):  # seen down by a client of its own while the request runs
                assert time.monotonic() - started < 5, "shift never went down"
                time.sleep(0.02)
            assert held.result(10) == "Held shift for 1s."
        assert nothing_held(display)
        began = time.monotonic()
        assert said(api, "wait", duration=1) == "Waited 1s."
        assert time.monotonic() - began >= 1
    finally:
        term.close()


def test_zoom_fills_the_limits_with_the_region(api: httpx.Client) -> None:
    w, h = screenshot(api).size
    body = answer(api, "zoom", region=[w // 2, h // 2, w, h])
    zoomed = image(body["content"][0])
    # The bottom-right quarter, enlarged until a limit binds (one pixel of rounding either way).
    assert zoomed.width >= MAX_LONG_EDGE - 1 or zoomed.width * zoomed.height >= MAX_PIXELS - 2 * zoomed.width
    assert abs(zoomed.width / zoomed.height - (w - w // 2) / (h - h // 2)) < 0.01


def test_a_turn_of_tool_use_blocks_runs_in_order_and_stops_at_the_first_failure(
        api: httpx.Client, display: str, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    w, h = screenshot(api).size
    point = to_model(rect["x"] + 60, rect["y"] + 60, w, h)
    uses = [{"type": "tool_use", "id": "toolu_1", "name": "left_click", "input": {"coordinate": list(point)},
             "toolset_name": "computer"},
            {"type": "tool_use", "id": "toolu_2", "name": "cursor_position", "input": {}},
            {"type": "tool_use", "id": "toolu_3", "name": "screenshot", "input": {}}]
    response = api.post(PATH, json={"tool": TOOL, "tool_uses": uses, "settle": FAST}, timeout=30)
    assert response.status_code == 200, response.text
    first, second, third = response.json()["tool_results"]
    assert first == {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Clicked."}]}
    assert second["content"] == [{"type": "text", "text": f"X={point[0]},Y={point[1]}"}]
    assert third["tool_use_id"] == "toolu_3" and image(third["content"][0]).size == (w, h)
    assert [(e["rootX"], e["rootY"]) for e in p.wait_for(lambda e: e["type"] == "ButtonPress")] == [
        to_screen(*point, w, h)]

    chord = "+".join(f"U{0x4E00 + i:04X}" for i in range(30))  # more than the spare keycodes: fails when run
    failing = [{"type": "tool_use", "id": "toolu_4", "name": "key", "input": {"text": chord}},
               {"type": "tool_use", "id": "toolu_5", "name": "left_click", "input": {"coordinate": list(point)}}]
    response = api.post(PATH, json={"tool": TOOL, "tool_uses": failing}, timeout=30)
    assert response.status_code == 200, response.text
    failed, skipped = response.json()["tool_results"]
    assert failed["is_error"] is True and failed["content"][0]["text"].startswith("Error: ")
    assert skipped == {"type": "tool_result", "tool_use_id": "toolu_5", "is_error": True, "content": [
        {"type": "text", "text": "Not executed: an earlier computer action in this turn failed."}]}
    time.sleep(0.3)
    assert len(p.events("ButtonPress")) == 1  # the click after the failure did not run
    assert nothing_held(display)


def fields(response: httpx.Response, status: int, code: str) -> list[str]:
    problem = assert_problem(response, status, code)
    return [e["field"] for e in problem["errors"]]  # type: ignore[attr-defined]


def test_errors_name_the_field(api: httpx.Client) -> None:
    for name, params, status, field in (
        ("drag", {}, 422, "name"),
        ("type", {}, 422, "input.text"),
        ("mouse_move", {"coordinate": [1]}, 422, "input.coordinate"),
        ("left_click", {"coordinate": "10,10"}, 422, "input.coordinate"),
        ("scroll", {"scroll_direction": "sideways", "scroll_amount": 1}, 422, "input.scroll_direction"),
        ("left_click_drag", {"coordinate": [5, 5]}, 422, "input.start_coordinate"),
        ("zoom", {}, 422, "input.region"),
        ("left_click", {"coordinate": [5000, 5]}, 400, "input.coordinate"),
        ("scroll", {"scroll_direction": "up", "scroll_amount": 500}, 400, "input.scroll_amount"),
        ("key", {"text": "a", "repeat": 0}, 400, "input.repeat"),
        ("wait", {"duration": 101}, 400, "input.duration"),
        ("key", {"text": "ctrl+nope"}, 400, "input.text"),
    ):
        code = "invalid_request" if status == 422 else "desktop_invalid_action"
        assert fields(call(api, name, **params), status, code) == [field], (name, params)
    disabled = {**TOOL, "configs": {"zoom": {"enabled": False}}}
    assert fields(call(api, "zoom", tool=disabled, region=[0, 0, 5, 5]), 400, "desktop_invalid_action") == ["name"]
    assert fields(call(api, "zoom", tool={**TOOL, "configs": {"nope": {}}}), 422, "invalid_request") == [
        "tool.configs.nope"]
    assert fields(call(api, "screenshot", tool={**TOOL, "display_width_px": 1024, "display_height_px": 640}), 400,
                  "desktop_invalid_action") == ["tool.display_width_px"]
    assert fields(api.post(PATH, json={"tool": TOOL}), 422, "invalid_request") == ["name"]
    turn = [{"type": "tool_use", "id": "a", "name": "screenshot"},
            {"type": "tool_use", "id": "b", "name": "left_click", "input": {"coordinate": [5000, 1]}}]
    assert fields(api.post(PATH, json={"tool": TOOL, "tool_uses": turn}), 400, "desktop_invalid_action") == [
        "tool_uses[1].input.coordinate"]
    # The computer_* versions are as they were: `action` required, a display size required.
    old = {"type": "computer_20251124", "name": "computer", "display_width_px": 1024, "display_height_px": 640}
    assert fields(api.post(PATH, json={"tool": old, "input": {}}), 422, "invalid_request") == ["input.action"]
    assert fields(api.post(PATH, json={"tool": {**old, "display_width_px": None}, "input": {"action": "screenshot"}}),
                  422, "invalid_request") == ["tool.display_width_px"]
    assert fields(api.post(PATH, json={"tool": old, "name": "screenshot"}), 400, "desktop_invalid_action") == ["name"]


def test_the_per_desktop_form(api: httpx.Client) -> None:
    created = api.post("/v1/desktops", json={"width": 640, "height": 480})
    assert created.status_code == 201, created.text
    desktop = created.json()["id"]
    try:
        path = f"/v1/desktops/{desktop}/anthropic/computer"
        assert screenshot(api, path).size == (640, 480)  # within the limits already: not scaled
        assert call(api, "mouse_move", path, coordinate=[320, 240]).json()["content"][0]["text"] == "Moved the mouse."
        assert call(api, "cursor_position", path).json()["content"] == [{"type": "text", "text": "X=320,Y=240"}]
    finally:
        api.delete(f"/v1/desktops/{desktop}")
