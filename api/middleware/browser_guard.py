"""What a web page in the user's browser can reach: the Host and Origin checks (docs/security.md).

A server on 127.0.0.1 is reachable by every page the user opens. Two holes follow, and each rule
here closes one:

- **DNS rebinding.** A page on `attacker.example:PORT` whose name re-resolves to 127.0.0.1 is, to
  the browser, same-origin with this server: it could read screenshots and run commands. Its
  requests carry `Host: attacker.example:PORT`, so the server answers only to the names it is
  known by (`HostPolicy`); a name is never one of ours by accident.
- **Cross-site requests and WebSockets.** Browsers apply no CORS to WebSockets, and send "simple"
  cross-site POSTs without a preflight. Both carry the page's `Origin`, so a request whose Origin is
  neither this server's own nor in the CORS allow-list (`-O`) is refused (`OriginPolicy`). Requests
  without an Origin (SDKs, curl, the Python client) are not from a page and pass.

Starlette's `TrustedHostMiddleware` checks the Host name only: it ignores the port, keeps a trailing
dot as part of the name, and answers a plain-text 400 rather than a problem naming the host and the
flag that would allow it; so the rule is written here, with everything decided at start.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.types import Scope

from api.http.problems import problem_body, problem_response
from sandbox_desktop_client.local_servers import is_loopback_host

ALLOWED_HOST_FLAG = "--allowed-host"
ALLOWED_HOSTS_ENV = "SANDBOX_DESKTOP_ALLOWED_HOSTS"
CORS_FLAG = "--cors-allow-origin"
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
HOST_VERDICTS_KEPT = 256
"""Distinct (Host, scheme) verdicts the guard keeps; past that it starts over."""


def _normal_name(host: str) -> str:
    """Lower case, one trailing dot dropped, IP literals in their canonical form (no brackets)."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    elif name.endswith("."):
        name = name[:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None] | None:
    """`name[:port]` or `[v6][:port]` -> (normal name, port or None); None if it is not a host."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text_raw = value.rpartition(":")
        if not sep:
            name, port_text_raw = value, ""
        elif ":" in name:  # an IPv6 address without brackets is not a valid Host
            return None
        port_text = port_text_raw if sep else None
    if port_text is not None and not (port_text.isascii() and port_text.isdigit() and int(port_text) < 65536):
        return None
    normal = _normal_name(name)
    if not normal or any(c in normal for c in "/\\@ \t"):
        return None
    if name.startswith("[") and not _is_ip(normal):
        return None
    return normal, int(port_text) if port_text is not None else None


@dataclass(frozen=True)
class HostPattern:
    """One `--allowed-host` entry: `name`, `*.domain` (its subdomains), an IP, each optionally `:port`."""

    name: str
    port: int | None = None
    any_host: bool = False

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """Raises ValueError with a message for a malformed pattern."""
        text = text.strip()
        if text == "*":
            return cls("*", any_host=True)
        wildcard = text.startswith("*.")
        parsed = split_host(text[2:] if wildcard else text)
        if parsed is None or (wildcard and _is_ip(parsed[0])) or "*" in parsed[0]:
            raise ValueError(f"{text!r} is not a host name, IP address or *.domain, optionally with :port")
        name, port = parsed
        return cls("*." + name if wildcard else name, port)

    def matches(self, name: str, port: int) -> bool:
        if self.any_host:
            return True
        if self.port is not None and self.port != port:
            return False
        if self.name.startswith("*."):
            return name.endswith(self.name[1:])
        return name == self.name


@dataclass(frozen=True)
class HostPolicy:
    """The names this server answers to; `enforced=False` (a non-loopback bind without
    `--allowed-host`) answers to any, since such a server needs a token anyway."""

    enforced: bool = False
    port: int | None = None
    """The bound port, which loopback names must carry (None: any, e.g. for `--port 0`)."""
    bound: str | None = None
    """The bound address when it is a specific one (its literal is one of our names)."""
    patterns: tuple[HostPattern, ...] = ()
    ip_literals: bool = False
    """Any IP literal is ours: on a non-loopback bind, pod and node addresses (probes) name us, and an
    IP literal cannot be rebound (DNS rebinding needs a name the attacker controls)."""

    @classmethod
    def for_bind(cls, host: str, port: int, allowed: tuple[str, ...]) -> HostPolicy:
        """The policy for a server bound to `host:port` with `--allowed-host` patterns (ValueError)."""
        patterns = tuple(HostPattern.parse(p) for p in allowed)
        loopback = is_loopback_host(host)
        if not loopback and not patterns:
            return cls()
        bound = _normal_name(host)
        specific = _is_ip(bound) and not ipaddress.ip_address(bound).is_unspecified
        return cls(enforced=True, port=port or None, bound=bound if specific else None, patterns=patterns,
                   ip_literals=not loopback)

    def allows(self, host_header: str | None, scheme: str) -> bool:
        if not self.enforced:
            return True
        parsed = split_host(host_header or "")
        if parsed is None:
            return False
        name, port = parsed
        port = port if port is not None else _DEFAULT_PORTS.get(scheme, 80)
        if any(p.matches(name, port) for p in self.patterns):
            return True
        ours = is_loopback_name(name) or name == self.bound or (self.ip_literals and _is_ip(name))
        return ours and (self.port is None or port == self.port)


def is_loopback_name(name: str) -> bool:
    """The names every loopback server answers to: localhost, *.localhost, 127.0.0.1 and ::1."""
    return name in ("localhost", "127.0.0.1", "::1") or name.endswith(".localhost")


@dataclass(frozen=True)
class OriginPolicy:
    """Browser origins allowed besides the server's own: the CORS allow-list (`-O`)."""

    allowed: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_cors(cls, origins: tuple[str, ...]) -> OriginPolicy:
        return cls(frozenset(o.strip().rstrip("/").lower() for o in origins))

    def allows(self, origin: str, host_header: str | None) -> bool:
        normal = origin.strip().rstrip("/").lower()
        if "*" in self.allowed or normal in self.allowed:
            return True
        return is_same_origin(normal, host_header)


def is_same_origin(origin: str, host_header: str | None) -> bool:
    """Whether a page at `origin` is this server as the request addressed it (its Host).

    The scheme is not compared: behind a TLS proxy the page is https and the request reaching us is
    http. Ports are, with each side's default filled in only when the other side names none.
    """
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        return False
    host = split_host(host_header or "")
    if host is None or _normal_name(parts.hostname) != host[0]:
        return False
    if host[1] is None:
        return origin_port is None or origin_port == _DEFAULT_PORTS[parts.scheme]
    return (origin_port if origin_port is not None else _DEFAULT_PORTS[parts.scheme]) == host[1]


class BrowserGuard:
    """Refuses, before any route runs, a request whose Host is not ours (421) or whose Origin is a
    page we do not serve (403). HTTP requests and WebSocket handshakes alike; run by the request gate
    (api/middleware/gate.py) before CORS and the token.

    Every request pays for the Host check, and a client sends the same Host on every request: the
    verdict of each (Host, scheme) is kept, since the policy never changes (bounded, as Hosts come from clients)."""

    def __init__(self, hosts: HostPolicy, origins: OriginPolicy) -> None:
        self.hosts = hosts
        self.origins = origins
        self._host_verdicts: dict[tuple[bytes | None, str], bool] = {}

    def host_allowed(self, host: bytes | None, scheme: str) -> bool:
        key = (host, scheme)
        verdict = self._host_verdicts.get(key)
        if verdict is None:
            verdict = self.hosts.allows(host.decode("latin-1") if host is not None else None, scheme)
            if len(self._host_verdicts) >= HOST_VERDICTS_KEPT:
                self._host_verdicts.clear()
            self._host_verdicts[key] = verdict
        return verdict

    def refusal(self, scope: Scope) -> Response | None:
        """The problem an HTTP request or WebSocket handshake is refused with, or None when it may go on."""
        raw_host: bytes | None = None
        raw_origin: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"host":
                raw_host = value
            elif name == b"origin":
                raw_origin = value
        if not self.host_allowed(raw_host, scope.get("scheme", "http")):
            shown = raw_host.decode("latin-1") if raw_host is not None else "(none)"
            return problem_response(problem_body(
                421, "host_not_allowed", "Host Not Allowed",
                f"this server does not answer to the host {shown!r}; start it with "
                f"{ALLOWED_HOST_FLAG} NAME (or ${ALLOWED_HOSTS_ENV}) to allow a name it is reached by",
                "host_not_allowed", host=shown, flag=ALLOWED_HOST_FLAG))
        if raw_origin is not None:
            origin = raw_origin.decode("latin-1")
            host = raw_host.decode("latin-1") if raw_host is not None else None
            if not self.origins.allows(origin, host):
                return problem_response(problem_body(
                    403, "origin_not_allowed", "Origin Not Allowed",
                    f"requests from pages on {origin!r} are refused; start the server with {CORS_FLAG} {origin} "
                    "to allow that origin", "origin_not_allowed", origin=origin, flag=CORS_FLAG))
        return None
