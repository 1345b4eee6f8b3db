"""The Anthropic and OpenAI computer-use endpoints against a real desktop, checked by xprobe."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from Xlib import X

from tests.api.actions.test_actions import keysym_now, nothing_held
from tests.api.input.test_mouse_windows import Probe
from tests.conftest import assert_problem, managed_probe

DESKTOP = {"displayNum": 310, "width": 1440, "height": 900}
SW, SH = 1440, 900
TOOL = {"type": "computer_20251124", "name": "computer", "display_width_px": 1024, "display_height_px": 640,
        "enable_zoom": True}
FAST = {"quietMs": 50, "timeoutMs": 2000}
CTRL_L, SHIFT_L, UNICODE = 0xFFE3, 0xFFE1, 0x01000000


def to_model(sx: int, sy: int, w: int, h: int) -> tuple[int, int]:
    """A screen pixel written in a w x h display (floor), independently of desktop/input/coordinates.py."""
    return sx * w // SW, sy * h // SH


def to_screen(x: int, y: int, w: int, h: int) -> tuple[int, int]:
    """Where a display point lands: the centre of its display pixel (docs/actions.md)."""
    return (2 * x + 1) * SW // (2 * w), (2 * y + 1) * SH // (2 * h)


def png_size(data: str) -> tuple[int, int]:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.format == "PNG"
    return image.size


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    """A managed xprobe window (so a click focuses it) and its client rectangle from the window list."""
    with managed_probe(api, display, tmp_path / "events.jsonl", "vendor-probe") as found:
        yield found


def claude(api: httpx.Client, tool: dict = TOOL, **params: Any) -> httpx.Response:
    return api.post("/v1/desktop/anthropic/computer", json={"tool": tool, "input": params, "settle": FAST})


def image_of(answer: dict, size: tuple[int, int]) -> None:
    assert "is_error" not in answer, answer
    (block,) = answer["content"]
    assert block["type"] == "image" and block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == "image/png"
    assert png_size(block["source"]["data"]) == size


def presses(p: Probe, display: str) -> list[tuple[str, int, int, int]]:
    """(kind, button or keysym, rootX, rootY) of every press, in order."""
    return [(e["type"], e["button"] if "button" in e else keysym_now(display, e["keycode"], e["state"]),
             e["rootX"], e["rootY"]) for e in p.events() if e["type"] in ("ButtonPress", "KeyPress")]


def test_an_anthropic_sequence_reaches_the_client_at_the_right_places(
        api: httpx.Client, display: str, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    left, top = rect["x"], rect["y"]
    click, triple, wheel = (to_model(left + dx, top + dy, 1024, 640) for dx, dy in ((101, 57), (333, 211),
                                                                                   (517, 401)))
    image_of(claude(api, action="screenshot").json(), (1024, 640))
    image_of(claude(api, action="left_click", coordinate=list(click)).json(), (1024, 640))
    image_of(claude(api, action="type", text="hé✓").json(), (1024, 640))
    image_of(claude(api, action="key", text="ctrl+a").json(), (1024, 640))
    image_of(claude(api, action="triple_click", coordinate=list(triple)).json(), (1024, 640))
    image_of(claude(api, action="scroll", coordinate=list(wheel), scroll_direction="down", scroll_amount=3).json(),
             (1024, 640))
    assert claude(api, action="cursor_position").json() == {
        "content": [{"type": "text", "text": f"X={wheel[0]},Y={wheel[1]}"}]}

    p.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 5, count=3)
    c, t, w = (to_screen(*pt, 1024, 640) for pt in (click, triple, wheel))
    assert presses(p, display) == [
        ("ButtonPress", 1, *c),
        ("KeyPress", ord("h"), *c), ("KeyPress", 0xE9, *c), ("KeyPress", UNICODE + 0x2713, *c),
        ("KeyPress", CTRL_L, *c), ("KeyPress", ord("a"), *c),
        *[("ButtonPress", 1, *t)] * 3, *[("ButtonPress", 5, *w)] * 3,
    ]
    ctrl_a = next(e for e in p.events() if e["type"] == "KeyPress" and e["keysym"] == ord("a"))
    assert ctrl_a["state"] & X.ControlMask
    assert nothing_held(display)


def test_anthropic_mouse_down_outlives_the_request_and_zoom_is_native(
        api: httpx.Client, display: str, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    a, b = to_model(rect["x"] + 50, rect["y"] + 50, 1024, 640), to_model(rect["x"] + 300, rect["y"] + 200, 1024, 640)
    image_of(claude(api, action="left_mouse_down", coordinate=list(a)).json(), (1024, 640))
    image_of(claude(api, action="mouse_move", coordinate=list(b)).json(), (1024, 640))
    assert not nothing_held(display)  # still down between the requests, as a drag needs
    image_of(claude(api, action="left_mouse_up").json(), (1024, 640))
    release = p.wait_for(lambda e: e["type"] == "ButtonRelease")[0]
    press = p.wait_for(lambda e: e["type"] == "ButtonPress")[0]
    assert (press["rootX"], press["rootY"]) == to_screen(*a, 1024, 640)
    assert (release["rootX"], release["rootY"]) == to_screen(*b, 1024, 640)
    assert nothing_held(display)
    # The right half-bottom quarter of the display, at the screen's own resolution.
    image_of(claude(api, action="zoom", region=[512, 320, 1024, 640]).json(), (720, 450))


def test_anthropic_errors(api: httpx.Client, display: str) -> None:
    chord = "+".join(f"U{0x4E00 + i:04X}" for i in range(30))  # more than the spare keycodes: fails when run
    failed = claude(api, action="key", text=chord)
    assert failed.status_code == 200
    body = failed.json()
    assert body["is_error"] is True and body["content"][0]["type"] == "text"
    assert body["content"][0]["text"].startswith("Error: ")
    assert nothing_held(display)
    for params, tool, field in (
        ({"action": "left_click", "coordinate": [1024, 5]}, TOOL, "input.coordinate"),
        ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 500}, TOOL, "input.scroll_amount"),
        ({"action": "wait", "duration": 101}, TOOL, "input.duration"),
        ({"action": "triple_click"}, {**TOOL, "type": "computer_20241022"}, "input.action"),
        ({"action": "zoom", "region": [0, 0, 10, 10]}, {**TOOL, "enable_zoom": False}, "input.action"),
        ({"action": "screenshot"}, {**TOOL, "display_height_px": 768}, "tool.display_width_px"),
    ):
        problem = assert_problem(claude(api, tool, **params), 400, "desktop_invalid_action")
        assert [e["field"] for e in problem["errors"]] == [field], problem  # type: ignore[attr-defined]
    assert_problem(api.post("/v1/desktop/anthropic/computer", json={"tool": TOOL, "input": {}}), 422,
                   "invalid_request")


def gpt(api: httpx.Client, actions: list[dict], size: tuple[int, int] | None = None,
        checks: list[dict] | None = None) -> httpx.Response:
    body: dict[str, Any] = {"call": {"type": "computer_call", "call_id": "call_7", "id": "cu_1", "actions": actions,
                                     "pending_safety_checks": checks or []}, "settle": FAST}
    if size:
        body["display_width"], body["display_height"] = size
    return api.post("/v1/desktop/openai/computer", json=body)


@pytest.mark.parametrize("size", [(1280, 800), None])
def test_an_openai_batch_reaches_the_client(api: httpx.Client, display: str, probe: tuple[Probe, dict],
                                            size: tuple[int, int] | None) -> None:
    p, rect = probe
    w, h = size or (SW, SH)
    click, dbl, wheel, start, end = (to_model(rect["x"] + dx, rect["y"] + dy, w, h) for dx, dy in
                                     ((101, 57), (203, 111), (517, 401), (20, 300), (420, 330)))
    checks = [{"id": "sc_1", "code": "irrelevant_domain", "message": "check"}]
    answer = gpt(api, [
        {"type": "click", "x": click[0], "y": click[1], "button": "left"},
        {"type": "keypress", "keys": ["CTRL", "A"]},
        {"type": "scroll", "x": wheel[0], "y": wheel[1], "scroll_x": 0, "scroll_y": 250, "keys": ["SHIFT"]},
        {"type": "double_click", "x": dbl[0], "y": dbl[1]},
        {"type": "drag", "path": [{"x": start[0], "y": start[1]}, {"x": end[0], "y": end[1]}]},
        {"type": "click", "x": click[0], "y": click[1], "button": "wheel"},
        # Typing after the clicks keeps this test about the translation; clicks right after a keymap
        # change are covered by test_mouse_windows.py::test_clicks_and_keys_on_a_managed_window_arrive_in_order.
        {"type": "type", "text": "ü"},
    ], size, checks)
    assert answer.status_code == 200, answer.text
    out = answer.json()
    assert out["type"] == "computer_call_output" and out["call_id"] == "call_7"
    assert out["acknowledged_safety_checks"] == checks
    assert out["output"]["type"] == "computer_screenshot"
    prefix = "data:image/png;base64,"
    assert out["output"]["image_url"].startswith(prefix)
    assert png_size(out["output"]["image_url"][len(prefix):]) == (w, h)

    p.wait_for(lambda e: e["type"] in ("ButtonPress", "KeyPress"), count=12)
    c, d, s, a, b = (to_screen(*pt, w, h) for pt in (click, dbl, wheel, start, end))
    assert presses(p, display) == [
        ("ButtonPress", 1, *c), ("KeyPress", CTRL_L, *c), ("KeyPress", ord("a"), *c), ("KeyPress", SHIFT_L, *c),
        *[("ButtonPress", 5, *s)] * 3, ("ButtonPress", 1, *d), ("ButtonPress", 1, *d), ("ButtonPress", 1, *a),
        ("ButtonPress", 2, *c), ("KeyPress", 0xFC, *c),
    ]
    events = p.events()
    wheels = [e for e in events if e["type"] == "ButtonPress" and e["button"] == 5]
    assert all(e["state"] & X.ShiftMask for e in wheels)
    drag_end = [e for e in events if e["type"] == "ButtonRelease" and e["button"] == 1][-1]
    assert (drag_end["rootX"], drag_end["rootY"]) == b
    assert nothing_held(display)


def test_openai_errors(api: httpx.Client, probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    keys = [f"U{0x4E00 + i:04X}" for i in range(30)]
    failed = gpt(api, [{"type": "click", "x": rect["x"] + 10, "y": rect["y"] + 10},
                       {"type": "keypress", "keys": keys}, {"type": "wait"}])
    problem = assert_problem(failed, 502, "desktop_input_failed")
    assert problem["failedAction"] == "call.actions[1]" and "call.actions[1]" in str(problem["detail"])
    assert len(p.wait_for(lambda e: e["type"] == "ButtonPress")) == 1  # the click before it ran
    for actions, size, field in (
        ([{"type": "click", "x": 1280, "y": 0}], (1280, 800), "call.actions[0].x"),
        ([{"type": "keypress", "keys": ["CTRL", "NOPE"]}], None, "call.actions[0].keys[1]"),
        ([{"type": "scroll", "x": 1, "y": 1, "scroll_y": 20000}], None, "call.actions[0].scroll_y"),
        ([{"type": "screenshot"}], (1024, 768), "display_width"),
    ):
        problem = assert_problem(gpt(api, actions, size), 400, "desktop_invalid_action")
        assert [e["field"] for e in problem["errors"]] == [field], problem  # type: ignore[attr-defined]
    single = api.post("/v1/desktop/openai/computer", json={"call": {"call_id": "c1", "action": {"type": "screenshot"}}})
    assert single.status_code == 200 and single.json()["acknowledged_safety_checks"] == []
