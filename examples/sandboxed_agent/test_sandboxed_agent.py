"""The agent's tools act inside its desktop's sandbox, and the toolbox's allow-list and approval hook hold:
against a real server (conftest.py), a real desktop, the real tools."""

from __future__ import annotations

import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent import AnthropicModel, ScriptedModel, ToolUse, Turn, run_agent
from agent_tools import (
    Approval,
    Bash,
    Click,
    ImageResult,
    ReadFile,
    TakeScreenshot,
    TextResult,
    Toolbox,
    ToolCall,
    ToolName,
    WriteFile,
)
from PIL import Image

from pytest_sandbox_desktop.server import DesktopServer
from sandbox_desktop_client import Client, DesktopClient, NotFoundError

EVERY_TOOL = frozenset(ToolName)


def approve_all(call: ToolCall) -> bool:
    return True


def text(result: TextResult | ImageResult) -> TextResult:
    assert isinstance(result, TextResult), result
    return result


def test_bash_runs_inside_the_desktop_as_its_own_user(agent_desktop: DesktopClient, token_file: Path) -> None:
    tools = Toolbox(agent_desktop, EVERY_TOOL, approve_all)

    whoami = text(tools.run(Bash("id -u")))
    assert not whoami.is_error, whoami.text
    uid = int(whoami.text.split("<stdout>\n")[1].split()[0])
    assert uid != os.getuid(), "the desktop's user is not the server's"

    token = token_file.read_text().strip()
    stolen = text(tools.run(Bash(f"cat {token_file}")))
    assert stolen.is_error, stolen.text  # hidden from its view of the files (its mount namespace), and 0600
    assert token not in stolen.text, "the agent read the server's token"
    searched = text(tools.run(Bash(f"grep -rs {token} {token_file.parent} /proc/*/environ; echo searched")))
    assert "searched" in searched.text and token not in searched.text, searched.text


def test_a_written_file_reads_back_from_the_desktops_home(agent_desktop: DesktopClient) -> None:
    tools = Toolbox(agent_desktop, EVERY_TOOL, approve_all)
    content = f"hello from the agent {uuid.uuid4()}\n"

    written = text(tools.run(WriteFile("~/agent/notes.txt", content)))
    assert not written.is_error, written.text
    assert text(tools.run(ReadFile("~/agent/notes.txt"))) == TextResult(content)
    # The same file, seen by the desktop's own shell: `~` is its HOME.
    assert content.strip() in text(tools.run(Bash("cat ~/agent/notes.txt"))).text
    missing = text(tools.run(ReadFile("~/agent/nothing-here.txt")))
    assert missing.is_error and "not_found" in missing.text, missing.text


def test_the_screenshot_is_a_png_of_the_desktops_screen(agent_desktop: DesktopClient) -> None:
    result = Toolbox(agent_desktop, EVERY_TOOL, approve_all).run(TakeScreenshot())

    assert isinstance(result, ImageResult)
    assert result.png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(result.png)) as image:
        assert image.format == "PNG" and image.size == (1024, 768)
    assert (result.screen_width, result.screen_height) == (1024, 768)
    assert result.content()[0]["source"]["media_type"] == "image/png"


def test_a_click_moves_the_desktops_pointer(agent_desktop: DesktopClient) -> None:
    result = text(Toolbox(agent_desktop, EVERY_TOOL, approve_all).run(Click(321, 123)))

    assert result == TextResult("clicked at (321, 123)")
    where = agent_desktop.mouse_position()
    assert (where.x, where.y) == (321, 123)


class RecordingTransport(httpx.HTTPTransport):
    """Every request the client sends, kept."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


def test_a_tool_outside_the_allow_list_is_refused_without_a_request(desktop_server: DesktopServer,
                                                                     agent_desktop: DesktopClient) -> None:
    transport = RecordingTransport()
    watched = Client(desktop_server.url, token=desktop_server.token, transport=transport)
    desktop = watched.desktops.attach(agent_desktop.id)
    asked: list[ToolCall] = []

    def approve(call: ToolCall) -> bool:
        asked.append(call)
        return True

    tools = Toolbox(desktop, frozenset({ToolName.READ_FILE, ToolName.SCREENSHOT}), approve)

    assert [s["name"] for s in tools.schemas()] == ["read_file", "screenshot"]
    for call in (Bash("touch ~/refused"), WriteFile("~/refused", "x"), Click(1, 1)):
        refused = text(tools.run(call))
        assert refused.is_error and "is not allowed" in refused.text, refused.text
    unknown = text(tools.run_tool_use("rm_rf", {"path": "/"}))
    assert unknown.is_error and "unknown tool" in unknown.text
    assert asked == [], "a refused tool is not even put to the approval hook"
    assert transport.sent == [], "no request reached the server"
    tools.run(ReadFile("~/nothing"))  # an allowed tool does reach it, through the same transport
    assert [r.url.path for r in transport.sent] == [f"/v1/desktops/{agent_desktop.id}/fs/file"]
    assert asked == [ReadFile("~/nothing")]
    watched.close()
    with pytest.raises(NotFoundError):
        agent_desktop.stat("~/refused")


def test_the_approval_hook_can_deny_a_call(agent_desktop: DesktopClient) -> None:
    marker = f"~/denied-{uuid.uuid4().hex}"
    asked: list[ToolCall] = []

    def no_side_effects(call: ToolCall) -> Approval:
        asked.append(call)
        if isinstance(call, Bash) and "touch" in call.command:
            return Approval(False, "no new files")
        return Approval(True)

    tools = Toolbox(agent_desktop, EVERY_TOOL, no_side_effects)
    denied = text(tools.run_tool_use("bash", {"command": f"touch {marker}"}))

    assert denied == TextResult("the call was not approved: no new files", is_error=True)
    assert asked == [Bash(f"touch {marker}")]
    with pytest.raises(NotFoundError):
        agent_desktop.stat(marker)  # the command never ran
    assert not text(tools.run(Bash("true"))).is_error, "an approved call runs"


def test_the_scripted_agent_runs_its_loop(agent_desktop: DesktopClient) -> None:
    tools = Toolbox(agent_desktop, frozenset(ToolName) - {ToolName.CLICK}, approve_all)
    script: list[ToolCall] = [Bash("echo hi > ~/loop.txt"), ReadFile("~/loop.txt"), Click(5, 5),
                              Bash("curl -sS -m 5 http://example.com")]
    lines: list[str] = []

    messages = run_agent(tools, ScriptedModel(script), "say hi", log=lines.append)

    assert [m["role"] for m in messages] == ["user"] + ["assistant", "user"] * 4 + ["assistant"]
    results = [m["content"][0] for m in messages[2::2] if isinstance(m["content"], list)]
    assert [r["is_error"] for r in results] == [False, False, True, True]
    assert results[1]["content"] == [{"type": "text", "text": "hi\n"}]
    assert "not allowed" in results[2]["content"][0]["text"]
    assert "curl" in results[3]["content"][0]["text"], "no network: egress none"
    assert lines[-1] == "model: done"


def test_the_anthropic_model_speaks_the_messages_api() -> None:
    """No network: a stand-in for api.anthropic.com answers what the Messages API answers."""
    seen: list[dict[str, Any]] = []

    def messages_api(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages" and request.headers["x-api-key"] == "key"
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}]})

    model = AnthropicModel("key", http=httpx.Client(base_url="https://api.anthropic.test",
                                                    transport=httpx.MockTransport(messages_api)))
    tools = [{"name": "screenshot", "description": "", "input_schema": {"type": "object", "properties": {}}}]
    turn = model([{"role": "user", "content": "look"}], tools)

    assert turn == Turn("Looking.", [ToolUse("toolu_1", "screenshot", {})])
    assert seen[0]["tools"] == tools and seen[0]["messages"] == [{"role": "user", "content": "look"}]
    assert turn.message()["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}
