"""A desktop's network rules as a caller gives them, checked and parsed (docs/sandbox-network.md).

The wire's `network: {egress, allow, forwardHostPorts}` becomes a frozen `NetworkRules` through
`NetworkRules.parse`; every caller mistake (an unknown egress, a port out of range, a malformed entry)
raises `invalid_action` naming the field as the caller sent it (`network.allow[2]`), so it reaches them as
a 4xx that points into their own request, never a 5xx. Host names stay names here: they are resolved when
the rules are applied (`resolve`), because that is when they must reach something, and again on every
`update`.

Accepted allowlist entries, IPv4 only (a desktop has no IPv6):

    10.1.2.3            an address, any port and protocol
    10.1.0.0/16         a CIDR block, any port and protocol
    example.com         every IPv4 address the name resolves to, any port and protocol
    10.1.2.3:443        one TCP or UDP port of an address (also `10.1.0.0/16:443`, `example.com:443`)
    example.com:8000-8100   a port range, inclusive
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from ipaddress import IPv4Network

from desktop.core.errors import invalid_action
from desktop.core.parsing import ascii_int

MAX_ALLOW = 256
"""Entries in one allowlist: each is a set element or two; a longer list is almost surely a mistake."""
MAX_FORWARDS = 64
"""Host ports forwarded into one desktop: each is a listening socket and a task in the server."""
RESOLVE_TIMEOUT_S = 5.0
"""How long one host name of an allowlist may take to resolve before the rules are refused."""

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


class EgressMode(StrEnum):
    """What a desktop may reach beyond itself."""

    ALL = "all"
    """The outside world, but never the host, its loopback or another desktop (the default)."""
    NONE = "none"
    """Nothing: only the desktop's own loopback (and its forwarded host ports)."""
    ALLOWLIST = "allowlist"
    """Only the listed destinations, plus DNS to the desktop's resolvers."""


@dataclass(frozen=True)
class AllowRule:
    """One allowlist entry: a network or a host name, with a port range or any port."""

    text: str
    """The entry as given, trimmed and lower-cased (what `to_wire` returns)."""
    network: IPv4Network | None
    """The address or block, for entries that name one; None for a host name."""
    host: str | None
    """The host name, resolved when the rules are applied; None for an address."""
    ports: tuple[int, int] | None
    """An inclusive TCP/UDP port range; None: any port and any protocol (ICMP too)."""


@dataclass(frozen=True)
class Destinations:
    """An allowlist resolved to addresses: what the desktop's nftables sets hold."""

    any_port: tuple[IPv4Network, ...] = ()
    ports: tuple[tuple[IPv4Network, int, int], ...] = ()


@dataclass(frozen=True)
class NetworkRules:
    """A desktop's network rules (docs/sandbox-network.md). `NetworkRules()` is the default: egress `all`."""

    egress: EgressMode = EgressMode.ALL
    allow: tuple[AllowRule, ...] = ()
    forward_host_ports: tuple[int, ...] = ()

    @classmethod
    def parse(cls, egress: object = None, allow: object = None, forward_host_ports: object = None, *,
              field: str = "network") -> NetworkRules:
        """Check and parse the wire's values; `field` prefixes the names in errors (`network.allow[0]`)."""
        mode = _egress(egress, f"{field}.egress")
        entries = _list(allow, f"{field}.allow", MAX_ALLOW)
        if entries and mode is not EgressMode.ALLOWLIST:
            raise invalid_action(f"{field}.allow applies only with egress {EgressMode.ALLOWLIST.value!r}, "
                                 f"not {mode.value!r}", f"{field}.allow")
        rules = tuple(_allow_rule(entry, f"{field}.allow[{i}]") for i, entry in enumerate(entries))
        ports: list[int] = []
        for i, value in enumerate(_list(forward_host_ports, f"{field}.forwardHostPorts", MAX_FORWARDS)):
            name = f"{field}.forwardHostPorts[{i}]"
            port = _port(value, name)
            if port in ports:
                raise invalid_action(f"{name}: port {port} is listed twice", name)
            ports.append(port)
        return cls(mode, rules, tuple(ports))

    def to_wire(self) -> dict[str, object]:
        """The rules in the wire's shape, as a caller would send them back."""
        return {"egress": self.egress.value, "allow": [rule.text for rule in self.allow],
                "forwardHostPorts": list(self.forward_host_ports)}


def _egress(value: object, field: str) -> EgressMode:
    if value is None:
        return EgressMode.ALL
    if isinstance(value, str) and value in EgressMode.__members__.values():
        return EgressMode(value)
    accepted = ", ".join(mode.value for mode in EgressMode)
    raise invalid_action(f"{field} must be one of {accepted}; got {value!r}", field)


def _list(value: object, field: str, limit: int) -> Sequence[object]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise invalid_action(f"{field} must be a list, got {type(value).__name__}", field)
    if len(value) > limit:
        raise invalid_action(f"{field} has {len(value)} entries; at most {limit} are accepted", field)
    return value


def _port(value: object, field: str) -> int:
    if isinstance(value, str) and (number := ascii_int(value)) is not None:
        value = number
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_action(f"{field} must be a port number, got {value!r}", field)
    if not 1 <= value <= 65535:
        raise invalid_action(f"{field}: port {value} is out of range (1 <= port <= 65535)", field)
    return value


def _allow_rule(entry: object, field: str) -> AllowRule:
    if not isinstance(entry, str):
        raise invalid_action(f"{field} must be a string such as \"example.com:443\", got {entry!r}", field)
    text = entry.strip().lower()
    if not text:
        raise invalid_action(f"{field} is empty", field)
    if text.startswith("[") or text.count(":") > 1:
        raise invalid_action(f"{field}: {entry!r} is an IPv6 address; desktops have IPv4 only", field)
    target, _, port_text = text.partition(":")
    ports = _port_range(port_text, field, entry) if port_text or text.endswith(":") else None
    try:
        return AllowRule(text, ipaddress.IPv4Network(target, strict=False), None, ports)
    except ValueError:
        pass
    if "/" in target or not _is_host_name(target):
        raise invalid_action(f"{field}: {target!r} is neither an IPv4 address, a CIDR block nor a host name "
                             "(accepted: \"10.0.0.5\", \"10.0.0.0/8\", \"example.com\", each with an optional "
                             "\":443\" or \":8000-8100\")", field)
    return AllowRule(text, None, target, ports)


def _port_range(text: str, field: str, entry: str) -> tuple[int, int]:
    low_text, dash, high_text = text.partition("-")
    low_number, high_number = ascii_int(low_text), ascii_int(high_text) if dash else None
    if low_number is None or (dash and high_number is None):
        raise invalid_action(f"{field}: {entry!r} must end in a port (\":443\") or a range (\":8000-8100\")", field)
    low = _port(low_number, field)
    high = _port(high_number, field) if high_number is not None else low
    if high < low:
        raise invalid_action(f"{field}: the port range {low}-{high} is empty", field)
    return low, high


def _is_host_name(text: str) -> bool:
    labels = text.removesuffix(".").split(".")
    # All-numeric labels are a mistyped address ("300.1.1.1"), not a name anyone registers.
    return (len(text) <= 253 and all(_LABEL.fullmatch(label) for label in labels)
            and not all(label.isdigit() for label in labels))


async def resolve(rules: NetworkRules, field: str = "network",
                  timeout: float = RESOLVE_TIMEOUT_S) -> Destinations:
    """The allowlist's destinations as addresses; each host name resolved now, concurrently (A records).

    A name that does not resolve is the caller's mistake (`invalid_action` naming its entry): the rules
    would otherwise allow less than they say without anyone noticing."""
    loop = asyncio.get_running_loop()
    hosts = sorted({rule.host for rule in rules.allow if rule.host})

    async def lookup(host: str) -> list[IPv4Network]:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, None, family=socket.AF_INET,
                                                        type=socket.SOCK_STREAM), timeout)
        return sorted({IPv4Network(info[4][0]) for info in infos})

    results = await asyncio.gather(*(lookup(host) for host in hosts), return_exceptions=True)
    found: dict[str, list[IPv4Network]] = {}
    for host, result in zip(hosts, results, strict=True):
        if isinstance(result, BaseException):
            index = next(i for i, rule in enumerate(rules.allow) if rule.host == host)
            name = f"{field}.allow[{index}]"
            reason = "timed out" if isinstance(result, TimeoutError) else str(result)
            raise invalid_action(f"{name}: the host {host!r} does not resolve to an IPv4 address ({reason})", name)
        found[host] = result
    any_port: list[IPv4Network] = []
    ports: list[tuple[IPv4Network, int, int]] = []
    for rule in rules.allow:
        for network in ([rule.network] if rule.network else found[rule.host or ""]):
            if rule.ports is None:
                any_port.append(network)
            else:
                ports.append((network, *rule.ports))
    return Destinations(tuple(dict.fromkeys(any_port)), tuple(dict.fromkeys(ports)))
