"""Each vendor's own SDK code types, clicks and reads back on real apps these tests did not write: a page in
Chromium and zenity's GTK 3 form. The model is replaced by recorded answers: the Anthropic SDK's tool runner over an
httpx transport answering `tool_use` blocks, the OpenAI Agents SDK's `Runner` with its `ScriptedModel` (in a venv of
its own, tests/support/agents_venv.py), and Gemini function calls built with google-genai's `types` and its answer
read back into them. Where to click comes from the accessibility tree (as a model would see it on the screenshot); the
effect is read from the app itself: the page's title through xdotool, zenity's answer on its standard output."""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from sandbox_desktop_client import Client
from tests.api.accessibility.test_accessibility import exited, find_one, output_of
from tests.api.input.test_keyboard import xdotool
from tests.clients.python.test_vendor_drivers import allow, message, png, scripted_api, use
from tests.conftest import ServerProcess, wait_for
from tests.support.agents_venv import run_agents
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 343, "width": 1280, "height": 800}
SW, SH = 1280, 800  # within Anthropic's image limits: the toolset's points are screen pixels
FAST = {"quietMs": 50, "timeoutMs": 2000}
TEXT = "Ada ✓"

pytestmark = pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                                reason="needs zenity and chromium (scripts/setup.sh test installs them)")

PAGE = """<!doctype html><html><head><title>Order form</title><style>
body { margin: 0; background: #fff; font: 16px sans-serif }
#name { position: absolute; left: 200px; top: 80px; width: 240px; height: 28px }
#save { position: absolute; left: 200px; top: 150px; width: 120px; height: 40px }
</style></head><body>
<label for="name" style="position:absolute;left:20px;top:84px">Customer name</label>
<input id="name">
<button id="save" onclick="document.title = 'Saved ' + document.getElementById('name').value">Save</button>
</body></html>"""


@dataclass(frozen=True)
class Target:
    """An app with a text field and a button that submits it, and how to read what it received."""
    field: tuple[int, int]
    button: tuple[int, int]
    submitted: Callable[[], str]
    """Waits until the app has taken a submission, and answers what it holds."""


def centre(element: dict[str, Any]) -> tuple[int, int]:
    b = element["bounds"]
    return b["x"] + b["width"] // 2, b["y"] + b["height"] // 2


@pytest.fixture(params=["chromium", "gtk"])
def target(request: pytest.FixtureRequest, api: httpx.Client, display: str, tmp_path: Path) -> Iterator[Target]:
    if request.param == "chromium":
        with desktop_page(api, tmp_path, "order.html", PAGE, size="900,650") as launched:
            field = find_one(api, "the page's name field", role="textbox", name="Customer name", timeout=30)
            button = find_one(api, "the page's Save button", role="button", name="Save", timeout=30)

            def saved() -> str:
                title = wait_for(lambda: (t := xdotool(display, "getwindowname", str(launched["windowId"])))
                                 .startswith("Saved ") and t, "the page to save")
                return str(title).removeprefix("Saved ").removesuffix(" - Chromium")
            yield Target(centre(field), centre(button), saved)
        return
    started = api.post("/v1/processes", json={"command": "zenity", "args": [
        "--forms", "--title=Customer", "--add-entry=Full name"]}).json()
    try:
        field = find_one(api, "zenity's Full name entry", role="textbox", name="Full name", timeout=30)
        button = find_one(api, "zenity's OK button", role="push-button", name="OK")

        def answered() -> str:
            exited(api, started["id"])
            return output_of(api, started["id"]).strip()
        yield Target(centre(field), centre(button), answered)
    finally:
        api.post(f"/v1/processes/{started['id']}/kill")


def test_anthropic_tool_runner_fills_an_app(srv: ServerProcess, target: Target) -> None:
    anthropic, httpx2 = pytest.importorskip("anthropic"), pytest.importorskip("httpx2")
    from sandbox_desktop_client.anthropic import DesktopToolset
    turns = [message([use(1, "left_click", coordinate=list(target.field)), use(2, "type", text=TEXT),
                      use(3, "left_click", coordinate=list(target.button)), use(4, "screenshot")], "tool_use"),
             message([{"type": "text", "text": "Done."}], "end_turn")]
    sent: list[dict[str, Any]] = []
    with Client(srv.url, token=srv.token) as desk, \
            httpx2.Client(transport=scripted_api(httpx2, turns, sent)) as http:
        runner = anthropic.Anthropic(api_key="test", http_client=http, max_retries=0).beta.messages.tool_runner(
            model="claude-test", max_tokens=1024, messages=[{"role": "user", "content": "Fill in the form."}],
            tools=[DesktopToolset(desk, confirm=allow, settle=FAST)])
        assert runner.until_done().content[0].text == "Done."
    assert target.submitted() == TEXT
    results = sent[1]["messages"][-1]["content"]
    assert all(not r.get("is_error") for r in results), results
    (image,) = [b for b in results[3]["content"] if b["type"] == "image"]
    assert png(image["source"]["data"]).size == (SW, SH)


def test_openai_agents_runner_fills_an_app(srv: ServerProcess, target: Target) -> None:
    calls = [[{"type": "click", "button": "left", "x": target.field[0], "y": target.field[1]},
              {"type": "type", "text": TEXT}],
             [{"type": "click", "button": "left", "x": target.button[0], "y": target.button[1]}]]
    answer = run_agents({"url": srv.url, "token": srv.token, "settle": FAST, "async": False, "desktop": None,
                         "calls": calls})
    assert answer["finalOutput"] == "Done." and answer["modelCalls"] == 3
    assert target.submitted() == TEXT
    assert answer["outputs"] == [["data:image/png;base64", "PNG", SW, SH]] * 2


def grid(point: tuple[int, int]) -> dict[str, int]:
    """Gemini's 0-999 grid point whose pixel is at or just past the screen pixel."""
    return {"x": -(-point[0] * 1000 // SW), "y": -(-point[1] * 1000 // SH)}


def test_gemini_function_calls_in_google_genai_types_fill_an_app(api: httpx.Client, target: Target) -> None:
    types = pytest.importorskip("google.genai.types")
    history: list[Any] = []
    for call in (types.FunctionCall(name="click_at", args=grid(target.field)),
                 types.FunctionCall(name="type_text_at", args={**grid(target.field), "text": TEXT,
                                                              "press_enter": False, "clear_before_typing": True}),
                 types.FunctionCall(name="click_at", args=grid(target.button))):
        # The Part as the REST API carries it (camelCase fields, arguments as the model wrote them), which is what
        # the SDK's own `model_dump` in JSON mode by alias produces.
        part = types.Part(function_call=call)
        body = {**part.model_dump(mode="json", by_alias=True, exclude_none=True), "settle": FAST}
        answer = api.post("/v1/desktop/gemini/computer", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        # The answer's parts are valid google-genai Parts (unknown fields are refused) and make the next turn.
        response, shot = (types.Part.model_validate(p) for p in answer.json()["parts"])
        assert response.function_response.name == call.name
        assert shot.inline_data.mime_type == "image/png"
        assert Image.open(io.BytesIO(shot.inline_data.data)).size == (SW, SH)
        history.append(types.Content(role="user", parts=[response, shot]))
    assert target.submitted() == TEXT
    assert len(history) == 3
