"""UI-TARS 1.0 and 1.5 action strings as a ModelPlan.

The model prints `Thought: ...` (or `Reflection: ... Action_Summary: ...`) then `Action: ` and one or more calls
separated by blank lines: `click(start_box='<|box_start|>(x1,y1)<|box_end|>')`, `left_double`, `right_single`,
`hover`, `drag(start_box=..., end_box=...)` (`select` is the same), `hotkey(key='ctrl c')`, `press`/`keydown`,
`keyup`/`release`, `type(content='...')`, `scroll(start_box=..., direction='down')`, `wait()`, `finished(content=...)`
and `call_user()`. 1.5 may write points as `point='<point>x y</point>'` (and `start_point`, `end_point`). A box is
`(x,y)` or `(x1,y1,x2,y2)` (its centre). The calls are read with `ast.parse` and only string and number literals are
taken; `type` and `finished` contents, which the model does not escape, are cut out by their quotes first.
"""

from __future__ import annotations

import ast
import re

from desktop.vendors.model_plan import OUTPUT, ModelPlan, PlanBuilder, malformed
from desktop.vendors.model_space import ModelSpace
from sandbox_desktop_wire.enums import MouseButton

SCROLL_CLICKS = 5
"""What UI-TARS's own executor scrolls for one `scroll`."""
WAIT_S = 5.0
"""`wait()`: "sleep for 5s and take a screenshot"."""
CLICKS = {"click": (MouseButton.LEFT, 1), "left_single": (MouseButton.LEFT, 1), "left_double": (MouseButton.LEFT, 2),
          "right_single": (MouseButton.RIGHT, 1)}
ACTIONS = (*CLICKS, "hover", "drag", "select", "hotkey", "press", "keydown", "keyup", "release", "type", "scroll",
           "wait", "finished", "call_user")
THOUGHT = re.compile(r"^(?:Thought|Reflection|Action_Summary):\s*(.*?)(?=\n?\s*Action:|\Z)", re.DOTALL)
FREE_TEXT = re.compile(r"^(type|finished)\(content=(['\"])(.*)\2\)\s*$", re.DOTALL)
POINT = re.compile(r"<point>\s*(-?[\d.]+)[\s,]+(-?[\d.]+)\s*</point>")
BBOX = re.compile(r"<bbox>\s*(-?[\d.]+)[\s,]+(-?[\d.]+)[\s,]+(-?[\d.]+)[\s,]+(-?[\d.]+)\s*</bbox>")
NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
Box = tuple[tuple[int, int], tuple[float, float]]
BOX_NAMES = {"start_box": "start", "point": "start", "start_point": "start", "end_box": "end", "end_point": "end"}


def unescape(text: str) -> str:
    """The model's escapes in a content string: \\n, \\t and escaped quotes."""
    return text.replace("\\n", "\n").replace("\\t", "\t").replace("\\'", "'").replace('\\"', '"')


def calls(output: str) -> tuple[str | None, list[str]]:
    """The thought and each action call's text."""
    text = output.strip()
    thought_match = THOUGHT.match(text)
    thought = thought_match.group(1).strip() if thought_match else None
    if "Action:" not in text:
        raise malformed(OUTPUT, "no `Action:` found (expected `Thought: ...` then `Action: click(start_box=...)`)")
    actions = [a.strip() for a in re.split(r"\)\s*\n\s*\n", text.split("Action:")[-1].strip())]
    return thought, [a if a.endswith(")") else a + ")" for a in actions if a]


def arguments(call: str, where: str) -> tuple[str, dict[str, str]]:
    """The function name and its keyword arguments (strings, as the model quotes them all)."""
    free = FREE_TEXT.match(call)
    if free:
        return free.group(1), {"content": unescape(free.group(3))}
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError as exc:
        raise malformed(where, f"cannot parse {call[:80]!r}: {exc.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise malformed(where, f"expected a call such as click(start_box='(x,y)'), got {call[:80]!r}")
    if node.args:
        raise malformed(where, f"{node.func.id}: arguments must be named (key='...')")
    kwargs: dict[str, str] = {}
    for kw in node.keywords:
        value = kw.value.value if isinstance(kw.value, ast.Constant) else None
        if kw.arg is None or isinstance(value, bool) or not isinstance(value, str | int | float):
            raise malformed(where, f"{node.func.id}: argument {kw.arg or '**'} is not a string or number literal")
        kwargs[kw.arg] = str(value)
    return node.func.id, kwargs


def box(b: PlanBuilder, value: str, where: str) -> Box:
    """A box's centre: `(x,y)`, `(x1,y1,x2,y2)`, `<point>x y</point>` or `<bbox>x1 y1 x2 y2</bbox>`."""
    value = value.replace("<|box_start|>", "").replace("<|box_end|>", "")
    value = POINT.sub(r"(\1,\2)", BBOX.sub(r"(\1,\2,\3,\4)", value))
    numbers = [float(n) for n in NUMBERS.findall(value)]
    if len(numbers) == 4:
        numbers = [(numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2]
    if len(numbers) != 2:
        raise malformed(where, f"expected a point (x,y) or a box (x1,y1,x2,y2), got {value!r}")
    return b.point(numbers[0], numbers[1], where)


def plan(output: str, space: ModelSpace) -> ModelPlan:
    b = PlanBuilder(space)
    thought, texts = calls(output)
    b.plan.thought = thought
    for i, text in enumerate(texts):
        where = f"Action {i + 1} ({' '.join(text[:60].split())})"
        name, kwargs = arguments(text, where)
        if name not in ACTIONS:
            raise malformed(where, f"unknown action {name!r}; expected one of {', '.join(ACTIONS)}")
        step(b, name, kwargs, where)
    return b.done()


def step(b: PlanBuilder, name: str, kwargs: dict[str, str], where: str) -> None:
    boxes = {BOX_NAMES[k]: box(b, v, f"{where} {k}") for k, v in kwargs.items() if k in BOX_NAMES}

    def needed(part: str = "start") -> Box:
        if part not in boxes:
            raise malformed(where, f"{name} needs {'start_box' if part == 'start' else 'end_box'}")
        return boxes[part]

    def arg(key: str, *others: str) -> str:
        for k in (key, *others):
            if k in kwargs:
                return kwargs[k]
        raise malformed(where, f"{name} needs {key}=...")

    match name:
        case "hover":
            b.move(name, needed())
        case "drag" | "select":
            b.drag(name, needed(), needed("end"))
        case "hotkey":
            b.keys(name, arg("key", "hotkey").split(), where)
        case "press":
            b.keys(name, [arg("key", "press")], where)
        case "keydown" | "keyup" | "release":
            b.key_hold(name, arg("key", "press"), name == "keydown", where)
        case "type":
            b.type(name, arg("content"), where)
        case "scroll":
            direction = arg("direction").lower()
            dx = {"left": -SCROLL_CLICKS, "right": SCROLL_CLICKS}.get(direction, 0)
            dy = {"up": -SCROLL_CLICKS, "down": SCROLL_CLICKS}.get(direction, 0)
            if not dx and not dy:
                raise malformed(where, f"direction must be up, down, left or right, got {direction!r}")
            b.scroll(name, boxes.get("start"), dx, dy, where)
        case "wait":
            b.wait(name, WAIT_S, where)
        case "finished":
            b.final(name, "success", kwargs.get("content"), where)
        case "call_user":
            b.final(name, "call_user", None, where)
        case _:
            button, count = CLICKS[name]
            b.click(name, needed(), button, count)
