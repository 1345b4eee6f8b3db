"""Mouse and window actions against a real Xvfb, checked by an independent X client and xwininfo."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import assert_problem
from tests.support.xprobe import Probe

PROBE_X, PROBE_Y = 100, 100


DESKTOP = {"displayNum": 210, "width": 1280, "height": 800}


@pytest.fixture
def probe(display: str, tmp_path: Path) -> Iterator[Probe]:
    p = Probe(display, tmp_path / "events.jsonl", f"400x300+{PROBE_X}+{PROBE_Y}")
    yield p
    p.close()


def buttons(events: list[dict], kind: str) -> list[int]:
    return [e["button"] for e in events if e["type"] == kind]


def test_move_and_position_report_the_window_under_the_pointer(api: httpx.Client, probe: Probe) -> None:
    moved = api.post("/v1/desktop/mouse/move", json={"x": 150, "y": 160}).json()
    assert (moved["x"], moved["y"], moved["screen"]) == (150, 160, 0)
    assert moved["window"].isdigit()
    assert api.get("/v1/desktop/mouse/position").json() == moved
    motion = probe.wait_for(lambda e: e["type"] == "MotionNotify" and e["rootX"] == 150)
    assert motion and (motion[-1]["x"], motion[-1]["y"]) == (150 - PROBE_X, 160 - PROBE_Y)


@pytest.mark.parametrize(("button", "number"), [("left", 1), ("middle", 2), ("right", 3), ("back", 8),
                                                ("forward", 9)])
def test_click_each_button(api: httpx.Client, probe: Probe, button: str, number: int) -> None:
    body = api.post("/v1/desktop/mouse/click", json={"x": 200, "y": 210, "button": button}).json()
    assert (body["x"], body["y"]) == (200, 210)
    events = probe.wait_for(lambda e: e["type"] == "ButtonRelease")
    assert buttons(probe.events(), "ButtonPress") == [number] and buttons(events, "ButtonRelease") == [number]
    press = next(e for e in probe.events() if e["type"] == "ButtonPress")
    assert (press["x"], press["y"]) == (200 - PROBE_X, 210 - PROBE_Y)


@pytest.mark.parametrize("count", [2, 3])
def test_double_and_triple_clicks_arrive_as_fast_pairs(api: httpx.Client, probe: Probe, count: int) -> None:
    api.post("/v1/desktop/mouse/click", json={"x": 300, "y": 300, "clickCount": count})
    releases = probe.wait_for(lambda e: e["type"] == "ButtonRelease", count)
    presses = [e for e in probe.events() if e["type"] == "ButtonPress"]
    assert len(presses) == count and len(releases) == count
    # Every click within a toolkit's multi-click time (GTK/Qt default 400-500 ms), strictly increasing.
    times = [e["time"] for e in presses]
    assert times == sorted(times) and times[-1] - times[0] < 250


def test_down_and_up_hold_and_release(api: httpx.Client, probe: Probe) -> None:
    api.post("/v1/desktop/mouse/down", json={"x": 250, "y": 250, "button": "right"})
    assert probe.wait_for(lambda e: e["type"] == "ButtonPress")[0]["button"] == 3
    assert not [e for e in probe.events() if e["type"] == "ButtonRelease"]
    api.post("/v1/desktop/mouse/up", json={"button": "right"})  # no coordinates: where it is
    release = probe.wait_for(lambda e: e["type"] == "ButtonRelease")
    assert release[0]["button"] == 3 and (release[0]["rootX"], release[0]["rootY"]) == (250, 250)


def test_drag_moves_through_intermediate_points(api: httpx.Client, probe: Probe) -> None:
    body = api.post("/v1/desktop/mouse/drag", json={"startX": 120, "startY": 120, "endX": 420, "endY": 320,
                                                     "steps": 10, "durationMs": 100}).json()
    assert (body["x"], body["y"]) == (420, 320)
    probe.wait_for(lambda e: e["type"] == "ButtonRelease")
    events = probe.events()
    press = next(i for i, e in enumerate(events) if e["type"] == "ButtonPress")
    release = next(i for i, e in enumerate(events) if e["type"] == "ButtonRelease")
    motions = [e for e in events[press:release] if e["type"] == "MotionNotify"]
    assert len(motions) >= 9, motions
    assert all(e["state"] & 0x100 for e in motions)  # Button1 held throughout
    assert (events[press]["rootX"], events[release]["rootX"]) == (120, 420)
    assert motions[-1]["time"] - events[press]["time"] >= 80  # spread over durationMs


def test_scroll_sends_wheel_clicks(api: httpx.Client, probe: Probe) -> None:
    api.post("/v1/desktop/mouse/scroll", json={"x": 200, "y": 200, "deltaY": 3, "deltaX": -2})
    probe.wait_for(lambda e: e["type"] == "ButtonRelease", 5)
    assert buttons(probe.events(), "ButtonPress") == [5, 5, 5, 6, 6]
    api.post("/v1/desktop/mouse/scroll", json={"x": 200, "y": 200, "deltaY": -1, "deltaX": 1})
    probe.wait_for(lambda e: e["type"] == "ButtonRelease", 7)
    assert buttons(probe.events(), "ButtonPress")[5:] == [4, 7]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("move", {"x": 1280, "y": 0}, "x"), ("move", {"x": 0, "y": 800}, "y"), ("move", {"x": -1, "y": 0}, "x"),
    ("move", {"x": 65536 + 10, "y": 10}, "x"), ("click", {"x": 10, "y": 10, "clickCount": 0}, "clickCount"),
    ("click", {"x": 10, "y": 10, "clickCount": 4}, "clickCount"), ("down", {"x": 10}, "y"),
    ("drag", {"startX": 0, "startY": 0, "endX": 5000, "endY": 0}, "endX"),
    ("scroll", {"x": 10, "y": 10}, "deltaY"), ("drag", {"startX": 0, "startY": 0, "endX": 5, "endY": 5,
                                                        "steps": 0}, "steps"),
])
def test_bad_mouse_input_is_400_naming_the_field(api: httpx.Client, path: str, body: dict, field: str) -> None:
    problem = assert_problem(api.post(f"/v1/desktop/mouse/{path}", json=body), 400, "desktop_invalid_action")
    assert problem["errors"][0]["field"] == field  # type: ignore[index]
    if path == "move" and field in ("x", "y") and body[field] > 0:
        assert "1280x800" in problem["detail"]  # type: ignore[operator]


def test_bad_button_and_missing_coordinates_are_422(api: httpx.Client) -> None:
    assert_problem(api.post("/v1/desktop/mouse/click", json={"x": 1, "y": 1, "button": "bogus"}), 422)
    problem = assert_problem(api.post("/v1/desktop/mouse/click", json={"y": 1}), 422)
    assert problem["errors"][0]["field"] == "x"  # type: ignore[index]


# -- windows ---------------------------------------------------------------------------------------

def xwininfo(display: str, wid: str) -> dict[str, int]:
    text = subprocess.run(["xwininfo", "-display", display, "-id", wid], capture_output=True, text=True,
                          timeout=10, check=True).stdout
    fields = {"x": r"Absolute upper-left X:\s+(-?\d+)", "y": r"Absolute upper-left Y:\s+(-?\d+)",
              "width": r"Width:\s+(\d+)", "height": r"Height:\s+(\d+)"}
    return {k: int(re.search(p, text).group(1)) for k, p in fields.items()}  # type: ignore[union-attr]


@pytest.fixture
def two_windows(display: str, tmp_path: Path, api: httpx.Client) -> Iterator[tuple[dict, dict]]:
    probes = [Probe(display, tmp_path / f"w{i}.jsonl", f"300x200+{50 + 400 * i}+80", override_redirect=False,
                    title=f"managed-{i}") for i in range(2)]
    deadline = time.monotonic() + 10
    listed: list[dict] = []
    while time.monotonic() < deadline:
        listed = [w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"].startswith("managed-")]
        if len(listed) == 2:
            break
        time.sleep(0.05)
    assert len(listed) == 2, listed
    yield tuple(sorted(listed, key=lambda w: w["title"]))  # type: ignore[misc]
    for p in probes:
        p.close()


def test_list_reports_client_geometry_matching_xwininfo(api: httpx.Client, display: str,
                                                        two_windows: tuple[dict, dict]) -> None:
    for window in two_windows:
        geometry = xwininfo(display, window["id"])
        assert geometry == {k: window[k] for k in ("x", "y", "width", "height")}
        frame = window["frame"]
        assert frame["x"] <= window["x"] and frame["y"] <= window["y"]
        assert frame["width"] >= window["width"] and frame["height"] >= window["height"]
        assert window["pid"] > 0


def test_focus_makes_a_window_active(api: httpx.Client, two_windows: tuple[dict, dict]) -> None:
    first, second = two_windows
    for target in (first, second, first):
        info = api.post(f"/v1/desktop/windows/{target['id']}/focus").json()
        assert info["id"] == target["id"] and info["isActive"] is True
        assert api.get("/v1/desktop/windows/focused").json()["id"] == target["id"]
        others = [w for w in api.get("/v1/desktop/windows").json()["windows"] if w["id"] != target["id"]]
        assert not any(w["isActive"] for w in others)


def test_move_places_the_client_area_exactly(api: httpx.Client, display: str,
                                             two_windows: tuple[dict, dict]) -> None:
    window = two_windows[0]
    for x, y in ((200, 150), (51, 70), (0, 0)):
        info = api.post(f"/v1/desktop/windows/{window['id']}/move", json={"x": x, "y": y}).json()
        assert (info["x"], info["y"]) == (x, y), info
        assert xwininfo(display, window["id"])["x"] == x and xwininfo(display, window["id"])["y"] == y


def test_resize_reports_the_applied_size(api: httpx.Client, display: str, two_windows: tuple[dict, dict]) -> None:
    window = two_windows[1]
    info = api.post(f"/v1/desktop/windows/{window['id']}/resize", json={"width": 500, "height": 320}).json()
    assert (info["width"], info["height"]) == (500, 320)
    geometry = xwininfo(display, window["id"])
    assert (geometry["width"], geometry["height"]) == (500, 320)
    assert (info["x"], info["y"]) == (geometry["x"], geometry["y"])


@pytest.mark.parametrize("wid", ["12345", "abc", "0", "-5", "99999999999"])
def test_unknown_or_malformed_window_is_404(api: httpx.Client, wid: str) -> None:
    for action, body in (("focus", None), ("move", {"x": 1, "y": 1}), ("resize", {"width": 10, "height": 10})):
        response = api.post(f"/v1/desktop/windows/{wid}/{action}", json=body)
        assert_problem(response, 404, "window_not_found")


def test_bad_window_geometry_is_400(api: httpx.Client, two_windows: tuple[dict, dict]) -> None:
    wid = two_windows[0]["id"]
    problem = assert_problem(api.post(f"/v1/desktop/windows/{wid}/resize", json={"width": 0, "height": 10}), 400)
    assert problem["errors"][0]["field"] == "width"  # type: ignore[index]
    assert_problem(api.post(f"/v1/desktop/windows/{wid}/move", json={"x": 40000, "y": 0}), 400)


def test_no_focused_window_is_404(api: httpx.Client, display: str) -> None:
    # Only the probe-less desktop: every managed window closed.
    windows = api.get("/v1/desktop/windows").json()["windows"]
    if windows:
        pytest.skip("windows left open by another test")
    assert_problem(api.get("/v1/desktop/windows/focused"), 404, "no_focused_window")


def test_xterm_moves_and_resizes_where_asked(api: httpx.Client, display: str) -> None:
    """xterm has a border and size increments: the reference reported (51,70) as (52,90)."""
    launched = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "moving-term"],
                                                    "wait": True}).json()
    wid = launched["windowId"]
    try:
        info = api.post(f"/v1/desktop/windows/{wid}/move", json={"x": 51, "y": 70}).json()
        assert (info["x"], info["y"]) == (51, 70)
        assert {k: xwininfo(display, wid)[k] for k in ("x", "y")} == {"x": 51, "y": 70}
        resized = api.post(f"/v1/desktop/windows/{wid}/resize", json={"width": 400, "height": 300}).json()
        geometry = xwininfo(display, wid)
        # Character cells round the size; what is reported is what the window really has.
        assert (resized["width"], resized["height"]) == (geometry["width"], geometry["height"])
        assert abs(resized["width"] - 400) < 20 and abs(resized["height"] - 300) < 30
        assert (resized["x"], resized["y"]) == (51, 70)
    finally:
        api.post(f"/v1/processes/{launched['processId']}/kill")


def test_clicks_and_keys_on_a_managed_window_arrive_in_order(api: httpx.Client, display: str,
                                                             tmp_path: Path) -> None:
    """Click-to-focus must not freeze the pointer: nothing reordered, nothing lost, keys follow the click."""
    other = Probe(display, tmp_path / "other.jsonl", "300x200+700+80", override_redirect=False, title="other")
    target = Probe(display, tmp_path / "target.jsonl", "300x200+100+300", override_redirect=False, title="target")
    try:
        api.post("/v1/desktop/mouse/click", json={"x": 800, "y": 150})  # focus the other window first
        # The order that lost presses with openbox's click-to-focus grab: a keymap change (ü is
        # bound to a spare keycode), a modifier held around a scroll, then a double click and a drag.
        result = api.post("/v1/desktop/actions", json={"actions": [
            {"type": "click", "x": 200, "y": 400},
            {"type": "type", "text": "ü", "delayMs": 0},
            {"type": "key", "keys": "ctrl+a"},
            {"type": "scroll", "x": 210, "y": 410, "deltaY": 3, "modifiers": ["shift"]},
            {"type": "click", "x": 210, "y": 410, "count": 2},
            {"type": "drag", "path": [{"x": 150, "y": 350}, {"x": 250, "y": 450}]},
            {"type": "click", "x": 220, "y": 420, "button": "middle"},
        ]}).json()
        assert "error" not in result, result
        target.wait_for(lambda e: e["type"] == "ButtonRelease" and e.get("button") == 2)
        buttons_seen = [(e["type"], e["button"], e["rootX"], e["rootY"]) for e in target.events()
                        if e["type"] in ("ButtonPress", "ButtonRelease")]
        assert buttons_seen == [
            ("ButtonPress", 1, 200, 400), ("ButtonRelease", 1, 200, 400),
            *[(kind, 5, 210, 410) for _ in range(3) for kind in ("ButtonPress", "ButtonRelease")],
            *[(kind, 1, 210, 410) for _ in range(2) for kind in ("ButtonPress", "ButtonRelease")],
            ("ButtonPress", 1, 150, 350), ("ButtonRelease", 1, 250, 450),
            ("ButtonPress", 2, 220, 420), ("ButtonRelease", 2, 220, 420),
        ], buttons_seen
        # Keys went to the clicked window, after the click that focused it.
        order = [e["type"] for e in target.events() if e["type"] in ("ButtonPress", "KeyPress")]
        assert order[0] == "ButtonPress" and "KeyPress" in order
        assert not [e for e in other.events() if e["type"] == "KeyPress"]
    finally:
        other.close()
        target.close()
