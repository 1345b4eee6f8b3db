"""A tool-using agent loop whose tools act inside a sandboxed desktop (agent_tools.py; README.md here).

The loop is the Anthropic Messages API's: the model gets the conversation and the tools' schemas, answers with
text and `tool_use` blocks; each tool use goes through the toolbox (allow-list, approval hook, then the desktop),
and its result goes back as a `tool_result` block; the loop ends when the model uses no tool.

The desktop is a fresh one of its own, without network (`egress: none`), with memory, process and CPU limits,
deleted at the end. The model is any callable `(messages, tools) -> Turn`: `ScriptedModel` plays a fixed list
of tool calls (no vendor key, no network); `AnthropicModel` is the Messages API over plain HTTP.

    python examples/sandboxed_agent/agent.py --url http://127.0.0.1:2468 --token "$TOKEN" --yes
    (the token also comes from $SANDBOX_DESKTOP_TOKEN, or the local server's token file)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # agent_tools.py, when run as a script

from agent_tools import (
    Approval,
    Bash,
    Click,
    ReadFile,
    TakeScreenshot,
    TextResult,
    Toolbox,
    ToolCall,
    ToolName,
    WriteFile,
    call_input,
)

from sandbox_desktop_client import Client, DesktopClient

NETWORK = {"egress": "none"}
LIMITS = {"memoryMb": 1024, "pids": 256, "cpu": 1.0}
TASK = "Find out who you are on this machine, leave a note in your home directory, then look at the screen."


@dataclass(frozen=True)
class ToolUse:
    """One `tool_use` block of the model's answer."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """The model's answer: its text and its tool uses (none: it is done)."""

    text: str = ""
    tool_uses: Sequence[ToolUse] = ()

    def message(self) -> dict[str, Any]:
        """The answer as an assistant message of the conversation."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}] if self.text else []
        content += [{"type": "tool_use", "id": u.id, "name": u.name, "input": dict(u.input)} for u in self.tool_uses]
        return {"role": "assistant", "content": content}


Model = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Turn]
"""(messages, tools) -> the next turn; `messages` and `tools` are in the Messages API's format."""


@dataclass
class ScriptedModel:
    """A model that plays `calls`, one per turn, whatever the results; then it is done."""

    calls: Sequence[ToolCall]
    _next: int = field(default=0, init=False)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        if self._next >= len(self.calls):
            return Turn("done")
        call = self.calls[self._next]
        self._next += 1
        return Turn(tool_uses=[ToolUse(f"call_{self._next}", call.tool.value, call_input(call))])


@dataclass
class AnthropicModel:
    """Claude through the Messages API (`POST /v1/messages`), plain HTTP, no SDK:
    `AnthropicModel(api_key=os.environ["ANTHROPIC_API_KEY"])`. `http` is yours to replace (a proxy, a test)."""

    api_key: str
    model: str = "claude-sonnet-4-5"
    max_tokens: int = 2048
    system: str = "You operate a Linux desktop through tools. Be brief; stop when the task is done."
    http: httpx.Client = field(default_factory=lambda: httpx.Client(base_url="https://api.anthropic.com",
                                                                     timeout=120))

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
        answer = self.http.post("/v1/messages", headers={"x-api-key": self.api_key,
                                                         "anthropic-version": "2023-06-01"},
                                json={"model": self.model, "max_tokens": self.max_tokens, "system": self.system,
                                      "messages": messages, "tools": tools})
        answer.raise_for_status()
        blocks = answer.json()["content"]
        return Turn("".join(b["text"] for b in blocks if b["type"] == "text"),
                    [ToolUse(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"])


def run_agent(toolbox: Toolbox, model: Model, task: str, *, max_turns: int = 20,
              log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Drive `model` with `toolbox`'s tools on `task` until it uses none (or `max_turns`); the conversation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    tools = toolbox.schemas()
    for _ in range(max_turns):
        turn = model(messages, tools)
        messages.append(turn.message())
        if turn.text:
            log(f"model: {turn.text}")
        if not turn.tool_uses:
            break
        results = []
        for use in turn.tool_uses:
            result = toolbox.run_tool_use(use.name, use.input)
            shown = result.text if isinstance(result, TextResult) else f"<PNG {result.width}x{result.height}>"
            log(f"{use.name}({json.dumps(dict(use.input))}) -> {'ERROR ' if result.is_error else ''}{shown}")
            results.append({"type": "tool_result", "tool_use_id": use.id, "content": result.content(),
                            "is_error": result.is_error})
        messages.append({"role": "user", "content": results})
    return messages


def create_desktop(client: Client, **options: Any) -> DesktopClient:
    """A desktop for the agent: no network, limited memory, processes and CPU, deleted after an hour at most
    (use it in a `with` to delete it at once)."""
    settings: dict[str, Any] = {"width": 1024, "height": 768, "network": NETWORK, "limits": LIMITS,
                                "ttl_seconds": 3600, "tags": {"example": "sandboxed_agent"}}
    return client.desktops.create(**{**settings, **options})


def ask_on_terminal(call: ToolCall) -> Approval:
    """The approval hook of an interactive run: calls with side effects (a command, a write) are asked about."""
    if call.tool not in (ToolName.BASH, ToolName.WRITE_FILE):
        return Approval(True)
    answer = input(f"allow {call}? [y/N] ").strip().lower()
    return Approval(answer in ("y", "yes"), "" if answer in ("y", "yes") else "the operator said no")


SCRIPT: list[ToolCall] = [
    Bash("id -u; id -un; echo HOME=$HOME"),
    WriteFile("~/notes/hello.txt", "written by the sandboxed agent\n"),
    ReadFile("~/notes/hello.txt"),
    Bash("curl -sS -m 5 https://example.com >/dev/null && echo online || echo offline"),
    TakeScreenshot(),
    Click(512, 384),
]
"""What `ScriptedModel` plays here: who am I, a file written then read, the network (refused), the screen."""


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:2468")
    parser.add_argument("--token", default=None, help="default $SANDBOX_DESKTOP_TOKEN, then the local server's")
    parser.add_argument("--allow", default=",".join(ToolName),
                        help="the tools the agent may use, comma-separated (default all: %(default)s)")
    parser.add_argument("--yes", action="store_true", help="approve every call (default: ask for bash and writes)")
    parser.add_argument("--anthropic-key", default=None,
                        help="drive Claude through the Messages API with this key instead of the scripted model")
    args = parser.parse_args(None if argv is None else list(argv))
    allow = frozenset(ToolName(name.strip()) for name in args.allow.split(",") if name.strip())
    model: Model = AnthropicModel(args.anthropic_key) if args.anthropic_key else ScriptedModel(SCRIPT)
    with Client(args.url, token=args.token, timeout=120) as client, create_desktop(client) as desktop:
        toolbox = Toolbox(desktop, allow, (lambda call: True) if args.yes else ask_on_terminal)
        messages = run_agent(toolbox, model, TASK)
    print(f"{len(messages)} messages; desktop {desktop.id} deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
