"""Bearer-token authentication for everything under /v1 except the health probe."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_body, problem_response, send_refusal

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


class TokenAuthMiddleware:
    """Rejects requests to protected paths without the right token with a 401 problem."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] not in ("http", "websocket") or not is_protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        given = presented_token(scope)
        if given is not None and tokens_match(given, self.token):
            await self.app(scope, receive, send)
            return
        body = problem_body(
            401, "token_invalid", "Token Invalid", "token invalid", "token_invalid",
            details={"message": "missing or invalid bearer token; send `Authorization: Bearer <token>`"},
        )
        response = problem_response(body, {"WWW-Authenticate": 'Bearer realm="sandbox-desktop"'})
        await send_refusal(scope, receive, send, response)
