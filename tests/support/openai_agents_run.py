"""Run inside the OpenAI Agents SDK's venv (tests/support/agents_venv.py), never imported by the tests: the SDK's
own `Runner` with its `ScriptedModel` in place of the Responses API, and the client's `DesktopComputer` (or
`AsyncDesktopComputer`) behind its `ComputerTool`, on the desktop of the server the test started.

Reads one JSON request on stdin and prints one JSON answer line:
- `{"url", "token", "settle", "async": bool, "desktop": id or null, "calls": [[action, ...], ...]}`: each list is one
  `computer_call` item the model answers with, then a final "Done."; answers the run's final output and, per model
  call after the first, the `computer_call_output` image's format and size as the SDK sent it back to the model.
- `{"url", "token", "settle", "dimensions": [w, h], "click": [x, y, button], "drag": [[x, y], ...]}`: the computer's
  methods called directly with a declared display; answers the screenshot's size.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import sys
from typing import Any

import agents
from agents.testing.model import ScriptedModel
from openai.types.responses import ResponseComputerToolCall, ResponseOutputMessage

import sandbox_desktop_client
from sandbox_desktop_client import AsyncClient, Client
from sandbox_desktop_client.openai_agents import AsyncDesktopComputer, DesktopComputer


def png_size(data: str) -> list[Any]:
    """A base64 PNG's format and size, read from its header (the venv has no Pillow)."""
    raw = base64.b64decode(data)
    width, height = struct.unpack(">II", raw[16:24])
    return ["PNG" if raw[:8] == b"\x89PNG\r\n\x1a\n" else "not a PNG", width, height]


def script(calls: list[list[dict[str, Any]]]) -> list[Any]:
    steps: list[Any] = [[ResponseComputerToolCall.model_validate({
        "type": "computer_call", "id": f"cu_{i}", "call_id": f"call_{i}", "status": "completed",
        "pending_safety_checks": [], "actions": actions})] for i, actions in enumerate(calls)]
    return [*steps, [ResponseOutputMessage.model_validate({
        "type": "message", "id": "m_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}]})]]


def outputs(model: ScriptedModel) -> list[list[Any]]:
    """What went back to the model: each later call's last computer_call_output image."""
    sent = []
    for call in model.calls[1:]:
        *_, output = [item for item in call.input if item.get("type") == "computer_call_output"]
        url = output["output"]["image_url"]
        head, data = url.split(",", 1)
        sent.append([head, *png_size(data)])
    return sent


def run(request: dict[str, Any]) -> dict[str, Any]:
    model = ScriptedModel(script(request["calls"]))
    settle = request["settle"]

    async def on_a_handle() -> Any:
        async with AsyncClient(request["url"], token=request["token"]) as client:
            computer = AsyncDesktopComputer(client.desktops.attach(request["desktop"] or "default"), settle=settle)
            agent = agents.Agent(name="desk", model=model, tools=[agents.ComputerTool(computer=computer)])
            return await agents.Runner.run(agent, "Do the task.")

    if request["async"]:
        result = asyncio.run(on_a_handle())
    else:
        with Client(request["url"], token=request["token"]) as desk:
            agent = agents.Agent(name="desk", model=model,
                                 tools=[agents.ComputerTool(computer=DesktopComputer(desk, settle=settle))])
            result = agents.Runner.run_sync(agent, "Do the task.")
    return {"finalOutput": result.final_output, "outputs": outputs(model), "modelCalls": len(model.calls)}


def direct(request: dict[str, Any]) -> dict[str, Any]:
    with Client(request["url"], token=request["token"]) as desk:
        computer = DesktopComputer(desk, dimensions=tuple(request["dimensions"]), settle=request["settle"])
        assert isinstance(computer, agents.Computer)
        shot = png_size(computer.screenshot())
        computer.click(*request["click"])
        computer.drag([tuple(p) for p in request["drag"]])
        return {"environment": computer.environment, "dimensions": list(computer.dimensions or ()),
                "screenshot": shot}


def main() -> None:
    request = json.loads(sys.stdin.read())
    answer = direct(request) if "dimensions" in request else run(request)
    print(json.dumps({**answer, "client": sandbox_desktop_client.__path__[0]}))


if __name__ == "__main__":
    main()
