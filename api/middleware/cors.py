"""CORS as the reference server does it (docs/security.md), without its startup crash on `--cors-allow-credentials`."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import Message, Scope

EXPOSED = "mcp-session-id"
VARY = "origin, access-control-request-method, access-control-request-headers"
VARY_HEADER = (b"vary", VARY.encode("latin-1"))


@dataclass(frozen=True)
class CorsPolicy:
    """Allowed origins (none: every origin refused), methods and headers (`*` by default)."""

    origins: tuple[str, ...] = ()
    methods: tuple[str, ...] = field(default=("*",))
    headers: tuple[str, ...] = field(default=("*",))
    credentials: bool = False

    def allows_origin(self, origin: str) -> bool:
        return "*" in self.origins or origin in self.origins

    def origin_value(self, origin: str) -> str:
        # With credentials a literal `*` is invalid for browsers, so the origin is echoed instead.
        return "*" if "*" in self.origins and not self.credentials else origin

    def methods_value(self, requested: str | None) -> str:
        if "*" in self.methods:
            return (requested or "GET") if self.credentials else "*"
        return ", ".join(self.methods)

    def headers_value(self, requested: str | None) -> str | None:
        if "*" in self.headers:
            return (requested or None) if self.credentials else "*"
        return ", ".join(self.headers)


class Cors:
    """Answers preflights itself and decorates simple responses; always sends `Vary`. HTTP only: browsers apply no
    CORS to WebSockets. Run by the request gate (api/middleware/gate.py), after the browser guard."""

    def __init__(self, policy: CorsPolicy) -> None:
        self.policy = policy

    def read(self, scope: Scope) -> tuple[Response | None, str | None]:
        """The preflight's answer (None for any other request), and the allowed origin the response is to name
        (None: only `Vary` is added)."""
        # One pass over the raw headers: every request pays for this, most carry no Origin (SDKs, curl).
        origin: str | None = None
        requests_method = False
        for name, value in scope["headers"]:
            if name == b"origin":
                if origin is None:
                    origin = value.decode("latin-1")
            elif name == b"access-control-request-method":
                requests_method = True
        if scope["method"] == "OPTIONS" and origin and requests_method:
            return self.preflight(origin, Headers(scope=scope)), None
        return None, origin if origin and self.policy.allows_origin(origin) else None

    def decorate(self, message: Message, allowed: str | None) -> None:
        """Add the CORS headers to a response's `http.response.start`."""
        if allowed is not None:
            out = MutableHeaders(scope=message)
            out.append("vary", VARY)
            out["access-control-allow-origin"] = self.policy.origin_value(allowed)
            # The MCP session id, which a browser MCP client must read and send back (docs/mcp.md);
            # a route that exposes headers of its own (the screenshot's frame) keeps its list.
            if "access-control-expose-headers" not in out:
                out["access-control-expose-headers"] = EXPOSED
            if self.policy.credentials:
                out["access-control-allow-credentials"] = "true"
        else:
            message["headers"] = [*message.get("headers", ()), VARY_HEADER]

    def preflight(self, origin: str, headers: Headers) -> Response:
        """A 200 preflight answer; without an allowed origin it simply carries no allow headers."""
        out = {"vary": VARY}
        if self.policy.allows_origin(origin):
            out["access-control-allow-origin"] = self.policy.origin_value(origin)
            out["access-control-allow-methods"] = self.policy.methods_value(
                headers.get("access-control-request-method"))
            allowed_headers = self.policy.headers_value(headers.get("access-control-request-headers"))
            if allowed_headers:
                out["access-control-allow-headers"] = allowed_headers
            if self.policy.credentials:
                out["access-control-allow-credentials"] = "true"
            out["access-control-max-age"] = "600"
        return Response(status_code=200, headers=out)
