"""Benchmark `POST /v1/desktop/models/act` against the equivalent REST call, in one run on a realistic screen.

What the endpoint adds is parsing the model's output and mapping its points; the input runs on the same batch
machinery as `POST /v1/desktop/actions`. So each pair below does the same thing both ways and the difference of the
medians is the translation's cost over HTTP (target: at most 1 ms at p50): a pointer move without a screenshot,
a click, and a move answered with a screenshot at the screen's size. The parse alone is timed in-process too,
per family.
Usage: /work/main/.venv/bin/python bench/models_act.py [--requests 200] [--parses 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "client"))
from api.convert.open_models import model_plan
from bench.common import bench_desktop, bounded, compare_translation, summary
from sandbox_desktop_wire.open_models import ModelActRequest

MAX_SECONDS = 120
"""Every loop stops after this long, whatever its count."""


def tool_call(arguments: dict[str, object]) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': arguments})}\n</tool_call>"


OUTPUTS = {
    "qwen2.5-vl": "I will move there.\n" + tool_call({"action": "left_click", "coordinate": [500, 400]}),
    "qwen3-vl": tool_call({"action": "left_click", "coordinate": [500, 400]}),
    "fara": tool_call({"action": "left_click", "coordinate": [500, 400]}),
    "ui-tars-1.5": "Thought: Click the field.\nAction: click(start_box='<|box_start|>(500,400)<|box_end|>')",
    "ui-tars-1.0": "Thought: Click the field.\nAction: click(start_box='(500,400)')",
    "opencua": "## Thought:\nClick.\n## Code:\n```python\npyautogui.click(x=500, y=400)\n```",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--parses", type=int, default=2000)
    args = parser.parse_args()

    session = SimpleNamespace(width=1440, height=900)
    for family, output in OUTPUTS.items():
        body = ModelActRequest.model_validate({"family": family, "text": output})
        samples = bounded(lambda body=body: model_plan(body, session), args.parses,  # type: ignore[misc]
                          time.monotonic() + MAX_SECONDS / 10)
        summary(f"parse + plan in-process, {family}", samples)
    print()

    with bench_desktop("models-act", 391) as bench:
        api = bench.api
        deadline = time.monotonic() + MAX_SECONDS
        bench.health_baseline(min(args.requests, 100))

        def ok(response: object) -> None:
            assert getattr(response, "status_code", 0) == 200, getattr(response, "text", response)

        pairs = [
            ("move, no screenshot",
             lambda: ok(api.post("/v1/desktop/models/act", json={
                 "family": "opencua", "convention": "screen", "screenshot": False,
                 "text": "pyautogui.moveTo(x=700, y=450)"})),
             lambda: ok(api.post("/v1/desktop/actions", json={"actions": [{"type": "move", "x": 700, "y": 450}]}))),
            ("move to a smart-resized point, no screenshot",
             lambda: ok(api.post("/v1/desktop/models/act", json={
                 "family": "qwen2.5-vl", "screenshot": False,
                 "text": tool_call({"action": "mouse_move", "coordinate": [1400, 880]})})),
             lambda: ok(api.post("/v1/desktop/actions", json={"actions": [{"type": "move", "x": 1411, "y": 883}]}))),
            ("move + screenshot (screen size, PNG)",
             lambda: ok(api.post("/v1/desktop/models/act", json={
                 "family": "ui-tars-1.0", "convention": "screen", "settle": {"quietMs": 10, "timeoutMs": 0},
                 "text": "Thought: t\nAction: hover(start_box='(700,450)')"})),
             lambda: ok(api.post("/v1/desktop/actions", json={
                 "actions": [{"type": "move", "x": 700, "y": 450}], "settle": {"quietMs": 10, "timeoutMs": 0},
                 "screenshot": {}}))),
        ]
        for name, ours, rest in pairs:
            compare_translation(name, ("POST /models/act", ours), rest, args.requests, deadline)


if __name__ == "__main__":
    main()
