"""Tokens scoped to one desktop: what a share link to a live view carries (docs/desktops.md, "Scoped tokens").

The server token stays the admin credential. `POST /v1/desktops/{id}/tokens` (admin only) issues a
token for one desktop with a role:
- `view`: its status, screenshots, window list, live-view status, and the live view itself without
  input (the viewer can never take control);
- `control`: everything under that desktop's paths (`/v1/desktops/{id}/...`, and `/v1/desktop/...`
  for `default`), except issuing tokens and deleting the desktop.
The wall (`/v1/wall/ws`) is open to both, showing their desktop only (docs/inspector.md, "Wall").
Anything else (another desktop, the desktops list, the process and file APIs, metrics) is 403
`token_scope`. Tokens live in memory, hashed, until their `ttlSeconds` pass or the server stops.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from api.http.desktop_paths import desktop_path
from sandbox_desktop_wire.enums import TokenRole
from sandbox_desktop_wire.limits import MAX_TTL_SECONDS
from sandbox_desktop_wire.wall import WALL_SOCKET_PATH

PREFIX = "sdt_"
DEFAULT_TTL_S = 3600
MAX_TTL_S = MAX_TTL_SECONDS
MAX_TOKENS = 4096
"""Live scoped tokens a server keeps; issuing one more drops the oldest (expired ones go first)."""




# What a view token may do on its desktop: (method, path below the desktop's prefix).
_VIEW = {("GET", "/status"), ("HEAD", "/status"), ("GET", "/screenshot"), ("HEAD", "/screenshot"),
         ("GET", "/display/info"), ("GET", "/windows"), ("GET", "/stream/status"), ("WS", "/stream/signaling"),
         ("WS", "/stream/ws"),
         ("GET", "/health/ready"),
         ("WS", "/ws")}  # the command socket: each message is then held to this list (docs/websocket.md)


@dataclass(frozen=True)
class ScopedToken:
    desktop_id: str
    role: TokenRole
    expires_at: float

    def allows(self, method: str, path: str) -> bool:
        """Whether this token may make `method path` ("WS" for a WebSocket handshake)."""
        if (method, path) == ("WS", WALL_SOCKET_PATH):
            return True  # the route shows this token's desktop only
        about = desktop_path(path)
        if about is None or about[0] != self.desktop_id:
            return False
        rest = about[1]
        if self.role is TokenRole.VIEW:
            return (method, rest) in _VIEW or (rest == "" and method in ("GET", "HEAD"))
        # Admin only: a token cannot mint tokens, nor end the desktop it was lent.
        return rest != "/tokens" and not (rest == "" and method == "DELETE")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TokenStore:
    """Issued tokens by the SHA-256 of their text (the text itself is never kept)."""

    def __init__(self) -> None:
        self._tokens: dict[bytes, ScopedToken] = {}

    def issue(self, desktop_id: str, role: TokenRole, ttl_s: int) -> tuple[str, ScopedToken]:
        now = time.time()
        self._tokens = {k: v for k, v in self._tokens.items() if v.expires_at > now}
        while len(self._tokens) >= MAX_TOKENS:
            self._tokens.pop(next(iter(self._tokens)))
        token = PREFIX + secrets.token_urlsafe(32)
        scoped = ScopedToken(desktop_id, role, now + ttl_s)
        self._tokens[_digest(token)] = scoped
        return token, scoped

    def find(self, token: str) -> ScopedToken | None:
        """The live scoped token with this text, if any (a dict lookup by digest: no timing to learn from)."""
        if not token.startswith(PREFIX):
            return None
        scoped = self._tokens.get(_digest(token))
        if scoped is None or scoped.expires_at <= time.time():
            return None
        return scoped

    def revoke(self, desktop_id: str) -> None:
        """Forget every token of a deleted desktop."""
        self._tokens = {k: v for k, v in self._tokens.items() if v.desktop_id != desktop_id}
