"""What every tool of `sandbox-desktop mcp` is made of: its reply, its spec and JSON schema helpers.

A module of its own so that the desktop tools (api/mcp/server.py) and the tools that manage desktops
(api/mcp/desktops.py) share them without importing each other.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the server imports the tools at start; the client (httpx) loads with the first MCP session
    from sandbox_desktop_client import ApiError, AsyncClient
    from sandbox_desktop_wire.effects import Effect


@dataclass(frozen=True)
class Image:
    """An image part of a reply: base64 data as MCP carries it."""

    data: str
    media_type: str


@dataclass
class Reply:
    """What a tool answers: text and image parts, and whether the model should treat it as a failure."""

    parts: list[str | Image] = field(default_factory=list)
    is_error: bool = False


def api_error_text(error: ApiError) -> str:
    """An API error as a tool's error text: what went wrong, and the code to tell errors apart."""
    return f"{error.detail} (code: {error.code or 'error'}, HTTP {error.status})"


Handler = Callable[["AsyncClient", dict[str, Any]], Awaitable[Reply]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any] | Callable[[], dict[str, Any]]
    """The arguments' JSON schema, or what makes it when first asked (`schema`): one derived from a wire model
    costs tens of milliseconds of pydantic, which every server start and CLI command paid at import."""
    handler: Handler
    manages: bool = False
    """True for a tool on the server's desktops (create, list, delete) rather than on one desktop: it takes
    no `desktop_id` and is left out when `--desktop` fixes the server to one desktop (docs/mcp.md)."""

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        return self.input_schema() if callable(self.input_schema) else self.input_schema


# JSON schema helpers: every property carries a description the model reads.

def obj(required: Sequence[str] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


REPORT_EFFECT = {"type": "boolean", "default": False, "description": "Also say what the action changed: the "
                 "screen areas drawn, windows opened or closed, the focus (docs/effects.md)"}


def with_effect(text: str, effect: Effect | None) -> str:
    """A tool's acknowledgement, and the effect's summary when it was asked for."""
    return text if effect is None else f"{text}\nEffect: {effect.summary}"


def integer(description: str, **limits: int) -> dict[str, Any]:
    return {"type": "integer", "description": description, **limits}


def string(description: str, *choices: str, default: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if choices:
        schema["enum"] = list(choices)
    if default is not None:
        schema["default"] = default
    return schema
