"""Wire models of a desktop's sandbox settings: its network rules, its limits and usage, and its lifecycle timers
(docs/security.md, docs/sandbox-network.md, docs/sandbox-limits.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel


class NetworkRulesModel(WireModel):
    """What a desktop may reach. Plain types: the server checks each value and names the field it refuses."""

    egress: str | None = Field(default=None, description="`all` (default: the outside, never the host's loopback, "
                               "the server or another desktop), `none`, or `allowlist`")
    allow: list[str] | None = Field(default=None, max_length=256, description="With `allowlist`: `host`, `ip` or "
                                    "`cidr`, each optionally `:port` or `:lo-hi` (TCP and UDP)")
    forward_host_ports: list[int] | None = Field(default=None, max_length=64, description="Ports of the host's "
                                                 "loopback reachable as the same port on the desktop's own")


class LimitsModel(WireModel):
    """What the desktop's apps and commands may use; what exceeds a limit is killed (memory) or refused (pids)
    while the desktop and the server stay up."""

    memory_mb: int | None = Field(default=None, description="Memory of its apps and commands, in MiB (at least 64)")
    pids: int | None = Field(default=None, description="Processes and threads of its apps and commands (at least 16)")
    cpu: float | None = Field(default=None, description="CPU of the whole desktop, in cores (e.g. 0.5)")


class UsageModel(WireModel):
    """What the desktop uses now, from its cgroup (null where this machine cannot measure it)."""

    memory_bytes: int | None = None
    cpu_seconds: float | None = None
    pids: int | None = None
    oom_kills: int | None = Field(default=None, description="Processes killed for going over the memory limit")


class ConnectionRecordModel(WireModel):
    at: str = Field(description="RFC 3339 UTC")
    verdict: str = Field(description="`allowed`, `refused` or `forwarded`")
    protocol: str
    address: str
    port: int | None = None


class NetworkResponse(WireModel):
    """`GET /v1/desktops/{id}/network`: its rules as applied, and its newest new connections, oldest first."""

    rules: NetworkRulesModel
    available: bool = Field(description="The server's network hub runs; without it the desktop's namespace has "
                            "only its loopback, whatever the rules")
    address: str | None = Field(default=None, description="The desktop's address on its link to the host")
    log: list[ConnectionRecordModel] = Field(default_factory=list)

