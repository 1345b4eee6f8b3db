"""The `computer_use` tool calls of Qwen2.5-VL, Qwen3-VL and Fara-7B as a ModelPlan.

Each call is `<tool_call>{"name": "computer_use", "arguments": {"action": ..., ...}}</tool_call>` (JSON; a bare JSON
object is taken too), run in the order printed. The actions are the Qwen cookbook's (`key`, `type`, `mouse_move`,
`left_click`, `left_click_drag`, `right_click`, `middle_click`, `double_click`, `triple_click`, `scroll`, `hscroll`,
`wait`, `terminate`, `answer`) and Fara's (`type` at a `coordinate` with `press_enter` and `delete_existing_text`,
`visit_url`, `web_search`, `history_back`, `pause_and_memorize_fact`). Scroll amounts: Qwen's `pixels` go to
pyautogui's `scroll`, which counts wheel clicks, so they are clicks here; Fara's harness scrolls the page by pixels,
so Fara's are pixels (100 to a click, desktop/vendors/openai.py). Positive is up (and right for `hscroll`).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from desktop.vendors.gemini import Browser
from desktop.vendors.model_plan import OUTPUT, ModelPlan, PlanBuilder, malformed, number, string
from desktop.vendors.model_space import ModelSpace
from desktop.vendors.openai import wheel_clicks
from sandbox_desktop_wire.enums import MouseButton

TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
TOOL_NAMES = ("computer_use", "computer")
CLICKS = {"left_click": (MouseButton.LEFT, 1), "right_click": (MouseButton.RIGHT, 1),
          "middle_click": (MouseButton.MIDDLE, 1), "double_click": (MouseButton.LEFT, 2),
          "triple_click": (MouseButton.LEFT, 3)}
QWEN_ACTIONS = (*CLICKS, "key", "type", "mouse_move", "left_click_drag", "scroll", "hscroll", "wait", "terminate",
                "answer")
FARA_ACTIONS = ("key", "type", "mouse_move", "left_click", "scroll", "visit_url", "web_search", "history_back",
                "pause_and_memorize_fact", "wait", "terminate")


def tool_calls(output: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Each call's place (`tool_call[i]`) and its `arguments`."""
    bodies = [m.group(1) for m in TOOL_CALL.finditer(output)]
    if not bodies:
        stripped = output.strip()
        if not stripped.startswith("{"):
            raise malformed(OUTPUT, "no <tool_call> found (expected <tool_call>{\"name\": \"computer_use\", "
                            "\"arguments\": {...}}</tool_call>)")
        bodies = [stripped]
    calls: list[tuple[str, Mapping[str, Any]]] = []
    for i, body in enumerate(bodies):
        where = f"tool_call[{i}]"
        try:
            call = json.loads(body)
        except json.JSONDecodeError as exc:
            raise malformed(where, f"not JSON ({exc.msg} at character {exc.pos}): {body.strip()[:80]!r}") from None
        if not isinstance(call, dict):
            raise malformed(where, "expected an object {name, arguments}")
        if call.get("name") not in TOOL_NAMES:
            raise malformed(f"{where}.name", f"unknown tool {call.get('name')!r}; expected computer_use")
        arguments = call.get("arguments")
        if isinstance(arguments, str):  # some servers pass the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                raise malformed(f"{where}.arguments", "a string that is not JSON") from None
        if not isinstance(arguments, dict):
            raise malformed(f"{where}.arguments", "expected an object with an action")
        calls.append((where, arguments))
    return calls


def plan(output: str, space: ModelSpace, fara: bool, search_url: str) -> ModelPlan:
    builder = PlanBuilder(space)
    known = FARA_ACTIONS if fara else QWEN_ACTIONS
    for where, args in tool_calls(output):
        action = args.get("action")
        if action not in known:
            raise malformed(f"{where}.arguments.action", f"unknown action {action!r}; expected one of "
                            f"{', '.join(known)}")
        step(builder, str(action), args, f"{where}.arguments", fara, search_url)
    return builder.done()


def step(b: PlanBuilder, action: str, args: Mapping[str, Any], where: str, fara: bool, search_url: str) -> None:
    def at(required: bool = True) -> Any:
        value = args.get("coordinate")
        if value is None:
            if required:
                raise malformed(f"{where}.coordinate", "field required")
            return None
        return b.pair(value, f"{where}.coordinate")

    def text(name: str) -> str:
        value = args.get(name)
        if value is None:
            raise malformed(f"{where}.{name}", "field required")
        return string(value, f"{where}.{name}")

    match action:
        case "key":
            keys = args.get("keys")
            if isinstance(keys, str):
                keys = [keys]
            if not isinstance(keys, list):
                raise malformed(f"{where}.keys", "expected a list of key names")
            b.keys(action, keys, f"{where}.keys")
        case "type":
            point = at(required=False) if fara else None
            if point is not None:
                b.click(action, point)
            if fara and args.get("delete_existing_text") is True:
                b.keys(action, ["ctrl", "a"], where)
                b.keys(action, ["Delete"], where)
            b.type(action, text("text"), f"{where}.text")
            if fara and args.get("press_enter", True) is True:
                b.keys(action, ["Return"], where)
        case "mouse_move":
            b.move(action, at())
        case "left_click_drag":
            b.drag(action, None, at())
        case "scroll" | "hscroll":
            amount = number(args.get("pixels"), f"{where}.pixels")
            clicks = wheel_clicks(round(amount)) if fara else round(amount)
            if action == "scroll":
                b.scroll(action, at(required=False), 0, -clicks, f"{where}.pixels")
            else:
                b.scroll(action, at(required=False), clicks, 0, f"{where}.pixels")
        case "wait":
            b.wait(action, number(args.get("time", 1), f"{where}.time"), f"{where}.time")
        case "terminate":
            b.final(action, text("status"), None, where)
        case "answer":
            b.final(action, "success", text("text"), where)
        case "visit_url":
            b.browse(action, Browser("navigate", text("url")), where)
        case "web_search":
            url = search_url.replace("{query}", urllib.parse.quote_plus(text("query")))
            b.browse(action, Browser("navigate", url), where)
        case "history_back":
            b.browse(action, Browser("back"), where)
        case "pause_and_memorize_fact":
            b.note(action, text("fact"))
        case _:
            button, count = CLICKS[action]
            b.click(action, at(required=False), button, count)
