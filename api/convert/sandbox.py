"""A desktop's sandbox settings between the wire and the domain: network rules, limits, usage, and the log of
its connections (docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from desktop.lifecycle.policy import DesktopPolicy
from desktop.lifecycle.runtime import Desktop
from desktop.sandbox.limits import Limits, Usage
from desktop.sandbox.netrules import NetworkRules
from desktop.sandbox.network import ConnectionRecord
from sandbox_desktop_wire.sandbox import (
    ConnectionRecordModel,
    LimitsModel,
    NetworkResponse,
    NetworkRulesModel,
    UsageModel,
)


@dataclass(frozen=True)
class SandboxSettings:
    """What a create or a PATCH asks of a desktop's sandbox; None: not asked (a new desktop gets the defaults:
    egress `all`, no limits)."""

    network: NetworkRules | None = None
    limits: Limits | None = None

    @classmethod
    def parse(cls, network: NetworkRulesModel | None, limits: LimitsModel | None) -> SandboxSettings:
        """Each wrong value a 400 naming its field (`network.allow[2]`, `limits.memoryMb`)."""
        rules = None
        if network is not None:
            rules = NetworkRules.parse(network.egress, network.allow, network.forward_host_ports)
        return cls(rules, Limits.parse(limits.model_dump(by_alias=True)) if limits is not None else None)

    def within(self, policy: DesktopPolicy, *, creating: bool) -> SandboxSettings:
        """The settings the server's policy gives (a new desktop gets its rules and caps where it asked for
        none; a PATCH that leaves a setting out leaves it as it is); 403 `policy_refused` for more than it
        allows."""
        if not creating and self.network is None and self.limits is None:
            return self
        network = policy.network_of(self.network) if creating or self.network is not None else None
        limits = policy.limits_of(self.limits) if creating or self.limits is not None else None
        return SandboxSettings(network, limits)

    async def apply(self, desktop: Desktop) -> None:
        """In force on the desktop from now on: at its next start, and at once while it runs. All or nothing: a
        limit the kernel refuses (memory below what the apps hold, on cgroup v1) leaves the rules unchanged, and
        rules the network refuses put the limits back. The limits go first since putting them back is a few
        writes that cannot fail for a caller's mistake, where the old rules would have to be resolved again."""
        running = desktop.sandbox
        if self.limits is not None and running is not None:
            running.set_limits(self.limits)
        if self.network is not None:
            if running is not None:
                try:
                    await running.set_network(self.network)  # a refused update keeps the old rules
                except BaseException:
                    if self.limits is not None:
                        running.set_limits(desktop.limits)
                    raise
            desktop.network_rules = self.network
        if self.limits is not None:
            desktop.limits = self.limits


def rules_model(rules: NetworkRules) -> NetworkRulesModel:
    return NetworkRulesModel.model_validate(rules.to_wire())


def limits_model(limits: Limits) -> LimitsModel:
    return LimitsModel.model_validate(limits.wire())


def usage_model(usage: Usage) -> UsageModel:
    return UsageModel.model_validate(usage.wire())


def record_model(record: ConnectionRecord) -> ConnectionRecordModel:
    return ConnectionRecordModel(at=datetime.fromtimestamp(record.at, UTC).isoformat(), verdict=str(record.verdict),
                                 protocol=record.protocol, address=record.address, port=record.port)


def network_model(desktop: Desktop, limit: int) -> NetworkResponse:
    network = desktop.sandbox.network if desktop.sandbox is not None else None
    return NetworkResponse(rules=rules_model(desktop.network_rules), available=network is not None,
                           address=network.address if network is not None else None,
                           log=[record_model(r) for r in network.log(limit)] if network is not None else [])
