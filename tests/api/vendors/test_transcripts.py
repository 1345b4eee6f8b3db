"""Vendor tool-call transcripts replayed against real apps (tests/support/tkapp.py, xterm) at three model scales."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.conftest import REPO, wait_for

pytest.importorskip("tkinter", reason="tests/support/tkapp.py needs tkinter (python3-tk)")

DESKTOP = {"displayNum": 373, "width": 1440, "height": 900}
SW, SH = 1440, 900
# The largest 16:10 image within the Anthropic limits (1568 px long edge, 1.15 MP): 84 * (16 x 10).
VENDOR = max(((16 * k, 10 * k) for k in range(1, 99)), key=lambda s: s[0] if s[0] <= 1568 and s[0] * s[1] <= 1_150_000
             else 0)
SIZES = {"screen": (SW, SH), "0.6": (864, 540), "vendor": VENDOR}
FAST = {"quietMs": 50, "timeoutMs": 3000}
REDRAWN = {"quietMs": 500, "timeoutMs": 5000}  # above the app's 300 ms delay (docs/actions.md, Settling)
TEXT = "héllo wörld ✓ 日本"
OFFSET = (80, 40)  # the rectangle's drag, in screen pixels
COLOUR = (0xD0, 0x20, 0x20)  # tkapp.COLOURS[0]
LINES = ["first line of output", "second line, with words", "third line"]


def to_model(sx: int, sy: int, size: tuple[int, int]) -> tuple[int, int]:
    """screen -> image as docs/actions.md writes it: floor((s + 0.5) * N / S), per axis."""
    w, h = size
    return (2 * sx + 1) * w // (2 * SW), (2 * sy + 1) * h // (2 * SH)


def centre(box: dict[str, int]) -> tuple[int, int]:
    return box["x"] + box["width"] // 2, box["y"] + box["height"] // 2


class App:
    """tests/support/tkapp.py as a separate X client, with its records."""

    def __init__(self, display: str, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.tkapp", "--out", str(out)], cwd=REPO,
                                     env={**os.environ, "DISPLAY": display})
        # The window manager reparents and places the window: wait until its geometry stops changing.
        wait_for(lambda: self.records("geometry"), "the Tk app's geometry")
        for _ in range(50):
            count = len(self.records("geometry"))
            time.sleep(0.3)
            if len(self.records("geometry")) == count:
                break
        self.geometry = self.records("geometry")[-1]

    def records(self, event: str) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        lines = self.out.read_text(encoding="utf-8").splitlines()
        return [r for r in map(json.loads, filter(None, lines)) if r["event"] == event]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def app(display: str, tmp_path: Path) -> Iterator[App]:
    a = App(display, tmp_path / "tkapp.jsonl")
    try:
        yield a
    finally:
        a.close()


def png(data: str, size: tuple[int, int]) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.format == "PNG" and image.size == size
    return image.convert("RGB")


def claude(api: httpx.Client, size: tuple[int, int], action: dict[str, Any],
           settle: dict[str, int] = FAST) -> Image.Image | None:
    """One `tool_use` input through the Anthropic endpoint; the screenshot it answers, if any."""
    tool = {"type": "computer_20251124", "name": "computer", "display_width_px": size[0],
            "display_height_px": size[1], "enable_zoom": True}
    response = api.post("/v1/desktop/anthropic/computer", json={"tool": tool, "input": action, "settle": settle})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "is_error" not in answer, (action, answer)
    (block,) = answer["content"]
    return png(block["source"]["data"], size) if block["type"] == "image" else None


def gpt(api: httpx.Client, size: tuple[int, int], actions: list[dict[str, Any]],
        settle: dict[str, int] = FAST) -> Image.Image:
    """One `computer_call` batch through the OpenAI endpoint; at screen size as the GA tool (no display)."""
    body: dict[str, Any] = {"call": {"type": "computer_call", "id": "cu_1", "call_id": "call_1",
                                     "status": "completed", "pending_safety_checks": [], "actions": actions},
                            "settle": settle}
    if size != (SW, SH):
        body["display_width"], body["display_height"] = size
    response = api.post("/v1/desktop/openai/computer", json=body)
    assert response.status_code == 200, response.text
    output = response.json()["output"]
    assert output["type"] == "computer_screenshot"
    return png(output["image_url"].removeprefix("data:image/png;base64,"), size)


def targets(app: App, size: tuple[int, int]) -> dict[str, tuple[int, int]]:
    """Where the model would point, in its own space, from the app's logged geometry."""
    g = app.geometry
    grab = centre(g["rect"])
    window = g["window"]
    screen = {**{n: centre(g["widgets"][n]) for n in ("one", "two", "entry", "colour")},
              "item": centre(g["items"][2]), "grab": grab, "drop": (grab[0] + OFFSET[0], grab[1] + OFFSET[1]),
              "bare": (window["x"] + 520, window["y"] + 340)}
    return {name: to_model(*point, size) for name, point in screen.items()}


def anthropic_transcript(t: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """`tool_use` inputs as Claude emits them (docs/vendors.md)."""
    return [
        {"action": "screenshot"},
        {"action": "left_click", "coordinate": list(t["one"])},
        {"action": "left_click", "coordinate": list(t["two"])},
        {"action": "left_click", "coordinate": list(t["entry"])},
        {"action": "type", "text": TEXT},
        {"action": "left_click", "coordinate": list(t["item"])},
        {"action": "left_click_drag", "start_coordinate": list(t["grab"]), "coordinate": list(t["drop"])},
    ]


def openai_transcript(t: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """One `computer_call` batch as the OpenAI models emit it (docs/vendors.md)."""
    def click(name: str) -> dict[str, Any]:
        return {"type": "click", "button": "left", "x": t[name][0], "y": t[name][1]}
    return [
        click("one"), click("two"), click("entry"), {"type": "type", "text": TEXT}, click("item"),
        {"type": "drag", "path": [{"x": t["grab"][0], "y": t["grab"][1]}, {"x": t["drop"][0], "y": t["drop"][1]}]},
    ]


def assert_app_got_everything(app: App) -> None:
    wait_for(lambda: app.records("dropped"), "the rectangle's drop")
    assert [r["button"] for r in app.records("click")] == ["one", "two"]
    assert app.records("entry")[-1]["text"] == TEXT
    assert [r["index"] for r in app.records("select")] == [2]
    start, end = app.geometry["rect"], app.records("dropped")[-1]["rect"]
    moved = (end["x"] - start["x"], end["y"] - start["y"])
    assert abs(moved[0] - OFFSET[0]) <= 2 and abs(moved[1] - OFFSET[1]) <= 2, moved


def assert_redrawn(image: Image.Image, at: tuple[int, int], app: App) -> None:
    """The screenshot answered after the click shows the background the app set 300 ms later."""
    assert app.records("colour"), "the app never changed its colour"
    pixel = tuple(image.getpixel(at))  # type: ignore[arg-type]  # an RGB image: a 3-tuple
    assert all(abs(a - b) <= 8 for a, b in zip(pixel, COLOUR, strict=True)), (pixel, COLOUR)


def test_vendor_limit_size_keeps_the_aspect() -> None:
    w, h = VENDOR
    assert w * SH == h * SW and w <= 1568 and w * h <= 1_150_000 and (w + 16) * (h + 10) > 1_150_000


@pytest.mark.parametrize("scale", SIZES)
def test_anthropic_transcript_drives_a_tk_app(api: httpx.Client, app: App, scale: str) -> None:
    size = SIZES[scale]
    t = targets(app, size)
    for action in anthropic_transcript(t):
        claude(api, size, action)
    assert_app_got_everything(app)
    image = claude(api, size, {"action": "left_click", "coordinate": list(t["colour"])}, REDRAWN)
    assert image is not None
    assert_redrawn(image, t["bare"], app)


@pytest.mark.parametrize("scale", SIZES)
def test_openai_transcript_drives_a_tk_app(api: httpx.Client, app: App, scale: str) -> None:
    size = SIZES[scale]
    t = targets(app, size)
    gpt(api, size, openai_transcript(t))
    assert_app_got_everything(app)
    image = gpt(api, size, [{"type": "click", "button": "left", "x": t["colour"][0], "y": t["colour"][1]}],
                REDRAWN)
    assert_redrawn(image, t["bare"], app)


@pytest.fixture(scope="module")
def xterm(api: httpx.Client) -> Iterator[dict[str, Any]]:
    """An xterm of 40x6 cells showing LINES, launched and waited for through the API."""
    script = "printf '%s\\n' " + " ".join(f"'{line}'" for line in LINES) + "; sleep 120"
    launched = api.post("/v1/desktop/launch", json={
        "app": "xterm", "args": ["-T", "transcript-term", "-geometry", "40x6+800+500", "-b", "2",
                                 "-e", "sh", "-c", script], "wait": True})
    assert launched.status_code == 200, launched.text
    body = launched.json()
    try:
        window = next(w for w in api.get("/v1/desktop/windows").json()["windows"] if w["id"] == body["windowId"])
        time.sleep(0.3)  # the lines are printed after the window maps
        yield window
    finally:
        api.post(f"/v1/processes/{body['processId']}/kill")


@pytest.mark.parametrize("scale", SIZES)
def test_triple_click_selects_exactly_one_xterm_line(api: httpx.Client, display: str, xterm: dict[str, Any],
                                                     scale: str) -> None:
    size = SIZES[scale]
    row_height = (xterm["height"] - 4) // 6  # 6 rows inside a 2 px border
    row = list(SIZES).index(scale)  # a different line each time, so a stale selection cannot pass
    target = (xterm["x"] + 2 + 6 * 3, xterm["y"] + 2 + row * row_height + row_height // 2)
    time.sleep(0.6)  # longer than xterm's multiClickTime (250 ms): the last test's clicks are not counted in
    claude(api, size, {"action": "triple_click", "coordinate": list(to_model(*target, size))})
    selection = subprocess.run(["xclip", "-o", "-selection", "primary"], capture_output=True, text=True,
                               env={**os.environ, "DISPLAY": display}, timeout=5)
    assert selection.stdout == LINES[row] + "\n", selection  # xterm's line mode takes the line's newline
