"""`sandbox-desktop mcp`: a running server's desktops as MCP tools over stdio (the official `mcp` SDK).

The desktop tools are here; the tools that manage desktops, and `desktop_id`, are in api/mcp/desktops.py. The
server serves the same tools itself at /v1/mcp (api/mcp/http.py, docs/mcp.md "Over HTTP")."""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from api.mcp import accessibility as mcp_accessibility
from api.mcp import desktops as mcp_desktops
from api.mcp.tools import REPORT_EFFECT, Image, Reply, Tool, api_error_text, integer, obj, string, with_effect
from api.server.config import MCP_TOOL_TIMEOUT_S
from sandbox_desktop_client import ApiError
from sandbox_desktop_client.chords import ChordError, parse_chord
from sandbox_desktop_client.local_servers import DEFAULT_URL, DESKTOP_ENV, TOKEN_ENV, URL_ENV
from sandbox_desktop_wire.actions import ActionsRequest, ActionsResponse
from sandbox_desktop_wire.actions import Image as WireImage
from sandbox_desktop_wire.waits import WaitRequest

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.lowlevel import Server

    from sandbox_desktop_client import AsyncClient

INSTRUCTIONS = ("Controls a Linux desktop. Take a screenshot first; x/y of click, scroll and drag are screen "
                "pixels (divide a scaled screenshot's pixel by its scale). `batch` runs several actions, "
                "waits for the screen to settle and returns one screenshot: one call per step. `find` and `act` "
                "name an app's buttons and fields by role and name instead of pixels; `tree` lists them.")


def point(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
            "description": description + ": [x, y] in screen pixels"}


X = integer("Horizontal screen pixel, 0 at the left", minimum=0)
Y = integer("Vertical screen pixel, 0 at the top", minimum=0)
BUTTON = string("Mouse button", "left", "middle", "right", "back", "forward", default="left")
SELECTION = string("Which X selection", "clipboard", "primary", default="clipboard")


# Tools: each takes the open client and the validated arguments.

async def screenshot(client: AsyncClient, args: dict[str, Any]) -> Reply:
    som = args.get("som", False)
    shot = await client.screenshot(format=args.get("format", "png"), quality=args.get("quality"),
                                   scale=args.get("scale"), som=som)
    frame = (f"screen {shot.screen_width}x{shot.screen_height}, image {shot.image_width}x{shot.image_height}, "
             f"scale {shot.scale:g}")
    parts: list[str | Image] = [Image(base64.b64encode(shot.data).decode(), shot.media_type), frame]
    if som:
        parts.append(mcp_accessibility.marks_text(await client.marks()))
    return Reply(parts)


async def click(client: AsyncClient, args: dict[str, Any]) -> Reply:
    at = await client.click(args["x"], args["y"], button=args.get("button", "left"), count=args.get("count", 1),
                            report_effect=args.get("reportEffect") or None)
    return Reply([with_effect(f"clicked at {at.x},{at.y}", at.effect)])


async def type_text(client: AsyncClient, args: dict[str, Any]) -> Reply:
    await client.type_text(args["text"], delay_ms=args.get("delay_ms", 0))
    return Reply([f"typed {len(args['text'])} characters"])


async def key(client: AsyncClient, args: dict[str, Any]) -> Reply:
    name, flags = parse_chord(args["chord"])
    await client.press(name, **flags)
    return Reply([f"pressed {args['chord']}"])


async def scroll(client: AsyncClient, args: dict[str, Any]) -> Reply:
    await client.scroll(args["x"], args["y"], dx=args.get("dx", 0), dy=args.get("dy", 0))
    return Reply(["scrolled"])


async def drag(client: AsyncClient, args: dict[str, Any]) -> Reply:
    at = await client.drag(args["start"], args["end"], duration_ms=args.get("duration_ms", 0),
                           button=args.get("button", "left"))
    return Reply([f"dragged to {at.x},{at.y}"])


async def windows(client: AsyncClient, args: dict[str, Any]) -> Reply:
    found = await client.windows()
    return Reply([json.dumps([w.model_dump(by_alias=True, exclude_none=True) for w in found])])


async def clipboard_get(client: AsyncClient, args: dict[str, Any]) -> Reply:
    return Reply([await client.clipboard(selection=args.get("selection", "clipboard"))])


async def clipboard_set(client: AsyncClient, args: dict[str, Any]) -> Reply:
    await client.set_clipboard(args["text"], selection=args.get("selection", "clipboard"))
    return Reply(["clipboard set"])


async def launch(client: AsyncClient, args: dict[str, Any]) -> Reply:
    launched = await client.launch(args["app"], args=args.get("args", ()), wait=args.get("wait", False))
    return Reply([launched.to_json().decode()])


def image_part(image: WireImage) -> Image:
    return Image(image.data, image.media_type)


def batch_reply(response: ActionsResponse) -> Reply:
    """The response as JSON text without the image data, then each image as image content."""
    images = [image_part(r.image) for r in response.results if r.image is not None]
    if response.screenshot is not None:
        images.append(image_part(response.screenshot))
    summary = response.model_dump(by_alias=True, exclude_none=True)
    for item in [*summary["results"], summary]:
        (item.get("image") or item.get("screenshot") or {}).pop("data", None)
    parts: list[str | Image] = []
    if response.error is not None:
        problem = response.error.problem
        parts.append(f"action {response.error.index} ({response.error.type}) failed: "
                     f"{problem.get('detail') or problem.get('title')} (code: {problem.get('code')})")
    return Reply([*parts, json.dumps(summary), *images], is_error=response.error is not None)


async def batch(client: AsyncClient, args: dict[str, Any]) -> Reply:
    return batch_reply(await client.actions(args["actions"], coordinates=args.get("coordinates"),
                                            settle=args.get("settle"), screenshot=args.get("screenshot")))


def batch_schema(request: type[BaseModel] = ActionsRequest) -> dict[str, Any]:
    # The request model is the schema: the model sees exactly what the server validates.
    schema = request.model_json_schema(by_alias=True)
    schema.pop("title", None)
    return schema


async def wait(client: AsyncClient, args: dict[str, Any]) -> Reply:
    answer = await client.wait(window=args.get("window"), screen=args.get("screen"), clipboard=args.get("clipboard"),
                               element=args.get("element"), timeout_ms=args.get("timeoutMs"))
    return Reply([answer.to_json().decode()])


TOOLS = [
    Tool("screenshot", "Capture the whole screen as an image.", obj(
        format=string("Image format; jpeg is smaller", "png", "jpeg", default="png"),
        scale={"type": "number", "minimum": 0.1, "maximum": 1, "description": "Shrink factor, e.g. 0.5"},
        quality=integer("JPEG quality", minimum=1, maximum=100),
        som={"type": "boolean", "default": False, "description": "Set-of-marks: draw a numbered box on every "
             "interactive element, and list each number's element; act takes the numbers"}), screenshot),
    Tool("click", "Click a mouse button at a screen pixel.", obj(
        ["x", "y"], x=X, y=Y, button=BUTTON,
        count=integer("1 click, 2 double click, 3 triple click", minimum=1, maximum=3),
        reportEffect=REPORT_EFFECT), click),
    Tool("type", "Type text (any Unicode) into the focused window; \\n presses Enter.", obj(
        ["text"], text=string("The text to type"),
        delay_ms=integer("Pause between characters in ms", minimum=0, maximum=1000)), type_text),
    Tool("key", "Press a key or chord once, e.g. Return, Escape, ctrl+c, ctrl+shift+t, alt+F4.", obj(
        ["chord"], chord=string("Modifiers (ctrl, shift, alt, cmd) and one X key name joined with +")), key),
    Tool("scroll", "Turn the mouse wheel with the pointer at a screen pixel.", obj(
        ["x", "y"], x=X, y=Y, dx=integer("Wheel clicks; > 0 scrolls right", minimum=-100, maximum=100),
        dy=integer("Wheel clicks; > 0 scrolls down", minimum=-100, maximum=100)), scroll),
    Tool("drag", "Press a mouse button at start, move to end, release.", obj(
        ["start", "end"], start=point("Where the button goes down"), end=point("Where it is released"),
        button=BUTTON, duration_ms=integer("How long the move takes", minimum=0, maximum=60000)), drag),
    Tool("windows", "List the top-level windows as JSON: id, title, geometry in screen pixels, isActive.",
         obj(), windows),
    Tool("clipboard_get", "Read the clipboard's text.", obj(selection=SELECTION), clipboard_get),
    Tool("clipboard_set", "Replace the clipboard's text.", obj(
        ["text"], text=string("The new clipboard text"), selection=SELECTION), clipboard_set),
    Tool("launch", "Start a desktop application; with wait, return once its window is shown.", obj(
        ["app"], app=string("Program name on PATH, e.g. xterm or firefox"),
        args={"type": "array", "items": {"type": "string"}, "description": "Command-line arguments"},
        wait={"type": "boolean", "default": False, "description": "Wait for its window (up to 5 s)"}), launch),
    Tool("batch", "Run input actions in order, optionally wait until the screen settles, and return the "
         "results and a screenshot. The body of POST /v1/desktop/actions: give `settle` or `screenshot` "
         "to get an image.", batch_schema, batch),
    Tool("wait", "Wait until one condition holds instead of polling with screenshots: a window appears, goes or "
         "is focused (`window`: title, titleRegex, class or pid, and until), the screen changes or settles "
         "(`screen`), the clipboard changes (`clipboard`), or an element appears, goes or gets a state "
         "(`element`: role, name..., and until: present, gone, or a state such as enabled or checked). Answers "
         "as soon as it holds; matched false with the last state at timeoutMs.",
         functools.partial(batch_schema, WaitRequest), wait),
]
TOOLS += mcp_accessibility.TOOLS
TOOLS += mcp_desktops.TOOLS
TOOL_NAMES = [t.name for t in TOOLS]


async def run_tool(tool: Tool, client: AsyncClient, arguments: dict[str, Any], timeout: float, url: str,
                   timeout_flag: str = "--timeout") -> Reply:
    """Run one tool call within `timeout` (set with `timeout_flag`); every failure becomes an error reply saying
    what happened."""
    import httpx  # loaded with the client already

    try:
        async with asyncio.timeout(timeout):
            return await tool.handler(client, arguments)
    except TimeoutError:
        return Reply([f"{tool.name} timed out after {timeout:g} s (the server's {timeout_flag}); the desktop may "
                      "still be carrying it out: take a screenshot before retrying"], is_error=True)
    except ApiError as e:
        return Reply([api_error_text(e)], is_error=True)
    except ChordError as e:
        return Reply([str(e)], is_error=True)
    except httpx.ConnectError:
        return Reply([f"cannot reach the sandbox-desktop server at {url}: is it running?"], is_error=True)
    except httpx.TransportError as e:
        return Reply([f"talking to {url} failed: {e or type(e).__name__}"], is_error=True)


def to_result(reply: Reply) -> types.CallToolResult:
    from mcp import types

    content: list[types.ContentBlock] = [
        types.ImageContent(type="image", data=p.data, mimeType=p.media_type) if isinstance(p, Image)
        else types.TextContent(type="text", text=p) for p in reply.parts]
    return types.CallToolResult(content=content, isError=reply.is_error)


def build_server(client: AsyncClient, tools: Sequence[Tool], timeout: float, url: str,
                 desktop: str | None = None, timeout_flag: str = "--timeout") -> Server[Any, Any]:
    """An MCP server offering `tools` (only those) on `client`: on the desktop `desktop` alone when given
    (no management tools), else on the one each call's `desktop_id` names. The stdio command and the server's
    `/v1/mcp` (api/mcp/http.py) both serve this one."""
    from mcp import types
    from mcp.server.lowlevel import Server

    tools = mcp_desktops.offered(tools, desktop)
    by_name = {t.name: t for t in tools}
    managing = any(t.manages for t in tools)
    server: Server[Any, Any] = Server("sandbox-desktop", instructions=INSTRUCTIONS + (
        mcp_desktops.INSTRUCTIONS if managing else ""))

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=t.name, description=t.description, inputSchema=t.schema) for t in tools]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = by_name.get(name)
        if tool is None:
            return to_result(Reply([f"unknown tool {name!r}: this server offers {', '.join(by_name)}"], True))
        target, arguments = mcp_desktops.route(client, tool, arguments, desktop)
        return to_result(await run_tool(tool, target, arguments, timeout, url, timeout_flag))

    return server


async def serve(url: str, token: str | None, tools: Sequence[Tool], timeout: float,
                desktop: str | None = None) -> None:
    from mcp.server.stdio import stdio_server

    from sandbox_desktop_client import AsyncClient

    async with AsyncClient(url, token=token) as client:
        server = build_server(client, tools, timeout, url, desktop)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def tool_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown tool {', '.join(unknown) or repr(text)}: "
                                         f"choose from {', '.join(TOOL_NAMES)}")
    return names


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get(URL_ENV) or DEFAULT_URL,
                        help=f"server address (default ${URL_ENV} or {DEFAULT_URL})")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None,
                        help=f"bearer token (default ${TOKEN_ENV}, else the one a local server announced)")
    parser.add_argument("--allow", type=tool_list, action="extend", metavar="TOOL[,TOOL...]",
                        help=f"offer only these tools (repeatable; default all: {', '.join(TOOL_NAMES)})")
    parser.add_argument("--timeout", type=positive, default=MCP_TOOL_TIMEOUT_S, metavar="SECONDS",
                        help=f"fail a tool call that takes longer (default {MCP_TOOL_TIMEOUT_S:g})")
    parser.add_argument("--desktop", type=mcp_desktops.desktop_arg, default=os.environ.get(DESKTOP_ENV) or None,
                        metavar="ID", help=f"every tool acts on this desktop, and {', '.join(mcp_desktops.NAMES)} "
                        f"are left out (default ${DESKTOP_ENV}; else tools take desktop_id)")


# The parts of the `mcp` SDK the server uses; a partial install is as unusable as none.
MCP_MODULES = ("mcp", "mcp.types", "mcp.server.lowlevel", "mcp.server.stdio")


def missing_mcp() -> str | None:
    """Why the `mcp` SDK cannot be used (the ImportError's text), or None if it can."""
    for name in MCP_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return str(e) or name
    return None


def run_mcp(args: argparse.Namespace) -> int:
    """Serve MCP on stdin/stdout until the client closes them; 2 (a message on stderr, nothing on stdout,
    which is the protocol's channel) if the `mcp` package is missing (docs/mcp.md)."""
    problem = missing_mcp()
    if problem is not None:
        print(f"error: `sandbox-desktop mcp` needs the mcp package ({problem}): "
              "pip install 'sandbox-desktop[mcp]'", file=sys.stderr)
        return 2
    allowed = set(args.allow or TOOL_NAMES)
    asyncio.run(serve(args.url, args.token, [t for t in TOOLS if t.name in allowed], args.timeout, args.desktop))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sandbox-desktop mcp", description=__doc__)
    add_arguments(parser)
    return run_mcp(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
