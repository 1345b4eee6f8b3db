"""TURN relays for the live view: which servers a viewer is told about, and its time-limited credentials
(docs/streaming-turn.md).

A viewer that cannot reach the server's UDP ports (a NAT on either side, a firewall that lets only TCP out)
relays its media through a TURN server. The server hands each viewer the TURN URLs in `signal/provide`'s
`iceservers` (neko v3's and the reference SDK's shape: `[{"urls": [...], "username": ..., "credential": ...}]`)
with a credential of its own: coturn's `use-auth-secret` scheme (the "TURN REST API"), where the username is
`<expiry unix time>:<who>` and the password is base64(HMAC-SHA1(shared secret, username)), so the TURN server
checks it without knowing the viewer and refuses it once expired. A TURN server with one fixed account
(`--turn-username/--turn-password`) is handed out as it is.

Plain data and the standard library only: the CLI builds these before the WebRTC stack is imported.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from typing import Any

DEFAULT_TTL_S = 3600
"""How long a viewer's TURN credential is valid (`--turn-ttl`)."""
SERVER_PEER = "server"
"""The `who` of the credential the server's own peer allocates with (viewer names cannot contain `+`)."""

_URL = re.compile(r"(?P<scheme>turns?):(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?"
                  r"(?:\?transport=(?P<transport>udp|tcp))?")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@/+-]")


def parse_turn_url(text: str) -> str:
    """`turn:HOST[:PORT][?transport=udp|tcp]` or `turns:...` (RFC 7065), as given; ValueError saying what is
    expected otherwise."""
    url = text.strip()
    match = _URL.fullmatch(url)
    port = match.group("port") if match else None
    if match is None or (port is not None and not 1 <= int(port) <= 65535):
        raise ValueError(f"expected turn:HOST[:PORT][?transport=udp|tcp] or turns:HOST[:PORT], got {text!r}")
    if match.group("scheme") == "turns" and match.group("transport") == "udp":
        raise ValueError(f"turns: (TURN over TLS) runs over TCP, got {text!r}")
    return url


def rest_credential(secret: str, username: str) -> str:
    """The password coturn's `use-auth-secret` expects for `username`: base64(HMAC-SHA1(secret, username))."""
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def rest_username(who: str, expires: int) -> str:
    """`<expiry unix time>:<who>`, with `who` reduced to characters every TURN server takes in a username."""
    return f"{expires}:{_UNSAFE.sub('_', who)}"


@dataclass(frozen=True)
class SharedSecret:
    """Per-viewer credentials derived from a secret the TURN server shares (`--turn-secret`, coturn's
    `static-auth-secret`)."""

    secret: str
    ttl: int = DEFAULT_TTL_S
    """Seconds a credential is valid from the moment it is handed out."""

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError("the TURN secret must not be empty")
        if self.ttl < 1:
            raise ValueError(f"the TURN credential lifetime must be at least 1 second, got {self.ttl}")


@dataclass(frozen=True)
class StaticCredentials:
    """One account on the TURN server, given to every viewer (`--turn-username/--turn-password`)."""

    username: str
    password: str


TurnCredentials = SharedSecret | StaticCredentials


@dataclass(frozen=True)
class IceServer:
    """One entry of an RTCConfiguration's `iceServers`, as the viewer's browser (or aiortc) takes it."""

    urls: tuple[str, ...]
    username: str
    credential: str

    def to_json(self) -> dict[str, Any]:
        """neko v3's ICEServer: `{"urls": [...], "username": ..., "credential": ...}`."""
        return {"urls": list(self.urls), "username": self.username, "credential": self.credential}


@dataclass(frozen=True)
class TurnRelays:
    """The TURN servers the live view offers and how their credentials are made."""

    urls: tuple[str, ...]
    credentials: TurnCredentials
    server_relay: bool = False
    """Whether the server's own peer also allocates a relay (a server behind a NAT that forwards nothing)."""

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("at least one TURN URL is needed")
        for url in self.urls:
            parse_turn_url(url)

    def ice_servers(self, who: str, now: float | None = None) -> list[IceServer]:
        """The servers with a credential for `who`, valid from `now` (default: the wall clock) for the TTL."""
        match self.credentials:
            case SharedSecret(secret=secret, ttl=ttl):
                username = rest_username(who, int(time.time() if now is None else now) + ttl)
                return [IceServer(self.urls, username, rest_credential(secret, username))]
            case StaticCredentials(username=username, password=password):
                return [IceServer(self.urls, username, password)]

    def for_viewer(self, desktop_id: str, viewer: str) -> list[IceServer]:
        """A viewer's servers; its credential names the desktop and the viewer (what a TURN log shows)."""
        return self.ice_servers(f"{desktop_id}/{viewer}")

    def for_server_peer(self, desktop_id: str) -> list[IceServer]:
        """The servers the server's own peer gathers relay candidates from: none unless `server_relay`."""
        return self.ice_servers(f"{desktop_id}+{SERVER_PEER}") if self.server_relay else []


def ice_servers_json(servers: list[IceServer]) -> list[dict[str, Any]]:
    """`iceservers` of `signal/provide` (and of any transport that hands a browser an RTCConfiguration)."""
    return [server.to_json() for server in servers]
