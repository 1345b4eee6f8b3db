"""Where WebRTC host candidates bind: a UDP port range and a set of addresses (aioice has no option).

aioice binds every host candidate to port 0 on every non-loopback interface (aiortc issue #487).
`install()` replaces `aioice.ice.Connection.get_component_candidates` with a version that, while a
`HostPolicy` is set with `host_policy(...)`, binds each address to the first free port of the range
(as aioice PR #112 proposes), may add 127.0.0.1, and may also advertise each socket at a public address
of the same family (1:1 NAT, neko's `nat1to1`); without a policy aioice behaves as shipped.
The replacement touches aioice internals, so it is applied only to the version it was written for.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import ipaddress
import itertools
import logging
import socket
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import aioice
from aioice import ice, turn
from aioice.candidate import Candidate, candidate_foundation, candidate_priority

logger = logging.getLogger("sandbox_desktop.stream.ports")

PINNED_AIOICE = "0.13.0"
LOOPBACK = "127.0.0.1"
PUBLIC_LOCAL_PREF = 65534  # public copies: just below the 65535 of the direct host candidates

GatherFn = Callable[..., Coroutine[Any, Any, list[Candidate]]]


class PortRangeExhausted(OSError):
    """Every port of the range is taken on every address: no host candidate could be bound."""


@dataclass(frozen=True)
class HostPolicy:
    """Which local addresses host candidates use and which UDP ports they may bind."""

    ports: tuple[int, int] | None = None
    """Inclusive port range; None: any ephemeral port."""
    addresses: tuple[str, ...] | None = None
    """Exactly these addresses; None: every interface address aioice finds."""
    loopback: bool = False
    """Also bind 127.0.0.1 (aioice leaves it out): same-host viewers and loopback-only namespaces."""
    public_addresses: tuple[str, ...] = ()
    """Where a 1:1 NAT forwards our ports to us: each non-loopback socket is also offered there, same port."""

    def __post_init__(self) -> None:
        for address in self.public_addresses:
            ipaddress.ip_address(address)  # ValueError names the bad value
        if self.ports is not None:
            low, high = self.ports
            if not 1 <= low <= high <= 65535:
                raise ValueError(f"port range must satisfy 1 <= low <= high <= 65535, got {low}-{high}")

    def select(self, interface_addresses: list[str]) -> list[str]:
        """The addresses to bind, given the ones aioice found."""
        chosen = list(self.addresses) if self.addresses is not None else list(interface_addresses)
        if self.loopback and LOOPBACK not in chosen:
            chosen.insert(0, LOOPBACK)
        return chosen

    def public_candidates(self, local: Candidate) -> list[Candidate]:
        """`local` as viewers behind the NAT see it: each public address of its family, on its port."""
        bound = ipaddress.ip_address(local.host)
        if bound.is_loopback:  # forwarded packets never arrive on the loopback interface
            return []
        # Below the direct address, so a viewer that reaches both (in the cluster, on the LAN) uses it; a
        # foundation of its own, so agents that freeze pairs by foundation do not wait on an unreachable twin.
        priority = candidate_priority(local.component, "host", local_pref=PUBLIC_LOCAL_PREF)
        return [Candidate(foundation=candidate_foundation("host", "udp", f"{local.host} at {public}"),
                          component=local.component, transport="udp", priority=priority, host=public,
                          port=local.port, type="host")
                for public in self.public_addresses if ipaddress.ip_address(public).version == bound.version]


_policy: contextvars.ContextVar[HostPolicy | None] = contextvars.ContextVar("sandbox_desktop_host_policy",
                                                                            default=None)
_original: GatherFn | None = None
_next_offset = itertools.count()


@contextlib.contextmanager
def host_policy(policy: HostPolicy) -> Iterator[None]:
    """Apply `policy` to the ICE gathering started inside this block (and tasks it spawns)."""
    if not installed():
        install()
    token = _policy.set(policy)
    try:
        yield
    finally:
        _policy.reset(token)


def installed() -> bool:
    return _original is not None


def install() -> None:
    """Replace aioice's host-candidate gathering; refuses other aioice versions (pin it, then re-test)."""
    global _original
    if _original is not None:
        return
    if aioice.__version__ != PINNED_AIOICE or not hasattr(ice.Connection, "get_component_candidates"):
        raise RuntimeError(f"streaming/ports.py was written for aioice {PINNED_AIOICE}, found "
                           f"{aioice.__version__}: check Connection.get_component_candidates and update it")
    _original = ice.Connection.get_component_candidates
    ice.Connection.get_component_candidates = _get_component_candidates  # type: ignore[method-assign]


def uninstall() -> None:
    """Put aioice back as shipped (tests)."""
    global _original
    if _original is not None:
        ice.Connection.get_component_candidates = _original  # type: ignore[method-assign]
        _original = None


async def _get_component_candidates(self: ice.Connection, component: int, addresses: list[str],
                                    timeout: int = 5) -> list[Candidate]:
    assert _original is not None
    policy = _policy.get()
    # A relay-only connection gathers no host candidate (aioice passes no address): the policy has none to add.
    if policy is None or self._transport_policy is ice.TransportPolicy.RELAY:
        return await _original(self, component, addresses, timeout)
    protocols = []
    for address in policy.select(addresses):
        protocol = await _bind(self, component, address, policy.ports)
        if protocol is not None:
            protocols.append(protocol)
    if not protocols and policy.ports is not None:
        low, high = policy.ports
        raise PortRangeExhausted(f"no free UDP port in {low}-{high} on any of "
                                 f"{', '.join(policy.select(addresses))}")
    self._protocols += protocols
    candidates: list[Candidate] = [p.local_candidate for p in protocols if p.local_candidate is not None]
    # Advertised only: aioice pairs its sockets' own candidates, and packets sent to a public address
    # arrive at the socket whose port it names (the NAT forwards the port to the socket's address).
    candidates += [public for local in list(candidates) for public in policy.public_candidates(local)]
    # Server-reflexive candidates for our sockets (as aioice does), then TURN relays by aioice itself.
    stun_server = self.stun_server
    if stun_server is not None:
        lookups = [asyncio.wait_for(ice.server_reflexive_candidate(p, stun_server), timeout) for p in protocols
                   if p.local_candidate and ipaddress.ip_address(p.local_candidate.host).version == 4]
        for result in await asyncio.gather(*lookups, return_exceptions=True):
            if isinstance(result, tuple):
                candidates.append(result[0])
    return candidates + await _original(self, component, [], timeout)


async def _bind(connection: ice.Connection, component: int, address: str,
                ports: tuple[int, int] | None) -> ice.StunProtocol | None:
    """A StunProtocol on `address`, on the first free port of the range (scanned from a rotating start)."""
    loop = asyncio.get_running_loop()
    if ports is None:
        choices: list[int] = [0]
    else:
        low, high = ports
        span = high - low + 1
        start = next(_next_offset) % span
        choices = [low + (start + i) % span for i in range(span)]
    for port in choices:
        try:
            transport, protocol = await loop.create_datagram_endpoint(
                lambda: ice.StunProtocol(connection), local_addr=(address, port))
        except OSError as exc:  # a port taken (or privileged) is skipped; any other failure skips the address
            if ports is None or exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                logger.info("cannot bind %s: %s", address, exc)
                return None
            continue
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, turn.UDP_SOCKET_BUFFER_SIZE)
        host, bound_port = transport.get_extra_info("sockname")[:2]
        protocol.local_candidate = Candidate(
            foundation=candidate_foundation("host", "udp", host), component=component, transport="udp",
            priority=candidate_priority(component, "host"), host=host, port=bound_port, type="host")
        return protocol
    logger.warning("no free UDP port in %s on %s", f"{min(choices)}-{max(choices)}", address)
    return None
