"""Open models' outputs (desktop/vendors/qwen.py, ui_tars.py, pyautogui_lines.py) as batch steps, pure: recorded
outputs of each family, and the malformed and unsafe ones refused with a 422 naming where."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from api.convert.open_models import model_plan
from api.http.problems import status_of
from desktop.actions import batch
from desktop.core.errors import DomainError
from desktop.vendors.model_plan import ModelPlan
from sandbox_desktop_wire.enums import MouseButton
from sandbox_desktop_wire.open_models import ModelActionKind, ModelActRequest

SESSION = SimpleNamespace(width=1920, height=1080)
CTRL, SHIFT, RETURN, DELETE = 0xFFE3, 0xFFE1, 0xFF0D, 0xFFFF
LEFT = MouseButton.LEFT


def parse(family: str, output: str, **options: object) -> ModelPlan:
    return model_plan(ModelActRequest.model_validate({"family": family, "text": output, **options}),
                      SESSION)[0]  # type: ignore[arg-type]


def refused(family: str, output: str, status: int = 422) -> str:
    with pytest.raises(DomainError) as exc:
        parse(family, output)
    assert status_of(exc.value) == status, exc.value
    (error,) = exc.value.extensions["errors"]
    assert error["field"] == "text"
    return str(error["message"])


def call(arguments: str) -> str:
    return f'<tool_call>\n{{"name": "computer_use", "arguments": {arguments}}}\n</tool_call>'


def test_qwen25_vl_points_are_smart_resized_pixels() -> None:
    # 1920x1080 is shown to Qwen2.5-VL as 1932x1092; its pixel (966, 546) is the screen's centre.
    p = parse("qwen2.5-vl", "I will click the button.\n" + call('{"action": "left_click", "coordinate": [966, 546]}'))
    assert p.steps == [batch.Click((960, 540), LEFT, 1)]
    (echo,) = p.actions
    assert (echo.kind, echo.source, echo.x, echo.y, echo.model_x, echo.model_y) == (
        ModelActionKind.CLICK, "left_click", 960, 540, 966, 546)


def test_qwen_actions_in_order() -> None:
    output = "".join(call(a) for a in (
        '{"action": "mouse_move", "coordinate": [500, 500]}',
        '{"action": "key", "keys": ["ctrl", "shift", "t"]}',
        '{"action": "type", "text": "hi\\n"}',
        '{"action": "double_click", "coordinate": [0, 0]}',
        '{"action": "triple_click", "coordinate": [1000, 1000]}',
        '{"action": "right_click", "coordinate": [250, 750]}',
        '{"action": "middle_click", "coordinate": [250, 750]}',
        '{"action": "left_click_drag", "coordinate": [750, 250]}',
        '{"action": "scroll", "pixels": -3, "coordinate": [500, 500]}',
        '{"action": "hscroll", "pixels": 2}',
        '{"action": "wait", "time": 0.5}'))
    p = parse("qwen3-vl", output)  # the 0-1000 grid: v / 1000 * size
    assert p.steps == [
        batch.Move(960, 540), batch.Key(((CTRL, SHIFT, ord("t")),)), batch.Type((ord("h"), ord("i"), RETURN), 10),
        batch.Click((0, 0), LEFT, 2), batch.Click((1919, 1079), LEFT, 3), batch.Click((480, 810), MouseButton.RIGHT),
        batch.Click((480, 810), MouseButton.MIDDLE),
        batch.Button(None, LEFT, True), batch.Move(1440, 270), batch.Button((1440, 270), LEFT, False),
        batch.Scroll((960, 540), 0, 3), batch.Scroll(None, 2, 0), batch.Wait(500)]
    assert [a.source for a in p.actions][:3] == ["mouse_move", "key", "type"]


def test_terminate_and_answer_are_final_answers_that_run_nothing() -> None:
    p = parse("qwen2.5-vl", call('{"action": "terminate", "status": "failure"}'))
    assert p.steps == [] and p.final is not None and (p.final.status, p.final.content) == ("failure", None)
    p = parse("qwen3-vl", call('{"action": "answer", "text": "42"}'))
    assert p.steps == [] and p.final is not None and (p.final.status, p.final.content) == ("success", "42")
    message = refused("qwen3-vl", call('{"action": "answer", "text": "42"}') + call('{"action": "wait"}'))
    assert "after the final answer" in message


def test_fara_types_at_a_point_and_browses() -> None:
    p = parse("fara", call('{"action": "type", "text": "cats", "coordinate": [966, 546], '
                           '"delete_existing_text": true}'))
    assert p.steps == [batch.Click((960, 540), LEFT, 1), batch.Key(((CTRL, ord("a")),)), batch.Key(((DELETE,),)),
                       batch.Type(tuple(map(ord, "cats")), 10), batch.Key(((RETURN,),))]  # press_enter by default
    p = parse("fara", call('{"action": "scroll", "pixels": -300}'))  # Fara's are page pixels: 3 wheel clicks
    assert p.steps == [batch.Scroll(None, 0, 3)]
    p = parse("fara", call('{"action": "web_search", "query": "red cats"}'))
    assert p.steps == [] and p.browser is not None and p.browser.url == "https://www.bing.com/search?q=red+cats"
    p = parse("fara", call('{"action": "history_back"}'))
    assert p.browser is not None and p.browser.kind == "back"
    assert "unknown action 'triple_click'" in refused("fara", call('{"action": "triple_click"}'))


def test_ui_tars_actions() -> None:
    output = ("Thought: I copy the title, then paste it below.\n"
              "Action: drag(start_box='<|box_start|>(100,200)<|box_end|>', end_box='<|box_start|>(300,200)<|box_end|>')"
              "\n\nhotkey(key='ctrl c')\n\nclick(start_box='(500,500,520,520)')\n\ntype(content='it's done\\n')")
    p = parse("ui-tars-1.0", output)
    assert p.thought == "I copy the title, then paste it below."
    assert p.steps == [batch.Drag(((192, 216), (576, 216)), LEFT), batch.Key(((CTRL, ord("c")),)),
                       batch.Click((979, 550), LEFT, 1), batch.Type((*map(ord, "it's done"), RETURN), 10)]
    p = parse("ui-tars-1.5", "Thought: open it\nAction: left_double(point='<point>966 546</point>')")
    assert p.steps == [batch.Click((960, 540), LEFT, 2)]
    p = parse("ui-tars-1.5", "Thought: down\nAction: scroll(point='<point>966 546</point>', direction='down')")
    assert p.steps == [batch.Scroll((960, 540), 0, 5)]
    p = parse("ui-tars-1.5", "Thought: done\nAction: finished(content='The total is 12.')")
    assert p.final is not None and p.final.content == "The total is 12." and p.steps == []


def test_opencua_pyautogui_lines() -> None:
    output = ("## Thought:\nSave the file.\n## Action:\nPress ctrl+s.\n## Code:\n```python\n"
              "pyautogui.click(x=966, y=546)\npyautogui.write(message='a.txt')\npyautogui.hotkey('ctrl', 's')\n"
              "pyautogui.keyDown('shift')\npyautogui.click(966, 546, button='right')\npyautogui.keyUp('shift')\n"
              "pyautogui.scroll(-2, x=0, y=0)\npyautogui.press('enter', presses=2)\n```")
    p = parse("opencua", output)
    assert p.steps == [batch.Click((960, 540), LEFT, 1), batch.Type(tuple(map(ord, "a.txt")), 10),
                       batch.Key(((CTRL, ord("s")),)), batch.Click((960, 540), MouseButton.RIGHT, 1, (SHIFT,)),
                       batch.Scroll((0, 0), 0, 2), batch.Key(((RETURN,),)), batch.Key(((RETURN,),))]
    p = parse("opencua", "pyautogui.moveTo(0.5, 0.5)\ncomputer.terminate(status='success', answer='ok')",
              convention="relative")
    assert p.steps == [batch.Move(960, 540)] and p.final is not None and p.final.content == "ok"


def test_a_non_literal_argument_is_refused_and_nothing_is_run() -> None:
    message = refused("opencua", "```python\npyautogui.moveTo(1, 1)\n"
                      "pyautogui.click(x=__import__('os').system('touch /tmp/om/pwned'), y=1)\n```")
    assert message.startswith("line 3 (pyautogui.click(x=__import__('os')") and "argument x is not a literal" in message
    assert "unknown function 'os.system'" in refused("opencua", "```python\nos.system('ls')\n```")
    assert "not Python" in refused("opencua", "```python\npyautogui.click(x=1,\n```")
    assert "is not a literal" in refused("opencua", "pyautogui.write(message='a' + open('/etc/passwd').read())")
    assert "click: argument start_box is not a string or number literal" in refused(
        "ui-tars-1.0", "Thought: x\nAction: click(start_box=exec('1'))")


@pytest.mark.parametrize(("family", "output", "named"), [
    ("qwen2.5-vl", "I am not sure what to do.", "no <tool_call> found"),
    ("qwen2.5-vl", "<tool_call>{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", </tool_call>",
     "tool_call[0]: not JSON"),
    ("qwen2.5-vl", call('{"action": "fly"}'), "tool_call[0].arguments.action: unknown action 'fly'"),
    ("qwen2.5-vl", call('{"action": "left_click", "coordinate": [1, "a"]}'),
     "tool_call[0].arguments.coordinate: expected a number"),
    ("qwen2.5-vl", call('{"action": "mouse_move"}'), "tool_call[0].arguments.coordinate: field required"),
    ("qwen2.5-vl", call('{"action": "key", "keys": ["ctrl", "hyperspace"]}'), "unknown key 'hyperspace'"),
    ("ui-tars-1.5", "Thought: hmm", "no `Action:` found"),
    ("ui-tars-1.5", "Thought: x\nAction: teleport(start_box='(1,1)')", "Action 1 (teleport(start_box='(1,1)')): "
     "unknown action 'teleport'"),
    ("ui-tars-1.5", "Thought: x\nAction: click(start_box='(1)')", "expected a point (x,y)"),
    ("ui-tars-1.5", "Thought: x\nAction: scroll(start_box='(1,1)', direction='sideways')", "direction must be"),
    ("opencua", "pyautogui.click(x=1, y=2, clicks=9)", "clicks must be 1, 2 or 3"),
    ("opencua", "pyautogui.keyUp('shift')", "released without being held down"),
])
def test_malformed_output_is_a_422_naming_what(family: str, output: str, named: str) -> None:
    assert named in refused(family, output)


def test_a_point_outside_the_models_space_is_a_400() -> None:
    assert "outside the model's 1932x1092 smart-resize space" in refused(
        "qwen2.5-vl", call('{"action": "left_click", "coordinate": [1932, 10]}'), 400)
