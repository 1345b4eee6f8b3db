"""The two ways a path names a desktop: `/v1/desktop/<p>` is the `default` desktop, `/v1/desktops/{id}/<p>`
the one named (docs/desktops.md); every desktop operation is served both ways."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from starlette.routing import WebSocketRoute

from api.http.operations import Operation

if TYPE_CHECKING:
    pass


DEFAULT_DESKTOP_ID = "default"
"""The desktop `/v1/desktop/...` drives: the reference API's single desktop."""


def desktop_path(path: str) -> tuple[str, str] | None:
    """(desktop id, the rest of the path) of a request path about one desktop, or None for a server-wide one:
    `/v1/desktop<rest>` is the `default` desktop, `/v1/desktops/{id}<rest>` the one named (docs/desktops.md).
    What the routes read from `{desktop_id}`, for the middleware that runs before any route."""
    if path == "/v1/desktop" or path.startswith("/v1/desktop/"):
        return DEFAULT_DESKTOP_ID, path.removeprefix("/v1/desktop")
    if path.startswith("/v1/desktops/"):
        desktop_id, slash, rest = path.removeprefix("/v1/desktops/").partition("/")
        if desktop_id:
            return desktop_id, slash + rest
    return None


SINGLE_PREFIX = "/v1/desktop"


MANY_PREFIX = "/v1/desktops/{desktop_id}"


def many_path(path: str) -> str | None:
    """`/v1/desktop/<p>` → `/v1/desktops/{desktop_id}/<p>`; None for a path that is not one desktop's."""
    return MANY_PREFIX + path.removeprefix(SINGLE_PREFIX) if path.startswith(SINGLE_PREFIX + "/") else None


def in_desktop(operations: Iterable[Operation], server_prefix: str, desktop_prefix: str) -> list[Operation]:
    """The server's operations under `server_prefix` again under `desktop_prefix` (`/v1/desktop/...`, then copied
    to every desktop by `per_desktop`), same handlers, which act in the desktop's sandbox there: named
    `<handler>_in_desktop`, and a 409 for a desktop that is not running."""
    return [dataclasses.replace(op, path=desktop_prefix + op.path.removeprefix(server_prefix),
                                summary=f"{op.summary} in the desktop's sandbox",
                                operation_id=f"{op.handler.__name__}_in_desktop",
                                errors=tuple(sorted({*op.errors, 409})))
            for op in operations if op.path.startswith(server_prefix)]


def per_desktop(operations: Iterable[Operation]) -> list[Operation]:
    """`/v1/desktop/<path>` operations again as `/v1/desktops/{desktop_id}/<path>`, same handlers."""
    copies = []
    for op in operations:
        if (path := many_path(op.path)) is not None:
            name = re.sub(r"\W", "_", op.operation_id or op.handler.__name__)
            copies.append(dataclasses.replace(op, path=path, operation_id=f"{name}_of_desktop",
                                              errors=(*op.errors, 404), tags=(*op.tags, "desktops")))
    return copies


def per_desktop_websockets(routes: Iterable[WebSocketRoute]) -> list[WebSocketRoute]:
    """`/v1/desktop/...` WebSockets again under `/v1/desktops/{desktop_id}/...`, same endpoints."""
    return [WebSocketRoute(path, r.endpoint) for r in routes if (path := many_path(r.path)) is not None]
