"""`POST /v1/desktop/models/act` against a real desktop: recorded outputs of each open model family replayed, the
pointer checked by an independent X client (xprobe's events, xdotool) and typed text read back from an xterm."""

from __future__ import annotations

import base64
import io
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.api.input.test_keyboard import Cat, xdotool
from tests.conftest import assert_problem, managed_probe, wait_for
from tests.support.browser import desktop_page
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 381, "width": 1440, "height": 900}
SW, SH = 1440, 900
RESIZED = (1428, 896)
"""1440x900 as Qwen2.5-VL's processor resizes it: each side rounded to a multiple of 28."""
FAST = {"quietMs": 50, "timeoutMs": 2000}


def in_pixels(sx: int, sy: int) -> tuple[int, int]:
    """A screen pixel as a pixel of the smart-resized image (floor), written out independently of the server."""
    return sx * RESIZED[0] // SW, sy * RESIZED[1] // SH


def on_grid(sx: int, sy: int) -> tuple[int, int]:
    """The 0-1000 grid point that lands on screen pixel (sx, sy) or the one after it (`v * size // 1000`)."""
    return math.ceil(sx * 1000 / SW), math.ceil(sy * 1000 / SH)


def tool_call(arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': arguments})}\n</tool_call>"


def recorded_click(family: str, sx: int, sy: int) -> str:
    """What each family prints to click screen pixel (sx, sy), in its own words and convention."""
    px, py = in_pixels(sx, sy)
    gx, gy = on_grid(sx, sy)
    return {
        "qwen2.5-vl": "The Save button is at the top.\n" + tool_call({"action": "left_click", "coordinate": [px, py]}),
        "qwen3-vl": tool_call({"action": "left_click", "coordinate": [gx, gy]}),
        "fara": "I click the field.\n" + tool_call({"action": "left_click", "coordinate": [px, py]}),
        "ui-tars-1.0": f"Thought: Click the button.\nAction: click(start_box='<|box_start|>({gx},{gy})<|box_end|>')",
        "ui-tars-1.5": f"Thought: Click the button.\nAction: click(point='<point>{px} {py}</point>')",
        "opencua": (f"## Thought:\nThe button is there.\n\n## Action:\nClick it.\n\n## Code:\n```python\n"
                    f"pyautogui.click(x={px}, y={py})\n```"),
    }[family]


def act(api: httpx.Client, family: str, output: str, path: str = "/v1/desktop/models/act",
        **options: Any) -> httpx.Response:
    return api.post(path, json={"family": family, "text": output, "settle": FAST, **options})


def pointer(display: str) -> tuple[int, int]:
    """Where X says the pointer is (xdotool, a client of its own)."""
    fields = dict(part.split(":") for part in xdotool(display, "getmouselocation").split())
    return int(fields["x"]), int(fields["y"])


def image_size(answer: dict[str, Any]) -> tuple[int, int]:
    image = Image.open(io.BytesIO(base64.b64decode(answer["screenshot"]["data"])))
    return image.size


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    with managed_probe(api, display, tmp_path / "events.jsonl", "model-probe") as found:
        yield found


FAMILIES = ["qwen2.5-vl", "qwen3-vl", "fara", "ui-tars-1.0", "ui-tars-1.5", "opencua"]
GRID = {"qwen3-vl", "ui-tars-1.0"}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_click_lands_where_the_model_pointed(api: httpx.Client, display: str,
                                                          probe: tuple[Probe, dict[str, Any]], family: str) -> None:
    p, rect = probe
    target = (rect["x"] + 123 + 37 * FAMILIES.index(family), rect["y"] + 77 + 29 * FAMILIES.index(family))
    answer = act(api, family, recorded_click(family, *target))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    (click,) = body["actions"]
    assert click["kind"] == "click" and click["button"] == "left" and click["count"] == 1
    landed = (click["x"], click["y"])
    assert abs(landed[0] - target[0]) <= 1 and abs(landed[1] - target[1]) <= 1, (landed, target)
    (press,) = p.wait_for(lambda e: e["type"] == "ButtonPress")
    assert (press["rootX"], press["rootY"], press["button"]) == (*landed, 1)
    assert pointer(display) == landed
    # The next screenshot is in the model's convention: the smart-resized size, or the screen's own for the grid.
    convention = "grid-1000" if family in GRID else "smart-resize"
    assert body["convention"] == convention and body["screenshot"]["frame"]["space"] == convention
    assert image_size(body) == ((SW, SH) if family in GRID else RESIZED)
    assert (body["modelWidth"], body["modelHeight"]) == ((1000, 1000) if family in GRID else RESIZED)


def test_a_ui_tars_drag_presses_at_the_start_and_releases_at_the_end(
        api: httpx.Client, probe: tuple[Probe, dict[str, Any]]) -> None:
    p, rect = probe
    start, end = (rect["x"] + 50, rect["y"] + 60), (rect["x"] + 400, rect["y"] + 300)
    (x1, y1), (x2, y2) = in_pixels(*start), in_pixels(*end)
    output = (f"Thought: Move the slider.\nAction: drag(start_box='<|box_start|>({x1},{y1})<|box_end|>', "
              f"end_box='<|box_start|>({x2},{y2})<|box_end|>')")
    answer = act(api, "ui-tars-1.5", output)
    assert answer.status_code == 200, answer.text
    (press,) = p.wait_for(lambda e: e["type"] == "ButtonPress")
    (release,) = p.wait_for(lambda e: e["type"] == "ButtonRelease")
    assert abs(press["rootX"] - start[0]) <= 1 and abs(press["rootY"] - start[1]) <= 1
    assert abs(release["rootX"] - end[0]) <= 1 and abs(release["rootY"] - end[1]) <= 1


@pytest.fixture
def cat(display: str, tmp_path: Path) -> Iterator[Cat]:
    term = Cat(display, tmp_path / "typed.txt", "model-cat")
    yield term
    term.close()


def test_each_familys_text_arrives_in_an_xterm(api: httpx.Client, cat: Cat) -> None:
    outputs = [
        ("qwen2.5-vl", tool_call({"action": "type", "text": "qwen types\n"})),
        ("qwen3-vl", tool_call({"action": "type", "text": "it's"}) + tool_call({"action": "key", "keys": ["enter"]})),
        ("fara", tool_call({"action": "type", "text": "fara types"})),  # Fara presses Enter after typing by default
        ("ui-tars-1.5", "Thought: Type the name.\nAction: type(content='tars said \"hi\"\\n')"),
        ("opencua", "```python\npyautogui.write(message='cua types')\npyautogui.press('enter')\n```"),
    ]
    expected = ""
    for family, output in outputs:
        answer = act(api, family, output, screenshot=False)
        assert answer.status_code == 200, answer.text
        assert "screenshot" not in answer.json()
    expected = "qwen types\nit's\nfara types\ntars said \"hi\"\ncua types\n"
    assert cat.wait_text(expected) == expected


def test_a_final_answer_runs_nothing(api: httpx.Client, display: str) -> None:
    before = pointer(display)
    for family, output, final in [
        ("qwen2.5-vl", tool_call({"action": "terminate", "status": "failure"}), {"status": "failure"}),
        ("qwen3-vl", tool_call({"action": "answer", "text": "42"}), {"status": "success", "content": "42"}),
        ("ui-tars-1.0", "Thought: Done.\nAction: finished(content='All saved.')",
         {"status": "success", "content": "All saved."}),
        ("opencua", "computer.terminate(status='success')", {"status": "success"}),
    ]:
        answer = act(api, family, output)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["final"] == final and "screenshot" not in body
        assert [a["kind"] for a in body["actions"]] == ["final"]
    assert pointer(display) == before


def test_malformed_output_is_a_422_naming_what_and_nothing_runs(api: httpx.Client, display: str) -> None:
    away = (SW - 40, SH - 40)
    assert act(api, "opencua", f"pyautogui.moveTo({away[0]}, {away[1]})", convention="screen").status_code == 200
    assert pointer(display) == away
    # The first line would move the pointer: the whole output is refused before anything runs.
    problem = assert_problem(act(api, "opencua", "```python\npyautogui.moveTo(10, 10)\n"
                                 "pyautogui.click(x=__import__('os').system('x'), y=1)\n```"), 422)
    (error,) = problem["errors"]  # type: ignore[misc]
    assert error["field"] == "text" and error["message"].startswith("line 3 (pyautogui.click(x=__import__")
    assert "argument x is not a literal" in error["message"]
    assert pointer(display) == away
    problem = assert_problem(act(api, "qwen2.5-vl", tool_call({"action": "teleport", "coordinate": [1, 1]})), 422)
    assert "tool_call[0].arguments.action: unknown action 'teleport'" in str(problem["detail"])
    problem = assert_problem(act(api, "ui-tars-1.5", "Thought: I give up."), 422)
    assert "no `Action:` found" in str(problem["detail"])
    assert_problem(act(api, "qwen3-vl", tool_call({"action": "left_click", "coordinate": [1001, 5]})), 400)
    assert_problem(api.post("/v1/desktop/models/act", json={"family": "gpt-2", "text": "x"}), 422)
    assert pointer(display) == away


def test_the_per_desktop_path_and_relative_points(api: httpx.Client, display: str) -> None:
    answer = act(api, "opencua", "pyautogui.moveTo(x=0.25, y=0.75)", "/v1/desktops/default/models/act",
                 convention="relative", screenshot=False)
    assert answer.status_code == 200, answer.text
    assert pointer(display) == (SW // 4, SH * 3 // 4)


@pytest.mark.skipif(not shutil.which("chromium"), reason="needs chromium (scripts/setup.sh test)")
def test_faras_browser_moves_drive_chromium(api: httpx.Client, display: str, tmp_path: Path) -> None:
    def title() -> str:
        return xdotool(display, "getactivewindow", "getwindowname")

    second, found = tmp_path / "b.html", tmp_path / "found.html"
    second.write_text("<!doctype html><title>Page B</title><h1>Page B</h1>")
    found.write_text("<!doctype html><title>Found</title><h1>Found</h1>")
    with desktop_page(api, tmp_path, "a.html", "<!doctype html><title>Page A</title><h1>Page A</h1>"):
        wait_for(lambda: title().startswith("Page A"), "page A")
        answer = act(api, "fara", "I open the page.\n" + tool_call({"action": "visit_url", "url": second.as_uri()}))
        assert answer.status_code == 200, answer.text
        assert answer.json()["actions"] == [{"kind": "navigate", "source": "visit_url", "url": second.as_uri()}]
        wait_for(lambda: title().startswith("Page B"), "page B", 30)
        assert act(api, "fara", tool_call({"action": "history_back"})).status_code == 200
        wait_for(lambda: title().startswith("Page A"), "back at page A")
        # `web_search` goes to the request's search page (a local one: the test stays off the internet).
        answer = act(api, "fara", tool_call({"action": "web_search", "query": "red cats"}),
                     searchUrl=found.as_uri() + "?q={query}")
        assert answer.json()["actions"][0]["url"] == found.as_uri() + "?q=red+cats"
        wait_for(lambda: title().startswith("Found"), "the search page", 30)
