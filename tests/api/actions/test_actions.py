"""`POST /v1/desktop/actions` against a real desktop, checked by independent X clients.

xprobe records the input events a managed window receives (root coordinates, modifier state);
a small painter client repaints on a click after a delay or keeps animating; xterm and xclip check
that a triple click selects a line.
"""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from Xlib import X
from Xlib import display as xdisplay

from tests.conftest import assert_problem, managed_probe, wait_for
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 300, "width": 1280, "height": 800}
W, H = 1280, 800
UNICODE = 0x01000000
CTRL_L, SHIFT_L = 0xFFE3, 0xFFE1

# Paints its window red; on a click, green after --delay seconds. With --animate it alternates
# colours every 20 ms forever. Prints "ready" once mapped.
PAINTER = r"""
import sys, time
from Xlib import X, display
mode, x, y = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = display.Display()
s = d.screen()
w = s.root.create_window(x, y, 300, 200, 0, s.root_depth, X.InputOutput, X.CopyFromParent,
                         background_pixel=0xff0000, override_redirect=True,
                         event_mask=X.ButtonPressMask | X.ExposureMask)
w.map()
d.sync()
print("ready", flush=True)
colours = [0xff0000, 0x0000ff]
for i in range(100000):
    if mode == "animate":
        time.sleep(0.02)
        w.change_attributes(background_pixel=colours[i % 2])
        w.clear_area()
        d.sync()
        continue
    ev = d.next_event()
    if ev.type == X.ButtonPress:
        time.sleep(float(mode))
        w.change_attributes(background_pixel=0x00ff00)
        w.clear_area()
        d.sync()
"""


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    """A managed xprobe window (so a click focuses it) and its client rectangle from the window list."""
    with managed_probe(api, display, tmp_path / "events.jsonl", "batch-probe") as found:
        yield found


def painter(display: str, mode: str, x: int, y: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", PAINTER, mode, str(x), str(y)], text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": display})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def pixel(image: dict, x: int, y: int) -> Any:
    picture = Image.open(io.BytesIO(base64.b64decode(image["data"])))
    return picture.convert("RGB").getpixel((x, y))


def nothing_held(display: str) -> bool:
    d = xdisplay.Display(display)
    try:
        keys = any(d.query_keymap())
        buttons = d.screen().root.query_pointer().mask & (X.Button1Mask | X.Button2Mask | X.Button3Mask)
        return not keys and not buttons
    finally:
        d.close()


def keysym_now(display: str, keycode: int, state: int) -> int:
    """The keysym of `keycode` in the keymap as it is now (xprobe's cached keymap misses spare keycodes
    bound for characters outside the layout; those bindings stay for 1.5 s after use)."""
    d = xdisplay.Display(display)
    try:
        return int(d.keycode_to_keysym(keycode, 1 if state & X.ShiftMask else 0))
    finally:
        d.close()


# Each space: its request options, and how a screen target is written in it and read back
# (the formulas of docs/actions.md, written out here independently of desktop/input/coordinates.py).
Mapping = Callable[[int, int], tuple[int, int]]
SPACES: dict[str, tuple[dict[str, Any], Mapping, Mapping]] = {
    "screen": ({}, lambda sx, sy: (sx, sy), lambda x, y: (x, y)),
    "image-0.6": ({"coordinates": {"space": "image"}, "screenshot": {"scale": 0.6}},
                  lambda sx, sy: (sx * 768 // W, sy * 480 // H),
                  lambda x, y: ((2 * x + 1) * W // (2 * 768), (2 * y + 1) * H // (2 * 480))),
    "normalized": ({"coordinates": {"space": "normalized"}},
                   lambda sx, sy: (-(-sx * 1000 // W), -(-sy * 1000 // H)),
                   lambda x, y: (x * W // 1000, y * H // 1000)),
}


@pytest.mark.parametrize("space", SPACES)
def test_a_batch_reaches_the_client_in_order_at_the_right_places(api: httpx.Client, display: str,
                                                                 probe: tuple[Probe, dict], space: str) -> None:
    p, rect = probe
    options, to_space, to_screen = SPACES[space]
    left, top = rect["x"], rect["y"]
    targets = [(left + 101, top + 57), (left + 203, top + 211), (left + 517, top + 333), (left + 640, top + 401)]
    points = [to_space(*t) for t in targets]
    expected = [to_screen(*pt) for pt in points]
    body = {
        **options,
        "actions": [
            {"type": "click", "x": points[0][0], "y": points[0][1]},
            {"type": "type", "text": "hé✓", "delayMs": 0},
            {"type": "key", "keys": "ctrl+s"},
            {"type": "drag", "path": [{"x": points[1][0], "y": points[1][1]}, {"x": points[2][0], "y": points[2][1]}]},
            {"type": "scroll", "x": points[3][0], "y": points[3][1], "deltaY": 2},
            {"type": "cursor_position"},
        ],
    }
    answer = api.post("/v1/desktop/actions", json=body).json()
    assert "error" not in answer, answer
    assert [r["index"] for r in answer["results"]] == list(range(6)) and all(r["ok"] for r in answer["results"])
    assert answer["coordinates"]["space"] == space.split("-")[0]
    # Positions come back in the request's space: exactly the points sent.
    assert (answer["results"][0]["x"], answer["results"][0]["y"]) == points[0]
    assert (answer["results"][5]["x"], answer["results"][5]["y"]) == points[3]

    p.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 5, count=2)
    events = [e for e in p.events() if e["type"] != "MotionNotify" and e["type"] != "MapNotify"]
    summary = [(e["type"], e["button"] if "button" in e else keysym_now(display, e["keycode"], e["state"]))
               for e in events if e["type"] in ("ButtonPress", "KeyPress")]
    assert summary == [("ButtonPress", 1), ("KeyPress", ord("h")), ("KeyPress", 0xE9),
                       ("KeyPress", UNICODE + 0x2713), ("KeyPress", CTRL_L), ("KeyPress", ord("s")),
                       ("ButtonPress", 1), ("ButtonPress", 5), ("ButtonPress", 5)]
    presses = [e for e in events if e["type"] == "ButtonPress"]
    releases = [e for e in events if e["type"] == "ButtonRelease"]
    ctrl_s = next(e for e in events if e["type"] == "KeyPress" and e["keysym"] == ord("s"))
    assert ctrl_s["state"] & X.ControlMask
    # Zero coordinate error: every event at exactly the screen pixel the space's formula gives.
    assert [(e["rootX"], e["rootY"]) for e in presses] == [expected[0], expected[1], expected[3], expected[3]]
    assert (releases[1]["rootX"], releases[1]["rootY"]) == expected[2]  # the drag ends where asked
    assert nothing_held(display)


def test_modifiers_are_held_during_the_click_and_released_after(api: httpx.Client, display: str,
                                                                probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    x, y = rect["x"] + 50, rect["y"] + 50
    answer = api.post("/v1/desktop/actions", json={"actions": [
        {"type": "click", "x": x, "y": y, "modifiers": ["ctrl", "shift"]},
        {"type": "scroll", "x": x, "y": y, "deltaY": -1, "modifiers": ["alt"]},
    ]}).json()
    assert "error" not in answer, answer
    click = p.wait_for(lambda e: e["type"] == "ButtonPress" and e["button"] == 1)[0]
    assert click["state"] & X.ControlMask and click["state"] & X.ShiftMask
    wheel = p.wait_for(lambda e: e["type"] == "ButtonPress" and e["button"] == 4)[0]
    assert wheel["state"] & X.Mod1Mask and not wheel["state"] & (X.ControlMask | X.ShiftMask)
    assert nothing_held(display)


def test_a_button_left_down_is_released_when_the_batch_ends(api: httpx.Client, display: str,
                                                            probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    answer = api.post("/v1/desktop/actions", json={"actions": [
        {"type": "down", "x": rect["x"] + 20, "y": rect["y"] + 20}]}).json()
    assert answer["results"][0]["ok"]
    assert p.wait_for(lambda e: e["type"] == "ButtonRelease")
    assert nothing_held(display)


@pytest.mark.parametrize(("action", "field", "status"), [
    ({"type": "click", "x": 5000, "y": 10}, "actions[1].x", 400),
    ({"type": "click", "x": 10, "y": 10, "count": 4}, "actions[1].count", 400),
    ({"type": "click", "x": 10}, "actions[1].y", 400),
    ({"type": "key", "keys": "ctrl+Nope"}, "actions[1].keys", 400),
    ({"type": "type", "text": ""}, "actions[1].text", 400),
    ({"type": "click", "x": 10, "y": 10, "modifiers": ["ctrl", "hyperblah"]}, "actions[1].modifiers[1]", 400),
    ({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": -1, "y": 5}]}, "actions[1].path[1].x", 400),
    ({"type": "scroll", "x": 10, "y": 10}, "actions[1].deltaY", 400),
    ({"type": "wait", "durationMs": 70000}, "actions[1].durationMs", 400),
    ({"type": "zoom", "region": {"x": 1200, "y": 0, "width": 100, "height": 100}}, "actions[1].region.width", 400),
    ({"type": "teleport"}, "actions[1]", 422),
    ({"type": "move", "x": "1", "y": 2}, "actions[1].x", 422),
])
def test_validation_names_the_action_and_runs_nothing(api: httpx.Client, probe: tuple[Probe, dict],
                                                      action: dict, field: str, status: int) -> None:
    p, rect = probe
    first = {"type": "click", "x": rect["x"] + 10, "y": rect["y"] + 10}
    response = api.post("/v1/desktop/actions", json={"actions": [first, action]})
    problem = assert_problem(response, status, "desktop_invalid_action" if status == 400 else "invalid_request")
    errors: Any = problem["errors"]
    assert [e["field"] for e in errors] == [field], problem
    # A later click arrives, and it is the only one: the rejected batch ran nothing.
    api.post("/v1/desktop/actions", json={"actions": [{"type": "click", "x": rect["x"] + 30, "y": rect["y"] + 30}]})
    clicks = p.wait_for(lambda e: e["type"] == "ButtonPress")
    assert [(e["x"], e["y"]) for e in clicks] == [(30, 30)]


def test_an_error_mid_batch_stops_there_and_names_the_index(api: httpx.Client, display: str,
                                                            probe: tuple[Probe, dict]) -> None:
    p, rect = probe
    # More characters missing from the layout than there are spare keycodes, in one chord: fails when run.
    chord = "+".join(f"U{0x4E00 + i:04X}" for i in range(30))
    answer = api.post("/v1/desktop/actions", json={"actions": [
        {"type": "click", "x": rect["x"] + 10, "y": rect["y"] + 10},
        {"type": "key", "keys": chord},
        {"type": "click", "x": rect["x"] + 90, "y": rect["y"] + 90},
    ]}).json()
    assert [r["index"] for r in answer["results"]] == [0]
    assert answer["error"]["index"] == 1 and answer["error"]["type"] == "key"
    assert answer["error"]["problem"]["code"] == "desktop_input_failed"
    assert answer["error"]["problem"]["status"] == 502
    api.post("/v1/desktop/actions", json={"actions": [{"type": "click", "x": rect["x"] + 30, "y": rect["y"] + 30}]})
    clicks = p.wait_for(lambda e: e["type"] == "ButtonPress", count=2)
    assert [(e["x"], e["y"]) for e in clicks] == [(10, 10), (30, 30)]
    assert nothing_held(display)


def test_settle_returns_the_screen_after_a_delayed_repaint(api: httpx.Client, display: str) -> None:
    proc = painter(display, "0.3", 700, 400)
    try:
        answer = api.post("/v1/desktop/actions", json={
            "actions": [{"type": "click", "x": 850, "y": 500}],
            "settle": {"quietMs": 600, "timeoutMs": 10000},
            "screenshot": {"format": "png"},
        }).json()
        assert answer["settled"] is True, answer
        shot = answer["screenshot"]
        assert shot["frame"]["imageWidth"] == W and shot["frame"]["space"] == "screen"
        assert pixel(shot, 850, 450) == (0, 255, 0)  # the repainted (green) state, not the red one
    finally:
        proc.kill()
        proc.wait()


def test_settle_gives_up_on_a_screen_that_keeps_changing(api: httpx.Client, display: str) -> None:
    proc = painter(display, "animate", 700, 400)
    try:
        answer = api.post("/v1/desktop/actions", json={
            "actions": [], "settle": {"quietMs": 300, "timeoutMs": 800},
            "screenshot": {"format": "jpeg", "maxLongEdge": 640},
        }).json()
        assert answer["settled"] is False and answer["settleMs"] >= 800, answer
        frame = answer["screenshot"]["frame"]
        assert (frame["imageWidth"], frame["imageHeight"]) == (640, 400) and answer["screenshot"]["mediaType"] == \
            "image/jpeg"
    finally:
        proc.kill()
        proc.wait()


def test_screenshots_and_zoom_state_their_frame(api: httpx.Client, display: str) -> None:
    proc = painter(display, "10", 700, 400)  # a red 300x200 rectangle at (700, 400)
    try:
        answer = api.post("/v1/desktop/actions", json={
            "coordinates": {"space": "normalized"},
            "screenshot": {"maxLongEdge": 1000, "maxPixels": 500000},
            "actions": [{"type": "screenshot"},
                        {"type": "zoom", "region": {"x": 500, "y": 500, "width": 100, "height": 100}}],
        }).json()
        full, zoom = (r["image"]["frame"] for r in answer["results"])
        assert full["space"] == "normalized" and full["imageWidth"] * full["imageHeight"] <= 500000
        assert full["imageWidth"] == 894 and full["imageHeight"] == 559  # 1280x800 scaled to 0.6987
        # Normalised 500..600 is screen 640..768 x 400..480, at native resolution.
        assert zoom["region"] == {"x": 640, "y": 400, "width": 128, "height": 80}
        assert (zoom["imageWidth"], zoom["imageHeight"], zoom["scale"]) == (128, 80, 1.0)
        assert pixel(answer["results"][1]["image"], 100, 40) == (255, 0, 0)  # screen (740, 440): the painter
    finally:
        proc.kill()
        proc.wait()


def test_triple_click_selects_a_line_in_xterm(api: httpx.Client, display: str) -> None:
    launched = api.post("/v1/desktop/launch", json={
        "app": "xterm", "args": ["-T", "triple-term", "-e", "sh", "-c", "echo alpha beta gamma; sleep 600"],
        "wait": True}).json()
    try:
        term = next(w for w in api.get("/v1/desktop/windows").json()["windows"] if w["id"] == launched["windowId"])
        wait_for(lambda: api.get("/v1/desktop/screenshot").status_code == 200, "a screenshot")
        answer = api.post("/v1/desktop/actions", json={"actions": [
            {"type": "click", "x": term["x"] + 40, "y": term["y"] + 9, "count": 3}]}).json()
        assert "error" not in answer, answer

        def primary() -> str:
            out = subprocess.run(["xclip", "-o", "-selection", "primary"], capture_output=True, text=True,
                                 env={**os.environ, "DISPLAY": display}, timeout=5)
            return out.stdout.strip()

        assert wait_for(lambda: primary() == "alpha beta gamma", "PRIMARY to hold the line")
    finally:
        api.post(f"/v1/processes/{launched['processId']}/kill")
