"""Vendor computer-use translation (desktop/vendors), pure: no X, no server."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from api.http.problems import status_of
from desktop.actions import batch
from desktop.core.errors import DesktopError, InputFailed
from desktop.input.mouse import PointerState
from desktop.screen.screenshots import Region, Screenshot
from desktop.vendors import anthropic, openai
from desktop.vendors.common import display_space

SW, SH = 1440, 900
SPACE, FIT = display_space(SW, SH, 1024, 640, "tool.display_width_px")
CTRL, SHIFT, ALT = 0xFFE3, 0xFFE1, 0xFFE9
V1, V2, V3 = "computer_20241022", "computer_20250124", "computer_20251124"


def screen(x: int, y: int) -> tuple[int, int]:
    """A 1024x640 display point on the 1440x900 screen (centre of the display pixel), written out."""
    return (2 * x + 1) * SW // 2048, (2 * y + 1) * SH // 1280


def plan(data: dict[str, Any], version: str = V3, zoom: bool = True) -> anthropic.Plan:
    return anthropic.Translator(anthropic.Tool(version, 1024, 640, zoom), SPACE).plan(data)


def field_of(exc: pytest.ExceptionInfo[DesktopError]) -> str:
    assert status_of(exc.value) == 400 and exc.value.code == "desktop_invalid_action"
    return str(exc.value.extensions["errors"][0]["field"])


def test_display_fit_is_exact_or_refused() -> None:
    assert (FIT.width, FIT.height) == (1024, 640)
    _, full = display_space(SW, SH, None, None, "x")
    assert (full.width, full.height, full.scale) == (SW, SH, 1.0)
    for size in ((1024, 768), (2000, 1250)):
        with pytest.raises(DesktopError) as exc:
            display_space(SW, SH, *size, "tool.display_width_px")
        assert field_of(exc) == "tool.display_width_px"


@pytest.mark.parametrize(("data", "expected"), [
    ({"action": "key", "text": "ctrl+a BackSpace"},
     [batch.Key(((CTRL, ord("a")), (0xFF08,)))]),
    ({"action": "type", "text": "hé✓"}, [batch.Type((ord("h"), 0xE9, 0x1002713), anthropic.TYPE_DELAY_MS)]),
    ({"action": "mouse_move", "coordinate": [512, 320]}, [batch.Move(*screen(512, 320))]),
    ({"action": "left_click", "coordinate": [0, 639]}, [batch.Click(screen(0, 639), "left", 1)]),
    ({"action": "left_click"}, [batch.Click(None, "left", 1)]),
    ({"action": "left_click", "coordinate": [10, 10], "text": "shift"}, [batch.Click(screen(10, 10), "left", 1,
                                                                                     (SHIFT,))]),
    ({"action": "left_click", "coordinate": [10, 10], "key": "ctrl+shift"},
     [batch.Click(screen(10, 10), "left", 1, (CTRL, SHIFT))]),
    ({"action": "right_click", "coordinate": [1023, 0]}, [batch.Click(screen(1023, 0), "right", 1)]),
    ({"action": "middle_click"}, [batch.Click(None, "middle", 1)]),
    ({"action": "double_click", "coordinate": [5, 6]}, [batch.Click(screen(5, 6), "left", 2)]),
    ({"action": "triple_click", "coordinate": [5, 6]}, [batch.Click(screen(5, 6), "left", 3)]),
    ({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [300, 200]},
     [batch.Drag((screen(1, 2), screen(300, 200)), "left")]),
    ({"action": "left_click_drag", "coordinate": [300, 200]},
     [batch.Button(None, "left", True), batch.Move(*screen(300, 200)), batch.Button(None, "left", False)]),
    ({"action": "left_mouse_up", "coordinate": [7, 8]}, [batch.Button(screen(7, 8), "left", False)]),
    ({"action": "left_mouse_up"}, [batch.Button(None, "left", False)]),
    ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 3},
     [batch.Scroll(None, 0, 3)]),
    ({"action": "scroll", "scroll_direction": "up", "scroll_amount": 2, "coordinate": [9, 9], "text": "alt"},
     [batch.Scroll(screen(9, 9), 0, -2, (ALT,))]),
    ({"action": "scroll", "scroll_direction": "left", "scroll_amount": 100}, [batch.Scroll(None, -100, 0)]),
    ({"action": "scroll", "scroll_direction": "right", "scroll_amount": 1}, [batch.Scroll(None, 1, 0)]),
    ({"action": "scroll", "scroll_direction": "right", "scroll_amount": 0, "coordinate": [3, 4]},
     [batch.Move(*screen(3, 4))]),
    ({"action": "hold_key", "text": "shift", "duration": 0.25}, [batch.HoldKey((SHIFT,), 250)]),
    ({"action": "wait", "duration": 2}, [batch.Wait(2000)]),
    ({"action": "wait", "duration": 100}, [batch.Wait(100000)]),
    ({"action": "screenshot"}, []),
    ({"action": "cursor_position"}, [batch.CursorPosition()]),
])
def test_anthropic_actions_become_steps(data: dict[str, Any], expected: list[batch.Step]) -> None:
    assert plan(data).steps == expected


def test_anthropic_render_and_settle_per_action() -> None:
    assert (plan({"action": "screenshot"}).render, plan({"action": "screenshot"}).settle) == ("screenshot", False)
    cursor = plan({"action": "cursor_position"})
    assert (cursor.render, cursor.settle) == ("cursor", False)
    click = plan({"action": "left_click"})
    assert (click.render, click.settle, click.press) == ("screenshot", True, None)
    down = plan({"action": "left_mouse_down", "coordinate": [100, 100]})
    assert down.steps == [] and down.press == batch.Button(screen(100, 100), "left", True)
    zoom = plan({"action": "zoom", "region": [512, 320, 1024, 640]})
    assert zoom.render == "zoom" and not zoom.settle
    (capture,) = zoom.steps
    assert isinstance(capture, batch.Capture)
    assert capture.options.region == Region(720, 450, 720, 450) and capture.options.scale == 1.0


@pytest.mark.parametrize(("data", "version", "field"), [
    ({"action": "teleport"}, V3, "input.action"),
    ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 1}, V1, "input.action"),
    ({"action": "triple_click"}, V1, "input.action"),
    ({"action": "zoom", "region": [0, 0, 10, 10]}, V2, "input.action"),
    ({"action": "key"}, V3, "input.text"),
    ({"action": "key", "text": "ctrl+Nope"}, V3, "input.text"),
    ({"action": "type", "text": ""}, V3, "input.text"),
    ({"action": "mouse_move"}, V3, "input.coordinate"),
    ({"action": "mouse_move", "coordinate": [1024, 0]}, V3, "input.coordinate"),
    ({"action": "mouse_move", "coordinate": [0, -1]}, V3, "input.coordinate"),
    ({"action": "mouse_move", "coordinate": [1, 2, 3]}, V3, "input.coordinate"),
    ({"action": "left_click_drag", "start_coordinate": [0, 700], "coordinate": [1, 1]}, V3, "input.start_coordinate"),
    ({"action": "left_click", "text": "hyperblah"}, V3, "input.text"),
    ({"action": "left_click", "key": "nope"}, V3, "input.key"),
    ({"action": "scroll", "scroll_amount": 3}, V3, "input.scroll_direction"),
    ({"action": "scroll", "scroll_direction": "sideways", "scroll_amount": 3}, V3, "input.scroll_direction"),
    ({"action": "scroll", "scroll_direction": "down"}, V3, "input.scroll_amount"),
    ({"action": "scroll", "scroll_direction": "down", "scroll_amount": 101}, V3, "input.scroll_amount"),
    ({"action": "scroll", "scroll_direction": "down", "scroll_amount": -1}, V3, "input.scroll_amount"),
    ({"action": "hold_key", "text": "shift"}, V3, "input.duration"),
    ({"action": "hold_key", "text": "shift", "duration": 100.5}, V3, "input.duration"),
    ({"action": "wait", "duration": -1}, V3, "input.duration"),
    ({"action": "zoom"}, V3, "input.region"),
    ({"action": "zoom", "region": [10, 10, 10, 20]}, V3, "input.region"),
    ({"action": "zoom", "region": [0, 0, 1025, 10]}, V3, "input.region"),
])
def test_anthropic_bad_input_names_the_field(data: dict[str, Any], version: str, field: str) -> None:
    with pytest.raises(DesktopError) as exc:
        plan(data, version)
    assert field_of(exc) == field


def test_anthropic_zoom_needs_enable_zoom_and_names_the_version() -> None:
    with pytest.raises(DesktopError) as exc:
        plan({"action": "zoom", "region": [0, 0, 10, 10]}, V3, zoom=False)
    assert "enable_zoom" in str(exc.value)
    with pytest.raises(DesktopError) as exc:
        plan({"action": "hold_key", "text": "a", "duration": 1}, V1)
    assert V2 in str(exc.value)


def shot(width: int, height: int) -> Screenshot:
    return Screenshot(b"PNGDATA", "image/png", SW, SH, Region(0, 0, SW, SH), width, height, width / SW)


def test_anthropic_content_shapes() -> None:
    outcome = batch.BatchOutcome(shot=shot(1024, 640))
    image = anthropic.content(plan({"action": "left_click"}), outcome, SPACE)
    assert image == {"content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": base64.b64encode(b"PNGDATA").decode()}}]}
    at = batch.BatchOutcome(results=[batch.StepResult(PointerState(*screen(300, 200), 0, None))])
    assert anthropic.content(plan({"action": "cursor_position"}), at, SPACE) == {
        "content": [{"type": "text", "text": "X=300,Y=200"}]}
    zoomed = batch.BatchOutcome(results=[batch.StepResult(shot=shot(720, 450))])
    assert anthropic.content(plan({"action": "zoom", "region": [0, 0, 512, 320]}), zoomed, SPACE)["content"][0][
        "type"] == "image"
    failed = batch.BatchOutcome(error=(0, InputFailed("boom")), shot=shot(1024, 640))
    assert anthropic.content(plan({"action": "left_click"}), failed, SPACE) == {
        "content": [{"type": "text", "text": "Error: boom"}], "is_error": True}


# -- OpenAI ---------------------------------------------------------------------------------------

def oplan(*actions: dict[str, Any], space: Any = SPACE) -> list[batch.Step]:
    return openai.Translator(space).plan({"call_id": "c", "actions": list(actions)}).steps


@pytest.mark.parametrize(("action", "expected"), [
    ({"type": "click", "x": 10, "y": 20}, batch.Click(screen(10, 20), "left", 1)),
    ({"type": "click", "x": 10, "y": 20, "button": "right"}, batch.Click(screen(10, 20), "right", 1)),
    ({"type": "click", "x": 10, "y": 20, "button": "wheel"}, batch.Click(screen(10, 20), "middle", 1)),
    ({"type": "click", "x": 10, "y": 20, "button": "back"}, batch.Click(screen(10, 20), "back", 1)),
    ({"type": "click", "x": 10, "y": 20, "button": "forward"}, batch.Click(screen(10, 20), "forward", 1)),
    ({"type": "click", "x": 1, "y": 2, "keys": ["CTRL", "SHIFT"]}, batch.Click(screen(1, 2), "left", 1,
                                                                              (CTRL, SHIFT))),
    ({"type": "double_click", "x": 1, "y": 2}, batch.Click(screen(1, 2), "left", 2)),
    ({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 50, "y": 60}, {"x": 70, "y": 80}], "keys": ["ALT"]},
     batch.Drag((screen(1, 2), screen(50, 60), screen(70, 80)), "left", (ALT,))),
    ({"type": "keypress", "keys": ["CTRL", "A"]}, batch.Key(((CTRL, ord("a")),))),
    ({"type": "keypress", "keys": ["ENTER"]}, batch.Key(((0xFF0D,),))),
    ({"type": "keypress", "keys": ["ESC"]}, batch.Key(((0xFF1B,),))),
    ({"type": "keypress", "keys": ["ArrowLeft"]}, batch.Key(((0xFF51,),))),
    ({"type": "keypress", "keys": ["SPACE"]}, batch.Key(((0x20,),))),
    ({"type": "move", "x": 5, "y": 6}, batch.Move(*screen(5, 6))),
    ({"type": "move", "x": 5, "y": 6, "keys": ["SHIFT"]}, batch.Move(*screen(5, 6))),
    ({"type": "scroll", "x": 5, "y": 6, "scroll_y": 300}, batch.Scroll(screen(5, 6), 0, 3)),
    ({"type": "scroll", "x": 5, "y": 6, "scroll_y": -20}, batch.Scroll(screen(5, 6), 0, -1)),
    ({"type": "scroll", "x": 5, "y": 6, "scroll_x": 149, "scroll_y": 150}, batch.Scroll(screen(5, 6), 1, 2)),
    ({"type": "scroll", "x": 5, "y": 6, "scroll_y": 10000, "keys": ["CTRL"]},
     batch.Scroll(screen(5, 6), 0, 100, (CTRL,))),
    ({"type": "scroll", "x": 5, "y": 6, "scroll_x": 0, "scroll_y": 0}, batch.Move(*screen(5, 6))),
    ({"type": "type", "text": "ü"}, batch.Type((0xFC,), openai.TYPE_DELAY_MS)),
    ({"type": "wait"}, batch.Wait(1000)),
])
def test_openai_actions_become_steps(action: dict[str, Any], expected: batch.Step) -> None:
    assert oplan(action) == [expected]


def test_openai_single_action_screenshot_and_screen_space() -> None:
    assert oplan({"type": "screenshot"}) == []
    full, _ = display_space(SW, SH, None, None, "display_width")
    single = openai.Translator(full).plan({"call_id": "c", "action": {"type": "click", "x": 1439, "y": 899}})
    assert single.steps == [batch.Click((1439, 899), "left", 1)] and single.prefixes == ["call.action"]
    mixed = openai.Translator(SPACE).plan({"actions": [{"type": "screenshot"}, {"type": "wait"}]})
    assert mixed.origins == [1] and mixed.prefixes == ["call.actions[0]", "call.actions[1]"]


@pytest.mark.parametrize(("actions", "field"), [
    ([{"type": "click", "x": 1024, "y": 0}], "call.actions[0].x"),
    ([{"type": "wait"}, {"type": "click", "x": 1, "y": -1}], "call.actions[1].y"),
    ([{"type": "click", "x": 1}], "call.actions[0].y"),
    ([{"type": "click", "x": "1", "y": 1}], "call.actions[0].x"),
    ([{"type": "click", "x": 1, "y": 1, "button": "left2"}], "call.actions[0].button"),
    ([{"type": "click", "x": 1, "y": 1, "keys": ["CTRL", "NOPE"]}], "call.actions[0].keys[1]"),
    ([{"type": "teleport"}], "call.actions[0].type"),
    ([{"type": "drag", "path": [{"x": 1, "y": 1}]}], "call.actions[0].path"),
    ([{"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 1, "y": 640}]}], "call.actions[0].path[1].y"),
    ([{"type": "keypress", "keys": []}], "call.actions[0].keys"),
    ([{"type": "keypress", "keys": "CTRL"}], "call.actions[0].keys"),
    ([{"type": "scroll", "x": 1, "y": 1, "scroll_y": 10001}], "call.actions[0].scroll_y"),
    ([{"type": "type", "text": ""}], "call.actions[0].text"),
    (["click"], "call.actions[0]"),
])
def test_openai_bad_actions_name_the_field(actions: list[Any], field: str) -> None:
    with pytest.raises(DesktopError) as exc:
        oplan(*actions)
    assert field_of(exc) == field


def test_openai_call_without_actions_and_the_output_item() -> None:
    with pytest.raises(DesktopError) as exc:
        openai.Translator(SPACE).plan({"call_id": "c"})
    assert field_of(exc) == "call.actions"
    checks = [{"id": "sc_1", "code": "malicious_instructions", "message": "m"}]
    assert openai.call_output("call_1", checks, shot(1024, 640)) == {
        "type": "computer_call_output", "call_id": "call_1", "acknowledged_safety_checks": checks,
        "output": {"type": "computer_screenshot",
                   "image_url": "data:image/png;base64," + base64.b64encode(b"PNGDATA").decode()}}


def test_wheel_clicks() -> None:
    assert [openai.wheel_clicks(v) for v in (0, 1, 49, 50, 149, 150, -1, -250, 10000)] == \
        [0, 1, 1, 1, 1, 2, -1, -3, 100]
