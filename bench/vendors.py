"""Benchmark the vendor computer-use endpoints against the equivalent REST call, in one run on a realistic screen.

Each vendor endpoint plans the model's call (api/convert/vendors.py), runs it on the batch machinery of
`POST /v1/desktop/actions` and shapes the answer the vendor's way. So each pair below does the same thing both ways,
with the same steps, settle and screenshot (size, PNG), in alternating rounds, and the median of the paired
differences is what the schema's translation adds over HTTP (target: at most 1 ms at p50). The plans alone are
timed in-process too. Bounded: `--rounds` per pair and MAX_SECONDS in all.
Usage: /work/main/.venv/bin/python bench/vendors.py [--rounds 60] [--plans 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "client"))
from api.convert.vendors import anthropic_plan, gemini_plan, openai_plan
from bench.common import bench_desktop, bounded, compare_translation, summary
from sandbox_desktop_wire.vendors import AnthropicRequest, GeminiRequest, OpenAIRequest

MAX_SECONDS = 150
"""Every loop stops after this long, whatever its count."""
SCREEN = (1440, 900)
SETTLE = {"quietMs": 10, "timeoutMs": 0}
PNG = {"format": "png"}

COMPUTER = {"type": "computer_20250124", "display_width_px": 1280, "display_height_px": 800}
TOOLSET = {"type": "computer_toolset_20260801"}
# The same pointer move in each schema's coordinates: the screen's centre (720, 450). The toolset's points are
# pixels of its 1356x848 screenshot, Gemini's a 0-999 grid, the 20250124 tool's its 1280x800 display.
ANTHROPIC_MOVE = {"tool": COMPUTER, "input": {"action": "mouse_move", "coordinate": [640, 400]}, "settle": SETTLE}
TOOLSET_MOVE = {"tool": TOOLSET, "name": "mouse_move", "input": {"coordinate": [678, 424]}}
TOOLSET_SHOT = {"tool": TOOLSET, "name": "screenshot", "settle": SETTLE}
OPENAI_MOVE = {"call": {"call_id": "call_1", "actions": [{"type": "move", "x": 720, "y": 450}]}, "settle": SETTLE}
GEMINI_HOVER = {"functionCall": {"name": "hover_at", "args": {"x": 500, "y": 500}}, "settle": SETTLE}
MOVE = [{"type": "move", "x": 720, "y": 450}]


def plans(count: int) -> None:
    """Each schema's plan in-process: validation of the wire model and translation to batch steps."""
    session: Any = SimpleNamespace(width=SCREEN[0], height=SCREEN[1])
    cases: list[tuple[str, Callable[[], object]]] = [
        ("Anthropic computer_20250124 mouse_move",
         lambda: anthropic_plan(AnthropicRequest.model_validate(ANTHROPIC_MOVE), session)),
        ("Anthropic toolset mouse_move", lambda: anthropic_plan(AnthropicRequest.model_validate(TOOLSET_MOVE),
                                                                 session)),
        ("OpenAI computer_call move", lambda: openai_plan(OpenAIRequest.model_validate(OPENAI_MOVE), session)),
        ("Gemini hover_at", lambda: gemini_plan(GeminiRequest.model_validate(GEMINI_HOVER), session)),
    ]
    for name, plan in cases:
        summary(f"plan in-process, {name}", bounded(plan, count, time.monotonic() + MAX_SECONDS / 10))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--plans", type=int, default=2000)
    args = parser.parse_args()
    plans(args.plans)

    with bench_desktop("vendors", 392, width=SCREEN[0], height=SCREEN[1]) as bench:
        api = bench.api
        deadline = time.monotonic() + MAX_SECONDS
        health = bench.health_baseline(min(args.rounds, 100))
        # Gemini's answer carries the focused browser's URL, so after the batch it reads the focused window, which
        # the batch does not: that read as a request of its own (an upper bound on it) beside the HTTP floor.
        summary("GET /windows/focused (Gemini's URL lookup)",
                bounded(lambda: api.get("/v1/desktop/windows/focused"), min(args.rounds, 100), deadline), health)
        print()

        def post(path: str, body: dict[str, Any]) -> Callable[[], object]:
            def call() -> None:
                response = api.post(path, json=body, timeout=60)
                assert response.status_code == 200, response.text
            return call

        def actions(**extra: Any) -> Callable[[], object]:
            return post("/v1/desktop/actions", {"actions": MOVE, **extra})

        pairs = [
            ("Anthropic 20250124 move + 1280x800 PNG", ("POST /anthropic/computer",
                                                        post("/v1/desktop/anthropic/computer", ANTHROPIC_MOVE)),
             actions(settle=SETTLE, screenshot={**PNG, "targetWidth": 1280, "targetHeight": 800})),
            ("Anthropic toolset move, text answer", ("POST /anthropic/computer",
                                                     post("/v1/desktop/anthropic/computer", TOOLSET_MOVE)),
             actions()),
            ("Anthropic toolset screenshot, 1356x848 PNG", ("POST /anthropic/computer",
                                                            post("/v1/desktop/anthropic/computer", TOOLSET_SHOT)),
             post("/v1/desktop/actions", {"actions": [], "settle": SETTLE,
                                          "screenshot": {**PNG, "maxLongEdge": 1568, "maxPixels": 1150000}})),
            ("OpenAI computer_call move + screen PNG", ("POST /openai/computer",
                                                        post("/v1/desktop/openai/computer", OPENAI_MOVE)),
             actions(settle=SETTLE, screenshot=PNG)),
            ("Gemini hover_at + screen PNG", ("POST /gemini/computer",
                                              post("/v1/desktop/gemini/computer", GEMINI_HOVER)),
             actions(settle=SETTLE, screenshot=PNG)),
        ]
        added = {name: compare_translation(name, ours, rest, args.rounds, deadline) for name, ours, rest in pairs}
        print("added by each schema's translation (median of paired differences):")
        for name, seconds in added.items():
            print(f"  {name:<50} {seconds * 1000:+.2f} ms")


if __name__ == "__main__":
    main()
