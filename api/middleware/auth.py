"""Bearer-token authentication for everything under /v1 except the health probe."""

from __future__ import annotations

import hmac
from typing import Protocol
from urllib.parse import parse_qsl

from starlette.responses import Response
from starlette.types import Scope

from api.http.problems import problem_body, problem_response
from sandbox_desktop_wire.enums import TokenRole

ROLE_SCOPE_KEY = "sandbox_desktop.role"
"""ASGI scope key where the middleware leaves the role of a scoped request (absent for the admin token)."""
DESKTOP_SCOPE_KEY = "sandbox_desktop.scoped_desktop"
"""ASGI scope key where the middleware leaves the desktop a scoped request is limited to (absent for the admin)."""

# Open without a token: liveness probes must work in containers that hold no secret.
PUBLIC_PATHS = frozenset({"/v1/health"})


def is_protected(path: str) -> bool:
    """Whether a path needs the token: all of /v1 but the public probes."""
    return (path == "/v1" or path.startswith("/v1/")) and path not in PUBLIC_PATHS


def tokens_match(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not leak the token."""
    return hmac.compare_digest(given.encode(), expected.encode())


def presented_token(scope: Scope) -> str | None:
    """The token from `Authorization: Bearer`, or `access_token` on WebSockets (browsers can't set headers)."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1")
            if text.startswith("Bearer "):
                return text[len("Bearer "):]
            return None
    if scope["type"] == "websocket":
        query = scope.get("query_string", b"").decode("latin-1")
        for key, value in parse_qsl(query):
            if key == "access_token":
                return value
    return None


class ScopedGrant(Protocol):
    """What a token scoped to one desktop grants (api/server/scoped_tokens.py issues them)."""

    @property
    def desktop_id(self) -> str: ...

    @property
    def role(self) -> TokenRole: ...

    def allows(self, method: str, path: str) -> bool:
        """Whether the token may make `method path` ("WS" for a WebSocket handshake)."""


class ScopedTokens(Protocol):
    """Where the middleware looks a presented token up, when it is not the server's own."""

    def find(self, token: str) -> ScopedGrant | None: ...


class TokenCheck:
    """Refuses requests to protected paths without the right token with a 401 problem; a token scoped to one
    desktop (api/server/scoped_tokens.py) passes only within its scope, else 403 `token_scope`. Run by the request
    gate (api/middleware/gate.py), last before the routes."""

    def __init__(self, token: str | None, scoped: ScopedTokens | None = None) -> None:
        self.token = token
        self.scoped = scoped

    def refusal(self, scope: Scope) -> Response | None:
        """The problem an HTTP request or WebSocket handshake is refused with, or None when it may go on (with the
        role and desktop of a scoped token left in the scope, under ROLE_SCOPE_KEY and DESKTOP_SCOPE_KEY)."""
        if not is_protected(scope["path"]):
            return None
        given = presented_token(scope)
        if given is not None and self.token is not None and tokens_match(given, self.token):
            return None
        # Even an open server (--no-token) honours a scoped token's limits: a view link stays view-only.
        scoped = self.scoped.find(given) if given is not None and self.scoped is not None else None
        if scoped is not None:
            method = "WS" if scope["type"] == "websocket" else scope["method"]
            if scoped.allows(method, scope["path"]):
                scope[ROLE_SCOPE_KEY] = scoped.role
                scope[DESKTOP_SCOPE_KEY] = scoped.desktop_id
                return None
            return problem_response(problem_body(
                403, "token_scope", "Token Scope", f"this token is for desktop {scoped.desktop_id!r} with role "
                f"{scoped.role.value!r}, which does not cover {method} {scope['path']}", "token_scope",
                desktopId=scoped.desktop_id, role=scoped.role.value))
        if self.token is None:
            return None
        body = problem_body(
            401, "token_invalid", "Token Invalid", "token invalid", "token_invalid",
            details={"message": "missing or invalid bearer token; send `Authorization: Bearer <token>`"},
        )
        return problem_response(body, {"WWW-Authenticate": 'Bearer realm="sandbox-desktop"'})
