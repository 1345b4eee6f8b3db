"""`sandbox-desktop mcp`: the MCP server as a subprocess, driven over stdio by the `mcp` client SDK."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from api.mcp.server import Image, batch_reply
from sandbox_desktop_wire.actions import ActionsResponse
from tests.conftest import ServerProcess, free_port, run
from tests.support.paths import REPO

pytest.importorskip("mcp", reason="the `mcp` package is not installed (pip install 'sandbox-desktop[mcp]')")

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

DESKTOP = {"displayNum": 341, "width": 800, "height": 600}
LAUNCH = "import sys; from api.mcp.server import main; sys.exit(main(sys.argv[1:]))"
ALL_TOOLS = {"screenshot", "click", "type", "key", "scroll", "drag", "windows", "clipboard_get",
             "clipboard_set", "launch", "batch", "wait", "tree", "find", "act"}
T = TypeVar("T")


def mcp(srv: ServerProcess, use: Callable[[ClientSession], Awaitable[T]], *argv: str) -> T:
    """Start `sandbox-desktop mcp` (address and token from the environment, as a user sets them) and run `use`."""
    env = {k: v for k, v in os.environ.items() if k not in ("SANDBOX_DESKTOP_URL", "SANDBOX_DESKTOP_TOKEN")}
    env["SANDBOX_DESKTOP_URL"] = srv.url
    if srv.token:
        env["SANDBOX_DESKTOP_TOKEN"] = srv.token
    params = StdioServerParameters(command=sys.executable, args=["-c", LAUNCH, *argv], env=env, cwd=REPO)

    async def session() -> T:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await use(s)

    return run(session, 40)


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def images(result: types.CallToolResult) -> list[types.ImageContent]:
    return [c for c in result.content if isinstance(c, types.ImageContent)]


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_lists_every_tool_with_a_described_schema(srv: ServerProcess) -> None:
    listed = mcp(srv, lambda s: s.list_tools()).tools
    assert {t.name for t in listed} == ALL_TOOLS | {"create_desktop", "list_desktops", "delete_desktop"}
    for tool in listed:
        assert tool.description and tool.inputSchema["type"] == "object", tool.name
    click = next(t for t in listed if t.name == "click")
    assert click.inputSchema["required"] == ["x", "y"]
    assert all(p.get("description") for p in click.inputSchema["properties"].values())
    batch = next(t for t in listed if t.name == "batch")
    assert "actions" in batch.inputSchema["properties"]


def test_allow_list_hides_the_other_tools(srv: ServerProcess) -> None:
    async def use(s: ClientSession) -> tuple[set[str], types.CallToolResult]:
        names = {t.name for t in (await s.list_tools()).tools}
        return names, await s.call_tool("type", {"text": "x"})

    names, refused = mcp(srv, use, "--allow", "screenshot,click", "--allow", "windows")
    assert names == {"screenshot", "click", "windows"}
    assert refused.isError and "unknown tool 'type'" in texts(refused)[0]


def test_screenshot_is_image_content_of_the_screen(srv: ServerProcess) -> None:
    async def use(s: ClientSession) -> tuple[types.CallToolResult, types.CallToolResult]:
        return await s.call_tool("screenshot", {}), await s.call_tool("screenshot", {"format": "jpeg", "scale": 0.5})

    png, jpeg = mcp(srv, use)
    assert not png.isError
    [image] = images(png)
    assert image.mimeType == "image/png"
    assert png_size(base64.b64decode(image.data)) == (800, 600)
    assert "screen 800x600" in texts(png)[0]
    [small] = images(jpeg)
    assert small.mimeType == "image/jpeg" and base64.b64decode(small.data).startswith(b"\xff\xd8")
    assert "image 400x300" in texts(jpeg)[0]


def test_click_and_type_reach_a_launched_xterm(srv: ServerProcess, tmp_path: Path) -> None:
    marker = tmp_path / "typed"

    async def window(s: ClientSession, title: str) -> dict[str, Any] | None:
        listed = json.loads(texts(await s.call_tool("windows", {}))[0])
        return next((w for w in listed if w["title"] == title), None)

    async def use(s: ClientSession) -> dict[str, Any]:
        launched = await s.call_tool("launch", {"app": "xterm", "args": ["-T", "mcp-term"], "wait": True})
        assert not launched.isError, texts(launched)
        assert json.loads(texts(launched)[0])["processId"]
        term = await until(lambda: window(s, "mcp-term"), "the xterm in the windows tool")
        clicked = await s.call_tool("click", {"x": term["x"] + term["width"] // 2,
                                              "y": term["y"] + term["height"] // 2, "reportEffect": True})
        assert not clicked.isError, texts(clicked)
        assert texts(clicked)[0].startswith("clicked at ") and "\nEffect: " in texts(clicked)[0], texts(clicked)
        typed = await s.call_tool("type", {"text": f"touch {marker}; printf '\\033]0;mcp-typed\\007'\n"})
        assert not typed.isError, texts(typed)
        retitled: dict[str, Any] = await until(lambda: window(s, "mcp-typed"), "the title set from the shell")
        await s.call_tool("key", {"chord": "ctrl+d"})
        return retitled

    retitled = mcp(srv, use)
    assert retitled["id"].isdigit()
    assert marker.exists()


def test_batch_returns_results_and_the_screenshot(srv: ServerProcess) -> None:
    body = {"actions": [{"type": "move", "x": 40, "y": 30}, {"type": "cursor_position"}],
            "settle": {"quietMs": 50, "timeoutMs": 1000}, "screenshot": {"format": "png", "scale": 0.5}}
    result = mcp(srv, lambda s: s.call_tool("batch", body))
    assert not result.isError, texts(result)
    summary = json.loads(texts(result)[0])
    assert summary["results"][1] == {"index": 1, "type": "cursor_position", "ok": True, "x": 40, "y": 30}
    assert "data" not in summary["screenshot"] and summary["screenshot"]["frame"]["imageWidth"] == 400
    [image] = images(result)
    assert png_size(base64.b64decode(image.data)) == (400, 300)


def test_an_invalid_batch_is_an_error_with_the_code(srv: ServerProcess) -> None:
    body = {"actions": [{"type": "key", "keys": "NoSuchKeyName"}], "screenshot": {}}
    result = mcp(srv, lambda s: s.call_tool("batch", body))
    assert result.isError and not images(result)
    assert "unknown key 'NoSuchKeyName'" in texts(result)[0]
    assert "(code: desktop_invalid_action, HTTP 400)" in texts(result)[0]


def test_a_failed_batch_action_is_an_error_that_keeps_the_screenshot() -> None:
    problem = {"status": 502, "code": "desktop_input_failed", "detail": "xdotool exited with 1"}
    shot = {"mediaType": "image/png", "data": "iVBORw0KGgo=", "frame": {
        "screenWidth": 8, "screenHeight": 6, "imageWidth": 8, "imageHeight": 6, "scale": 1.0,
        "region": {"x": 0, "y": 0, "width": 8, "height": 6}, "space": "screen"}}
    response = ActionsResponse.model_validate({
        "results": [{"index": 0, "type": "move", "x": 1, "y": 2}],
        "error": {"index": 1, "type": "key", "problem": problem},
        "coordinates": {"space": "screen", "width": 8, "height": 6, "screenWidth": 8, "screenHeight": 6},
        "screenshot": shot})
    reply = batch_reply(response)
    assert reply.is_error
    first, summary, image = reply.parts
    assert first == "action 1 (key) failed: xdotool exited with 1 (code: desktop_input_failed)"
    assert isinstance(summary, str) and "iVBOR" not in summary and json.loads(summary)["error"]["index"] == 1
    assert image == Image("iVBORw0KGgo=", "image/png")


ERRORS: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("launch", {"app": "no-such-app-xyz"}, ("(code: app_not_found, HTTP 404)", "no-such-app-xyz")),
    ("click", {"x": 5000, "y": 10}, ("HTTP 400",)),
    ("key", {"chord": "hyper+x"}, ("unknown modifier 'hyper'",)),
    ("click", {"x": 1}, ("'y' is a required property",)),
    ("delete_desktop", {"desktop_id": "default"}, ("(code: desktop_is_default, HTTP 409)",)),
    ("nope", {}, ("unknown tool 'nope'",)),
]
"""Calls that fail (tool, arguments, what the error's text says), whichever transport carries them."""


async def call_erring(s: ClientSession) -> list[types.CallToolResult]:
    return [await s.call_tool(tool, arguments) for tool, arguments, _ in ERRORS]


def assert_errors(results: list[types.CallToolResult]) -> None:
    """Each of ERRORS' calls answered an error result saying what it should."""
    for (tool, arguments, said), result in zip(ERRORS, results, strict=True):
        assert result.isError, (tool, arguments, texts(result))
        assert all(part in texts(result)[0] for part in said), (tool, arguments, texts(result))


def test_api_errors_carry_the_detail_and_code(srv: ServerProcess) -> None:
    assert_errors(mcp(srv, call_erring))


def test_clipboard_round_trips(srv: ServerProcess) -> None:
    async def use(s: ClientSession) -> types.CallToolResult:
        assert not (await s.call_tool("clipboard_set", {"text": "héllo ✓"})).isError
        return await s.call_tool("clipboard_get", {})

    assert texts(mcp(srv, use)) == ["héllo ✓"]


def test_a_call_over_the_timeout_is_reported(srv: ServerProcess) -> None:
    body = {"actions": [{"type": "wait", "durationMs": 4000}]}

    async def use(s: ClientSession) -> tuple[types.CallToolResult, float]:
        began = time.monotonic()
        return await s.call_tool("batch", body), time.monotonic() - began

    result, took = mcp(srv, use, "--timeout", "0.5")
    assert result.isError and "batch timed out after 0.5 s" in texts(result)[0]
    assert took < 3


def test_an_unreachable_server_is_an_error_result(srv: ServerProcess) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = mcp(srv, lambda s: s.call_tool("windows", {}), "--url", url)
    assert result.isError and f"cannot reach the sandbox-desktop server at {url}" in texts(result)[0]
