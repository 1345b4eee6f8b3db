"""What a server imposes on every desktop created on it, whoever asks (`sandbox-desktop server --desktop-policy
FILE`; docs/desktops.md "What the server imposes").

An application that hands a model the tools to create desktops (MCP's `create_desktop`, the HTTP API with
the server's token) need not trust the model to label them, bound their lives or fence their network: the
server adds its tags, caps each timer (and sets it where the request left it out, so every desktop ends),
gives every desktop its network rules and caps each limit. A request that asks for more is refused with a
403 `policy_refused` naming the field, rather than quietly given less: the caller learns what the server
allows. A PATCH is held to the same policy, and so is the default desktop's sandbox (its network rules and
limits; it has no timers and is never deleted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from desktop.core.errors import DomainError, field_errors, invalid_action
from desktop.sandbox.limits import WIRE as LIMIT_WIRE
from desktop.sandbox.limits import Limits
from desktop.sandbox.netrules import NetworkRules
from sandbox_desktop_wire.problems import ProblemCode


class Timer(StrEnum):
    """A desktop's timers, by their wire names (each capped by the policy's `max<Name>`)."""

    TTL = "ttlSeconds"
    IDLE_TIMEOUT = "idleTimeoutSeconds"
    AUTO_PAUSE = "autoPauseSeconds"
    AUTO_DELETE = "autoDeleteSeconds"

    @property
    def cap_key(self) -> str:
        """The policy file's key capping it: `maxTtlSeconds`..."""
        return "max" + self.value[0].upper() + self.value[1:]

    @property
    def attribute(self) -> str:
        """Its name on the registry's `Lifecycle` and the wire models: `ttl_seconds`..."""
        return "".join("_" + c.lower() if c.isupper() else c for c in self.value)


class PolicyRefused(DomainError):
    """A desktop's setting beyond what the server imposes on every desktop; `errors` names the field."""

    code = ProblemCode.POLICY_REFUSED


def refused(field_name: str, why: str) -> PolicyRefused:
    message = f"{field_name}: {why} (this server's desktop policy, docs/desktops.md)"
    return PolicyRefused(message, errors=field_errors(field_name, message))


@dataclass(frozen=True)
class DesktopPolicy:
    """`DesktopPolicy()` imposes nothing."""

    tags: Mapping[str, str] = field(default_factory=dict)
    """Added to every desktop's tags; a request may not give one of these keys another value."""
    caps: Mapping[Timer, int] = field(default_factory=dict)
    """The longest each timer may be; a desktop created without it gets the cap."""
    network: NetworkRules | None = None
    """Every desktop's network rules; a request may leave them out or repeat them, not change them."""
    limits: Limits = field(default_factory=Limits)
    """The most of each resource a desktop may have; one asked without a limit gets the cap."""

    @property
    def imposes(self) -> bool:
        return bool(self.tags or self.caps or self.network is not None or self.limits != Limits())

    def tags_of(self, asked: Mapping[str, str]) -> dict[str, str]:
        """The request's tags with the policy's added."""
        for key, value in self.tags.items():
            if key in asked and asked[key] != value:
                raise refused(f"tags.{key}", f"this server sets {key}={value!r} on every desktop")
        return {**asked, **self.tags}

    def timer(self, timer: Timer, asked: int | None) -> int | None:
        """A timer as the desktop gets it: as asked, within its cap; the cap where none was asked."""
        cap = self.caps.get(timer)
        if cap is None:
            return asked
        if asked is None:
            return cap
        if asked > cap:
            raise refused(timer.value, f"at most {cap} seconds here, not {asked}")
        return asked

    def network_of(self, asked: NetworkRules | None) -> NetworkRules | None:
        """The rules a desktop gets (None: as it has them, or the default)."""
        if self.network is None or asked is None or asked == self.network:
            return self.network if self.network is not None else asked
        raise refused("network", f"this server gives every desktop the rules {self.network.to_wire()}")

    def limits_of(self, asked: Limits | None) -> Limits | None:
        """The limits a desktop gets: each as asked within its cap, the cap where none was asked."""
        if self.limits == Limits():
            return asked
        given = asked or Limits()
        chosen: dict[str, Any] = {}
        for item in fields(Limits):
            cap, value = getattr(self.limits, item.name), getattr(given, item.name)
            if cap is not None and value is not None and value > cap:
                raise refused(f"limits.{LIMIT_WIRE[item.name]}", f"at most {cap} here, not {value}")
            chosen[item.name] = value if value is not None else cap
        return replace(given, **chosen)

    @classmethod
    def parse(cls, data: object) -> DesktopPolicy:
        """The policy file's JSON object. Every mistake names its key: an unknown key (a typo in a security
        policy must not pass unnoticed), a wrong type, a value out of range."""
        if not isinstance(data, dict):
            raise invalid_action("a desktop policy is a JSON object", "policy")
        known = {"tags", "network", "limits", *(timer.cap_key for timer in Timer)}
        for key in data:
            if key not in known:
                raise invalid_action(f"unknown key {key!r}; known: {', '.join(sorted(known))}", str(key))
        tags = data.get("tags") or {}
        if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
            raise invalid_action("tags is an object of strings", "tags")
        caps: dict[Timer, int] = {}
        for timer in Timer:
            cap = data.get(timer.cap_key)
            if cap is not None:
                if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                    raise invalid_action(f"{timer.cap_key} is a number of seconds of at least 1", timer.cap_key)
                caps[timer] = cap
        network = data.get("network")
        if network is not None and not isinstance(network, dict):
            raise invalid_action("network is an object of network rules", "network")
        rules = None if network is None else NetworkRules.parse(
            network.get("egress"), network.get("allow"), network.get("forwardHostPorts"))
        limits = data.get("limits")
        if limits is not None and not isinstance(limits, dict):
            raise invalid_action("limits is an object of limits", "limits")
        return cls(dict(tags), caps, rules, Limits.parse(limits))

    @classmethod
    def load(cls, path: Path) -> DesktopPolicy:
        """The policy in a JSON file; OSError or ValueError (with the key) for one that cannot be used."""
        try:
            return cls.parse(json.loads(path.read_text()))
        except DomainError as error:
            raise ValueError(f"{path}: {error}") from error
