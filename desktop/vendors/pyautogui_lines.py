"""OpenCUA's pyautogui lines as a ModelPlan, parsed and never run.

OpenCUA prints its thought and action, then code: `pyautogui.click(x=..., y=...)`, `pyautogui.write(message=...)`,
`pyautogui.hotkey('ctrl', 'c')`, `pyautogui.scroll(-5)`, `computer.terminate(status='success')`... The code is the
fenced block when there is one (else the lines that start with `pyautogui.` or `computer.`), read with `ast.parse`:
every statement must be a call of a known function of `pyautogui` or `computer` (or `time.sleep`) whose arguments
are literals (`ast.literal_eval` of the argument's node, which evaluates nothing else), so
`pyautogui.click(x=__import__('os').system('x'))` is a 422 naming its line, and nothing runs. `import pyautogui`
and `import time` lines are skipped. Scroll amounts are pyautogui's wheel clicks, positive up (and right).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from desktop.vendors.model_plan import OUTPUT, ModelPlan, PlanBuilder, malformed, number, string
from desktop.vendors.model_space import ModelSpace
from sandbox_desktop_wire.enums import MouseButton

FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
BUTTONS = {"left": MouseButton.LEFT, "right": MouseButton.RIGHT, "middle": MouseButton.MIDDLE}
SIGNATURES: dict[str, tuple[str, ...]] = {
    "pyautogui.click": ("x", "y", "clicks", "interval", "button"),
    "pyautogui.doubleClick": ("x", "y", "interval", "button"),
    "pyautogui.tripleClick": ("x", "y", "interval", "button"),
    "pyautogui.rightClick": ("x", "y"),
    "pyautogui.middleClick": ("x", "y"),
    "pyautogui.moveTo": ("x", "y", "duration"),
    "pyautogui.dragTo": ("x", "y", "duration", "button"),
    "pyautogui.mouseDown": ("x", "y", "button"),
    "pyautogui.mouseUp": ("x", "y", "button"),
    "pyautogui.scroll": ("clicks", "x", "y"),
    "pyautogui.hscroll": ("clicks", "x", "y"),
    "pyautogui.write": ("message", "interval"),
    "pyautogui.typewrite": ("message", "interval"),
    "pyautogui.press": ("keys", "presses", "interval"),
    "pyautogui.keyDown": ("key",),
    "pyautogui.keyUp": ("key",),
    "pyautogui.hotkey": (),
    "computer.triple_click": ("x", "y"),
    "computer.wait": ("seconds",),
    "computer.terminate": ("status", "answer"),
    "time.sleep": ("seconds",),
}
"""Each function taken and its positional parameters, in order (pyautogui's own); `hotkey` takes keys only."""
IMPORTS = frozenset({"pyautogui", "time"})
DEFAULT_WAIT_S = 1.0
MAX_PRESSES = 100


def code_of(output: str) -> tuple[str, int]:
    """The code and the output line it starts at (0-based), to name lines as the output numbers them."""
    fence = FENCE.search(output)
    if fence:
        return fence.group(1), output.count("\n", 0, fence.start(1))
    lines = output.splitlines()
    kept = [line if line.lstrip().startswith(("pyautogui.", "computer.")) else "" for line in lines]
    if not any(kept):
        raise malformed(OUTPUT, "no pyautogui code found (expected a ```python block or pyautogui./computer. lines)")
    return "\n".join(line.strip() for line in kept), 0


def call_of(statement: ast.stmt, where: str) -> tuple[str, dict[str, Any]]:
    """A statement's function and arguments, by parameter name; only literal arguments are taken."""
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        raise malformed(where, "expected a call such as pyautogui.click(x=100, y=200)")
    call = statement.value
    func = call.func
    name = (f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else None)
    if name not in SIGNATURES:
        raise malformed(where, f"unknown function {ast.unparse(func)!r}; expected one of {', '.join(SIGNATURES)}")

    def literal(node: ast.expr, label: str) -> Any:
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise malformed(where, f"{name}: argument {label} is not a literal ({ast.unparse(node)[:60]})") from None

    params = SIGNATURES[name]
    if name == "pyautogui.hotkey":
        args: dict[str, Any] = {"keys": [literal(a, f"#{i + 1}") for i, a in enumerate(call.args)]}
    else:
        if len(call.args) > len(params):
            raise malformed(where, f"{name} takes at most {len(params)} positional arguments")
        args = {params[i]: literal(a, params[i]) for i, a in enumerate(call.args)}
    for kw in call.keywords:
        if kw.arg is None:
            raise malformed(where, f"{name}: ** arguments are not taken")
        args[kw.arg] = literal(kw.value, kw.arg)
    return name, args


def plan(output: str, space: ModelSpace) -> ModelPlan:
    code, first_line = code_of(output)
    try:
        module = ast.parse(code)
    except SyntaxError as exc:
        line = first_line + (exc.lineno or 1)
        raise malformed(f"line {line}", f"not Python: {exc.msg} ({(exc.text or '').strip()[:60]!r})") from None
    b = PlanBuilder(space)
    for statement in module.body:
        where = f"line {first_line + statement.lineno} ({ast.get_source_segment(code, statement) or ''})"[:120]
        if isinstance(statement, ast.Import) and all(a.name in IMPORTS for a in statement.names):
            continue
        name, args = call_of(statement, where)
        step(b, name, args, where)
    return b.done()


def step(b: PlanBuilder, name: str, args: dict[str, Any], where: str) -> None:
    def at() -> Any:
        if args.get("x") is None and args.get("y") is None:
            return None
        return b.point(args.get("x"), args.get("y"), where)

    def needed() -> Any:
        point = at()
        if point is None:
            raise malformed(where, f"{name} needs x and y")
        return point

    def button(default: str = "left") -> MouseButton:
        value = args.get("button", default)
        if value not in BUTTONS:
            raise malformed(where, f"button must be left, right or middle, got {value!r}")
        return BUTTONS[value]

    source = name
    match name:
        case "pyautogui.click":
            clicks = args.get("clicks", 1)
            if not isinstance(clicks, int) or isinstance(clicks, bool) or not 1 <= clicks <= 3:
                raise malformed(where, f"clicks must be 1, 2 or 3, got {clicks!r}")
            b.click(source, at(), button(), clicks)
        case "pyautogui.doubleClick":
            b.click(source, at(), button(), 2)
        case "pyautogui.tripleClick" | "computer.triple_click":
            b.click(source, at(), button(), 3)
        case "pyautogui.rightClick":
            b.click(source, at(), MouseButton.RIGHT)
        case "pyautogui.middleClick":
            b.click(source, at(), MouseButton.MIDDLE)
        case "pyautogui.moveTo":
            b.move(source, needed())
        case "pyautogui.dragTo":
            b.drag(source, None, needed(), button())
        case "pyautogui.mouseDown" | "pyautogui.mouseUp":
            b.button(source, at(), button(), name == "pyautogui.mouseDown")
        case "pyautogui.scroll" | "pyautogui.hscroll":
            clicks = round(number(args.get("clicks"), f"{where} clicks"))
            if name == "pyautogui.scroll":
                b.scroll(source, at(), 0, -clicks, where)
            else:
                b.scroll(source, at(), clicks, 0, where)
        case "pyautogui.write" | "pyautogui.typewrite":
            message = args.get("message")
            if isinstance(message, list):  # typewrite(['a', 'enter']): key names, one at a time
                for key in message:
                    b.keys(source, [key], where)
            else:
                b.type(source, string(message, f"{where} message"), where)
        case "pyautogui.press":
            keys = args.get("keys")
            presses = args.get("presses", 1)
            if not isinstance(presses, int) or isinstance(presses, bool) or not 1 <= presses <= MAX_PRESSES:
                raise malformed(where, f"presses must be 1 to {MAX_PRESSES}, got {presses!r}")
            for _ in range(presses):
                for key in keys if isinstance(keys, list) else [keys]:
                    b.keys(source, [key], where)
        case "pyautogui.keyDown" | "pyautogui.keyUp":
            b.key_hold(source, args.get("key"), name == "pyautogui.keyDown", where)
        case "pyautogui.hotkey":
            b.keys(source, args["keys"], where)
        case "computer.wait" | "time.sleep":
            b.wait(source, number(args.get("seconds", DEFAULT_WAIT_S), where), where)
        case "computer.terminate":
            answer = args.get("answer")
            b.final(source, string(args.get("status", "success"), where),
                    None if answer is None else string(answer, where), where)
