"""An agent's toolbox backed by one desktop's APIs: `bash`, `read_file`, `write_file`, `screenshot`, `click`.

Every tool acts inside the desktop's sandbox (docs/security.md): `bash` runs as the desktop's own user through
`/v1/desktops/{id}/processes/run`, files are read and written through `/v1/desktops/{id}/fs` (`~` is the
desktop's HOME), the screenshot and the click are the desktop's own screen and pointer. The toolbox adds two
checks of its own in front of the desktop, in this order:

1. an allow-list: a tool that is not in it is neither offered to the model (`schemas()`) nor run, and no
   request reaches the server for it;
2. an approval hook, called before each allowed call with the typed call: it answers `True`/`False` or an
   `Approval` carrying the reason the model is told.

A refused call, like a failed one (a missing file, a command the server refuses), comes back as an error
result the model can read and act on, never as an exception: the loop goes on.

    toolbox = Toolbox(desktop, allow=frozenset({ToolName.BASH, ToolName.SCREENSHOT}), approve=lambda call: True)
    result = toolbox.run(Bash("ls ~"))
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from sandbox_desktop_client import ApiError, DesktopClient

__all__ = ["Approval", "Bash", "Click", "ImageResult", "ReadFile", "TakeScreenshot", "TextResult", "ToolCall",
           "ToolName", "ToolResult", "Toolbox", "WriteFile", "parse_call"]

DEFAULT_TIMEOUT_MS = 30_000
"""How long a `bash` command may run when the model does not say (the server clamps it to its own maximum)."""
MAX_TEXT = 50_000
"""Characters of a file or of a command's output handed back to the model; the rest is cut, and it is told so."""


class ToolName(StrEnum):
    """The tools there are; an allow-list is a set of these."""

    BASH = "bash"
    READ_FILE = "read_file"
    WRITE_FILE = "write_file"
    SCREENSHOT = "screenshot"
    CLICK = "click"


# The calls: one frozen dataclass per tool, its fields the tool's input. `ToolCall` is their closed union.

@dataclass(frozen=True)
class Bash:
    """Run `command` with `bash -lc` in the desktop's sandbox, from its HOME, as its user."""

    tool: ClassVar[ToolName] = ToolName.BASH
    command: str
    timeout_ms: int = DEFAULT_TIMEOUT_MS


@dataclass(frozen=True)
class ReadFile:
    """Read a text file of the desktop (`~` is its HOME)."""

    tool: ClassVar[ToolName] = ToolName.READ_FILE
    path: str


@dataclass(frozen=True)
class WriteFile:
    """Write a text file of the desktop whole (missing parent directories are made)."""

    tool: ClassVar[ToolName] = ToolName.WRITE_FILE
    path: str
    content: str


@dataclass(frozen=True)
class TakeScreenshot:
    """The desktop's whole screen as a PNG."""

    tool: ClassVar[ToolName] = ToolName.SCREENSHOT


@dataclass(frozen=True)
class Click:
    """A left click at (x, y) in screen pixels."""

    tool: ClassVar[ToolName] = ToolName.CLICK
    x: int
    y: int


ToolCall = Bash | ReadFile | WriteFile | TakeScreenshot | Click
_CALLS: dict[ToolName, type[ToolCall]] = {cls.tool: cls for cls in (Bash, ReadFile, WriteFile, TakeScreenshot, Click)}


@dataclass(frozen=True)
class Approval:
    """The approval hook's answer: `allowed`, and the reason the model reads when it is not."""

    allowed: bool
    reason: str = ""


# The results: text (an error too), or an image.

@dataclass(frozen=True)
class TextResult:
    text: str
    is_error: bool = False

    def content(self) -> list[dict[str, Any]]:
        """The result as the content blocks of an Anthropic `tool_result`."""
        return [{"type": "text", "text": self.text}]


@dataclass(frozen=True)
class ImageResult:
    """A PNG, base64-encoded, with the screen's size: a click's coordinates are screen pixels."""

    png_base64: str
    width: int
    height: int
    screen_width: int
    screen_height: int
    is_error: ClassVar[bool] = False

    @property
    def png(self) -> bytes:
        return base64.b64decode(self.png_base64)

    def content(self) -> list[dict[str, Any]]:
        return [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": self.png_base64}},
                {"type": "text", "text": f"The screen is {self.screen_width}x{self.screen_height} pixels."}]


ToolResult = TextResult | ImageResult


def error(text: str) -> TextResult:
    return TextResult(text, is_error=True)


# The tools' JSON schemas (Anthropic's `tools` entries: name, description, input_schema).

_SCHEMAS: dict[ToolName, dict[str, Any]] = {
    ToolName.BASH: {
        "description": "Run a shell command with `bash -lc` on the desktop (a Linux sandbox with no network), from "
                       "its home directory. Returns the exit code, stdout and stderr.",
        "input_schema": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The command line"},
            "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill it after this long (default 30000)"},
        }, "required": ["command"]},
    },
    ToolName.READ_FILE: {
        "description": "Read a text file on the desktop (`~` is its home directory).",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    ToolName.WRITE_FILE: {
        "description": "Write a text file on the desktop whole, replacing it; missing directories are made.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                         "required": ["path", "content"]},
    },
    ToolName.SCREENSHOT: {
        "description": "Take a screenshot of the desktop's screen (PNG).",
        "input_schema": {"type": "object", "properties": {}},
    },
    ToolName.CLICK: {
        "description": "Left-click at (x, y) in screen pixels (the screenshot's pixels).",
        "input_schema": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0},
                                                          "y": {"type": "integer", "minimum": 0}},
                         "required": ["x", "y"]},
    },
}


def schema(name: ToolName) -> dict[str, Any]:
    return {"name": name.value, **_SCHEMAS[name]}


def parse_call(name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """The typed call for a model's tool use (its `name` and `input`); `ValueError` for an unknown tool, an
    unknown or missing argument, or one of the wrong type."""
    try:
        cls = _CALLS[ToolName(name)]
    except ValueError:
        raise ValueError(f"unknown tool {name!r}") from None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if unknown := set(arguments) - set(fields):
        raise ValueError(f"{name}: unknown argument(s) {sorted(unknown)}")
    for key, value in arguments.items():
        wanted = int if fields[key].type in ("int", int) else str
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise ValueError(f"{name}: {key} must be {'an integer' if wanted is int else 'a string'}")
    try:
        return cls(**arguments)
    except TypeError as exc:  # a required argument left out
        raise ValueError(f"{name}: {exc}") from None


def call_input(call: ToolCall) -> dict[str, Any]:
    """A call's tool `input` (the reverse of `parse_call`)."""
    return dataclasses.asdict(call)


class Toolbox:
    """The tools of `allow` on `desktop` (a handle: `client.desktops.create(...)`), each call approved by
    `approve` first. `run` and `run_tool_use` never raise for a refused or failed call: they return an error
    result."""

    def __init__(self, desktop: DesktopClient, allow: frozenset[ToolName],
                 approve: Callable[[ToolCall], Approval | bool]) -> None:
        self.desktop = desktop
        self.allow = allow
        self.approve = approve

    def schemas(self) -> list[dict[str, Any]]:
        """The allowed tools' schemas, for the model's `tools` (a tool it is not shown it cannot ask for)."""
        return [schema(name) for name in ToolName if name in self.allow]

    def run_tool_use(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run a model's tool use as it came (`name`, `input`): a malformed one is an error result."""
        try:
            call = parse_call(name, arguments)
        except ValueError as exc:
            return error(str(exc))
        return self.run(call)

    def run(self, call: ToolCall) -> ToolResult:
        """Check the allow-list, ask the approval hook, then run `call` on the desktop."""
        if call.tool not in self.allow:
            return error(f"the tool {call.tool.value!r} is not allowed here; allowed: "
                         f"{', '.join(n.value for n in ToolName if n in self.allow) or 'none'}")
        decision = self.approve(call)
        if isinstance(decision, bool):
            decision = Approval(decision)
        if not decision.allowed:
            return error(f"the call was not approved{': ' + decision.reason if decision.reason else ''}")
        try:
            return self._dispatch(call)
        except ApiError as exc:  # the server refused it: 404 for a missing file, 422 for a bad cwd, ...
            return error(f"{exc.code or exc.status}: {exc.detail}")

    def _dispatch(self, call: ToolCall) -> ToolResult:
        match call:
            case Bash(command=command, timeout_ms=timeout_ms):
                done = self.desktop.run("bash", ["-lc", command], timeout_ms=timeout_ms)
                status = (f"exit code {done.exit_code}" if done.exit_code is not None
                          else f"killed by signal {done.exit_signal}" + (" (timed out)" if done.timed_out else ""))
                text = (f"{status}\n<stdout>\n{_cut(done.stdout, done.stdout_truncated)}</stdout>\n"
                        f"<stderr>\n{_cut(done.stderr, done.stderr_truncated)}</stderr>")
                return TextResult(text, is_error=done.exit_code != 0)
            case ReadFile(path=path):
                data = self.desktop.read_file(path)
                return TextResult(_cut(data.decode("utf-8", errors="replace"), False))
            case WriteFile(path=path, content=content):
                written = self.desktop.write_file(path, content.encode())
                return TextResult(f"wrote {written.bytes_written} bytes to {written.path}")
            case TakeScreenshot():
                shot = self.desktop.screenshot(format="png")
                return ImageResult(base64.b64encode(shot.data).decode("ascii"), shot.image_width, shot.image_height,
                                   shot.screen_width, shot.screen_height)
            case Click(x=x, y=y):
                where = self.desktop.click(x, y)
                return TextResult(f"clicked at ({where.x}, {where.y})")


def _cut(text: str, truncated: bool) -> str:
    """At most `MAX_TEXT` characters, saying when something was left out (here or by the server)."""
    if len(text) > MAX_TEXT:
        text, truncated = text[:MAX_TEXT], True
    return text + ("\n[... cut]\n" if truncated else "")
