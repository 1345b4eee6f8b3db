"""Many desktops in `sandbox-desktop mcp` (docs/mcp.md, docs/desktops.md).

Two ways to serve them. By default an agent manages desktops of its own: `create_desktop`,
`list_desktops` and `delete_desktop`, and every desktop tool takes an optional `desktop_id` (left out:
the server's default desktop). With `--desktop ID` a host gives each agent one desktop: every tool acts
on it, none takes `desktop_id`, and the management tools are not offered.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from api.mcp.tools import Reply, Tool, integer, obj, string

if TYPE_CHECKING:
    from sandbox_desktop_client import AsyncClient

INSTRUCTIONS = (" Without desktop_id the tools act on the default desktop; create_desktop gives you one of your "
                "own: pass its id as desktop_id to every other tool, and delete_desktop it when you are done.")

# A path segment of /v1/desktops/{id}/...: the schema refuses what could never be one before any request.
ID_PATTERN = "^[^/]+$"


def desktop_id(description: str) -> dict[str, Any]:
    return {**string(description), "minLength": 1, "pattern": ID_PATTERN}


DESKTOP_ID = desktop_id("The desktop to act on: an id from create_desktop or list_desktops (default: the "
                        "default desktop)")
TAGS = {"type": "object", "additionalProperties": {"type": "string"},
        "description": "String labels, e.g. {\"task\": \"t42\"}"}
SECONDS = {"minimum": 1, "maximum": 30 * 24 * 3600}


NETWORK = {"type": "object", "additionalProperties": False,
           "description": "What the desktop's network reaches (default: the outside, never this machine or other "
                          "desktops)", "properties": {
               "egress": string("all, none, or only what allow lists", "all", "none", "allowlist"),
               "allow": {"type": "array", "maxItems": 256, "items": {"type": "string"},
                         "description": "With egress allowlist: host, ip or cidr, each optionally :port, e.g. "
                                        "\"pypi.org:443\""},
               "forwardHostPorts": {"type": "array", "maxItems": 64, "items": {"type": "integer", "minimum": 1,
                                                                                 "maximum": 65535},
                                    "description": "Ports of this machine's loopback reachable as the same port on "
                                                   "the desktop's own"}}}
LIMITS = {"type": "object", "additionalProperties": False,
          "description": "What its apps and commands may use; what exceeds it is killed or refused", "properties": {
              "memoryMb": integer("Memory in MiB", minimum=64),
              "pids": integer("Processes and threads", minimum=16),
              "cpu": {"type": "number", "exclusiveMinimum": 0, "description": "CPU in cores, e.g. 0.5"}}}


async def create_desktop(client: AsyncClient, args: dict[str, Any]) -> Reply:
    created = await client.desktops.create(
        tags=args.get("tags"), ttl_seconds=args.get("ttl_seconds"),
        idle_timeout_seconds=args.get("idle_timeout_seconds"), on_idle=args.get("on_idle"),
        width=args.get("width"), height=args.get("height"), network=args.get("network"),
        limits=args.get("limits"), auto_pause_seconds=args.get("auto_pause_seconds"),
        auto_delete_seconds=args.get("auto_delete_seconds"))
    return Reply([created.id])


async def list_desktops(client: AsyncClient, args: dict[str, Any]) -> Reply:
    found = await client.desktops.list(tags=args.get("tags"))
    return Reply([json.dumps([d.model_dump(by_alias=True, exclude_none=True) for d in found])])


async def delete_desktop(client: AsyncClient, args: dict[str, Any]) -> Reply:
    await client.desktops.delete(args["desktop_id"])
    return Reply([f"deleted {args['desktop_id']}"])


TOOLS = [
    Tool("create_desktop", "Create and start a Linux desktop of your own, a sandbox with its own user, files, "
         "processes and network; answers its id alone. Pass it as desktop_id to the other tools; delete it with "
         "delete_desktop when done. The server may impose tags, timers, network rules and limits of its own.", obj(
             width=integer("Screen width in pixels (default 1440)", minimum=64, maximum=8192),
             height=integer("Screen height in pixels (default 900)", minimum=64, maximum=8192),
             tags={**TAGS, "description": "String labels to find it by with list_desktops, e.g. {\"task\": \"t42\"}"},
             ttl_seconds=integer("Delete it this long after its creation", **SECONDS),
             idle_timeout_seconds=integer("Delete (or pause, with on_idle) it after this long without a call",
                                          **SECONDS),
             on_idle=string("What the idle timeout does", "delete", "pause", default="delete"),
             auto_pause_seconds=integer("Pause it after this much active time (counted from its creation or "
                                        "its last resume); any call resumes it", **SECONDS),
             auto_delete_seconds=integer("Delete it this long after it paused", **SECONDS),
             network=NETWORK, limits=LIMITS),
         create_desktop, manages=True),
    Tool("list_desktops", "List the server's desktops as JSON (id, state, display, resolution, tags, createdAt, "
         "expiresAt, ...), the default one first.", obj(
             tags={**TAGS, "description": "Only desktops carrying all of these tags"}), list_desktops, manages=True),
    Tool("delete_desktop", "Delete a desktop and everything running on it.", obj(
        ["desktop_id"], desktop_id=desktop_id("The desktop to delete: an id from create_desktop")),
         delete_desktop, manages=True),
]
NAMES = [t.name for t in TOOLS]


def desktop_arg(text: str) -> str:
    """`--desktop ID` (and $SANDBOX_DESKTOP_DESKTOP): one path segment, else a usage error (exit 2)."""
    if not text or "/" in text:
        raise argparse.ArgumentTypeError(f"not a desktop id: {text!r}")
    return text


def with_desktop_id(tool: Tool) -> Tool:
    """`tool` with an optional `desktop_id` argument in its schema (a copy: the batch schema is shared)."""
    schema = copy.deepcopy(tool.schema)
    schema.setdefault("properties", {})["desktop_id"] = DESKTOP_ID
    return Tool(tool.name, tool.description, schema, tool.handler)


def offered(tools: Sequence[Tool], fixed: str | None) -> list[Tool]:
    """The tools as served: on one fixed desktop, the desktop tools as they are; else each with `desktop_id`."""
    if fixed is not None:
        return [t for t in tools if not t.manages]
    return [t if t.manages else with_desktop_id(t) for t in tools]


def route(client: AsyncClient, tool: Tool, arguments: dict[str, Any],
          fixed: str | None) -> tuple[AsyncClient, dict[str, Any]]:
    """The client a call goes to (the fixed desktop, its `desktop_id`, else the default one) and its
    arguments without `desktop_id`."""
    if tool.manages:
        return client, arguments
    arguments = dict(arguments)
    chosen = fixed if fixed is not None else arguments.pop("desktop_id", None)
    return (client if chosen is None else client.desktops.attach(chosen)), arguments
