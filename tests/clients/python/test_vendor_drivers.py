"""The vendor SDK drivers of the Python client (sandbox_desktop_client.anthropic, .openai_agents), run by the SDKs
themselves against a real desktop, with a scripted model in place of the vendor's API, and checked by X clients of
their own (xprobe, an xterm running cat). The OpenAI Agents SDK runs in a venv of its own (tests/support/agents_venv.py:
it needs websockets<17). test_vendor_apps.py drives Chromium and a GTK app the same way."""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from Xlib import X

from sandbox_desktop_client import ApiError, AsyncClient, Client
from tests.api.input.test_keyboard import Cat
from tests.conftest import ServerProcess, managed_probe, run
from tests.support.agents_venv import run_agents

NO_ANTHROPIC = "the Anthropic SDK is not installed (`pip install 'sandbox-desktop-client[anthropic]'`)"

# Within the model's image limits (1568 px, 1.15 MP), so the toolset's screenshot is the screen, unscaled, and a
# model's point is a screen pixel: the checks below need no mapping of their own.
DESKTOP = {"displayNum": 342, "width": 1280, "height": 800}
SW, SH = 1280, 800
FAST = {"quietMs": 50, "timeoutMs": 2000}


@pytest.fixture
def scene(srv: ServerProcess, display: str, api: httpx.Client, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[tuple[Any, dict[str, Any], Cat]]:
    """A probe window (800x500 at 100,100) and, above it at the top-left, an xterm running cat, focused."""
    name = f"{request.node.name[:40]}-{time.monotonic_ns()}"
    with managed_probe(api, display, tmp_path / "events.jsonl", f"probe-{name}") as (probe, rect):
        term = Cat(display, tmp_path / "typed.txt", f"cat-{name}")
        try:
            yield probe, rect, term
        finally:
            term.close()


def png(data: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(data)))


def message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": f"msg_{time.monotonic_ns()}", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def use(i: int, name: str, **params: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": params, "toolset_name": "computer"}


def scripted_api(httpx2: Any, turns: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    """The Messages API replaced by recorded answers, one per request; the requests are kept in `sent`. The SDK
    sends over `httpx2` (it refuses an `httpx` client), whose MockTransport is httpx's."""
    def handle(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=turns[len(sent) - 1])
    return httpx2.MockTransport(handle)


def turns_for(rect: dict[str, Any]) -> tuple[tuple[int, int], list[dict[str, Any]]]:
    click = (rect["x"] + 600, rect["y"] + 400)  # in the probe, clear of the xterm
    return click, [
        message([use(1, "left_click", coordinate=list(click), text="ctrl"),
                 use(2, "left_click", coordinate=[60, 60]),  # into the xterm: it has the focus again
                 use(3, "type", text="héllo ✓"), use(4, "key", text="Return"), use(5, "screenshot")], "tool_use"),
        message([{"type": "text", "text": "Done."}], "end_turn"),
    ]


def check_anthropic_run(probe: Any, term: Cat, click: tuple[int, int], sent: list[dict[str, Any]]) -> None:
    assert term.wait_text("héllo ✓\n") == "héllo ✓\n"
    probe.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 1)
    (press,) = probe.events("ButtonPress")
    assert (press["button"], press["rootX"], press["rootY"]) == (1, *click) and press["state"] & X.ControlMask
    assert len(sent) == 2 and sent[0]["tools"][0]["type"] == "computer_toolset_20260801"
    results = sent[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(1, 6)]
    assert all(not r.get("is_error") for r in results), results
    texts = [[b["text"] for b in r["content"] if b["type"] == "text"] for r in results[:4]]
    assert texts == [["Clicked."], ["Clicked."], ["Typed."], ["Pressed Return."]]
    # No screenshot the model did not ask for: the pure actions answered text only.
    assert all(b["type"] == "text" for r in results[:4] for b in r["content"])
    (image,) = [b for b in results[4]["content"] if b["type"] == "image"]
    shot = png(image["source"]["data"])
    assert shot.format == "PNG" and shot.size == (SW, SH)


def allow(context: Any) -> bool:
    return True  # a throwaway desktop: the model may type


def test_anthropic_tool_runner_drives_the_desktop(srv: ServerProcess, scene: tuple[Any, dict, Cat]) -> None:
    anthropic, httpx2 = pytest.importorskip("anthropic", reason=NO_ANTHROPIC), pytest.importorskip("httpx2")
    from sandbox_desktop_client.anthropic import DesktopToolset
    probe, rect, term = scene
    click, turns = turns_for(rect)
    sent: list[dict[str, Any]] = []
    with Client(srv.url, token=srv.token) as desk, \
            httpx2.Client(transport=scripted_api(httpx2, turns, sent)) as http:
        api = anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)
        runner = api.beta.messages.tool_runner(
            model="claude-test", max_tokens=1024, messages=[{"role": "user", "content": "Type in the terminal."}],
            tools=[DesktopToolset(desk, confirm=allow, settle=FAST)])
        final = runner.until_done()
    assert final.content[0].type == "text" and final.content[0].text == "Done."
    check_anthropic_run(probe, term, click, sent)


def test_async_anthropic_tool_runner_drives_a_desktop_handle(srv: ServerProcess,
                                                             scene: tuple[Any, dict, Cat]) -> None:
    anthropic, httpx2 = pytest.importorskip("anthropic", reason=NO_ANTHROPIC), pytest.importorskip("httpx2")
    from sandbox_desktop_client.anthropic import AsyncDesktopToolset
    probe, rect, term = scene
    click, turns = turns_for(rect)
    sent: list[dict[str, Any]] = []

    async def scenario() -> Any:
        async with AsyncClient(srv.url, token=srv.token) as client, \
                httpx2.AsyncClient(transport=scripted_api(httpx2, turns, sent)) as http:
            desk = client.desktops.attach("default")
            api = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
            runner = api.beta.messages.tool_runner(
                model="claude-test", max_tokens=1024, messages=[{"role": "user", "content": "Type."}],
                tools=[AsyncDesktopToolset(desk, confirm=allow, settle=FAST)])
            return await runner.until_done()

    final = run(scenario)
    assert final.content[0].text == "Done."
    check_anthropic_run(probe, term, click, sent)


def test_anthropic_driver_answers_members_and_errors(srv: ServerProcess) -> None:
    anthropic = pytest.importorskip("anthropic", reason=NO_ANTHROPIC)
    from anthropic.tools import BetaComputerCursorPositionResult, BetaScreenshotResult
    from anthropic.types.beta import BetaComputerMouseMoveInput, BetaComputerZoomInput

    from sandbox_desktop_client.anthropic import DesktopToolset

    with Client(srv.url, token=srv.token) as desk:
        toolset = DesktopToolset(desk, configs={"type": {"enabled": False}, "key": {"enabled": False},
                                                "hold_key": {"enabled": False}})
        assert toolset.execute(None, "mouse_move", BetaComputerMouseMoveInput(coordinate=[321, 123])) is None
        where = toolset.execute(None, "cursor_position", anthropic.types.beta.BetaComputerCursorPositionInput())
        assert where == BetaComputerCursorPositionResult(x=321, y=123)
        zoom = toolset.execute(None, "zoom", BetaComputerZoomInput(region=[0, 0, 640, 400]))
        assert isinstance(zoom, BetaScreenshotResult) and png(zoom.data).width > 640  # enlarged to the limits
        # A member the caller disabled is refused by the server too, not only by the SDK.
        with pytest.raises(ApiError) as refused:
            toolset.execute(None, "type", anthropic.types.beta.BetaComputerTypeInput(text="x"))
        assert refused.value.status == 400 and "disabled in tool.configs" in str(refused.value)


def openai_calls(rect: dict[str, Any]) -> tuple[tuple[int, int], list[list[dict[str, Any]]]]:
    click = (rect["x"] + 600, rect["y"] + 400)
    actions = [{"type": "click", "button": "left", "x": click[0], "y": click[1], "keys": ["CTRL"]},
               {"type": "scroll", "x": click[0], "y": click[1], "scroll_x": 0, "scroll_y": 300, "keys": ["SHIFT"]},
               {"type": "double_click", "x": 60, "y": 60},
               {"type": "type", "text": "héllo ✓"}, {"type": "keypress", "keys": ["ENTER"]}]
    return click, [actions]


def check_openai_run(probe: Any, term: Cat, click: tuple[int, int], answer: dict[str, Any]) -> None:
    assert answer["finalOutput"] == "Done." and answer["modelCalls"] == 2
    assert term.wait_text("héllo ✓\n") == "héllo ✓\n"
    probe.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 5, count=3)
    presses = [(e["button"], e["rootX"], e["rootY"]) for e in probe.events("ButtonPress")]
    assert presses == [(1, *click), *[(5, *click)] * 3]  # 300 px are three wheel clicks down
    events = probe.events("ButtonPress")
    assert events[0]["state"] & X.ControlMask and all(e["state"] & X.ShiftMask for e in events[1:])
    # The SDK's one screenshot after the call's actions went back to the model as the call's output.
    assert answer["outputs"] == [["data:image/png;base64", "PNG", SW, SH]]


@pytest.mark.parametrize("on_a_handle", [False, True], ids=["sync-client", "async-desktop-handle"])
def test_openai_agents_computer_tool_drives_the_desktop(srv: ServerProcess, scene: tuple[Any, dict, Cat],
                                                        on_a_handle: bool) -> None:
    """The SDK's `Runner` in its own venv (tests/support/agents_venv.py): a scripted model's computer_call."""
    probe, rect, term = scene
    click, calls = openai_calls(rect)
    answer = run_agents({"url": srv.url, "token": srv.token, "settle": FAST, "async": on_a_handle,
                         "desktop": "default" if on_a_handle else None, "calls": calls})
    check_openai_run(probe, term, click, answer)


def test_openai_computer_with_a_display_size(srv: ServerProcess, scene: tuple[Any, dict, Cat]) -> None:
    probe, rect, _ = scene
    x, y = rect["x"] + 600, rect["y"] + 400
    # The middle button (OpenAI's `wheel`) at the centre of a 2x2 screen block; the drag, in the xterm, selects.
    answer = run_agents({"url": srv.url, "token": srv.token, "settle": FAST, "dimensions": [640, 400],
                         "click": [x // 2, y // 2, "wheel"], "drag": [[30, 30], [31, 31]]})
    assert answer["environment"] == "ubuntu" and answer["dimensions"] == [640, 400]
    assert answer["screenshot"] == ["PNG", 640, 400]
    probe.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] == 2)
    (press,) = probe.events("ButtonPress")
    assert (press["button"], press["rootX"], press["rootY"]) == (2, x // 2 * 2 + 1, y // 2 * 2 + 1)
