"""Wire models of the desktops resource (`/v1/desktops`): many desktops, each with a lifecycle."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.desktop import DesktopResolution, DesktopStartRequest, SandboxInfo
from sandbox_desktop_wire.enums import DesktopRuntimeState
from sandbox_desktop_wire.limits import MAX_TAG_LENGTH, MAX_TAGS, MAX_TTL_SECONDS
from sandbox_desktop_wire.sandbox import LimitsModel, NetworkRulesModel, UsageModel


class DesktopCreateRequest(DesktopStartRequest):
    """The start request's fields, plus what the desktop's lifecycle needs."""

    tags: dict[str, str] | None = Field(default=None, description=f"Labels to find it by (`?tag=key=value`); at most "
                                        f"{MAX_TAGS}, keys and values up to {MAX_TAG_LENGTH} characters")
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS,
                                    description="Delete the desktop this long after its creation")
    idle_timeout_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS,
                                             description="Delete (or pause, with onIdle) the desktop after this "
                                                         "long without a request to it")
    # A plain string, checked against OnIdle by the server: a wrong name is a 400 naming the field.
    on_idle: str | None = Field(default=None, description="`delete` (default) or `pause`")
    home_template: str | None = Field(default=None,
                                      description="Absolute directory copied into the desktop's HOME when "
                                                        "it is created and whenever it is reset")
    # Plain strings, checked against ActionKind by the server: a wrong name is a 400 naming the field.
    approve: list[str] | None = Field(default=None, max_length=8, description="Kinds of agent actions held until a "
                                      "person approves them (`pointer`, `type`, `key`, `launch`, `process`, or `all`; "
                                      "[] for none); default: the server's `--approve` (docs/approvals.md)")
    network: NetworkRulesModel | None = Field(default=None, description="What its network reaches (docs/security.md)")
    limits: LimitsModel | None = Field(default=None, description="What its apps and commands may use")
    auto_pause_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, description="Pause after this "
                                           "much active time, counted from creation or the last resume")
    auto_delete_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, description="Delete this long "
                                            "after it pauses")
    osworld: bool | None = Field(default=None, description="Serve the OSWorld guest API for this desktop on a port "
                                 "of its own, without auth (docs/osworld.md)")
    osworld_token: bool | None = Field(default=None, description="Its guest API wants `Authorization: Bearer` with "
                                       "the server's token or a control token of the desktop (default false)")


class PauseQuery(QueryModel):
    wait: bool = Field(default=True, description="Answer once every process is frozen (false: 202 at once)")


class NetworkQuery(QueryModel):
    limit: int = Field(default=200, ge=1, le=1000, description="The newest connections to show, at most")


class DesktopPatchRequest(WireModel):
    """`PATCH /v1/desktops/{id}`: what may change while it lives; a field left out stays as it is."""

    tags: dict[str, str] | None = Field(default=None, description="Its tags, replaced whole")
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, description="From its creation")
    idle_timeout_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    auto_pause_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    auto_delete_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    network: NetworkRulesModel | None = Field(default=None, description="New rules, in force at once")
    limits: LimitsModel | None = Field(default=None, description="New limits, in force at once")
    osworld: bool | None = Field(default=None, description="Serve (true) or stop serving (false) the OSWorld guest "
                                 "API (docs/osworld.md)")
    osworld_token: bool | None = Field(default=None, description="Whether its guest API wants a token")


class OsworldGuest(WireModel):
    """Where a desktop's OSWorld guest API answers (docs/osworld.md)."""

    url: str = Field(description="Its base URL: what OSWorld's harness calls `http://{vm_ip}:{server_port}`")
    port: int
    token_required: bool = Field(default=False, description="Whether a request needs `Authorization: Bearer` with "
                                 "the server's token or a control token of the desktop")
    cdp_port: int | None = Field(default=None, description="Chrome's DevTools inside the desktop (its port 9222, "
                                 "where tasks put socat before Chrome's 1337), on the server's address: what the "
                                 "harness calls `chromium_port`")
    vlc_port: int | None = Field(default=None, description="VLC's HTTP interface inside the desktop (its port "
                                 "8080), on the server's address")
    home_user: bool = Field(default=False, description="Whether the desktop sees its HOME at `/home/user` too (a "
                            "desktop created with `osworld`, with a mount namespace of its own)")


class DesktopResource(WireModel):
    """One desktop and its lifecycle."""

    id: str
    state: DesktopRuntimeState | Literal["deleted"] = Field(description="The desktop's state (as in "
                                                                        "/v1/desktop/status, `paused` included), "
                                                                        "or `deleted`")
    display: str | None = None
    resolution: DesktopResolution | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    created_at: str
    expires_at: str | None = None
    last_activity_at: str
    idle_timeout_seconds: int | None = None
    on_idle: str | None = None
    paused_reason: str | None = Field(default=None, description="Why it is paused, when it is")
    ended_reason: str | None = Field(default=None, description="Why it was deleted (`deleted`, `ttl_expired: ...`, "
                                                       "`idle_timeout: ...`), once it is")
    approve: list[str] | None = Field(default=None, description="Its own approval policy, as created: the kinds of "
                                      "agent actions held for a person; absent: the server's `--approve` applies")
    sandbox: SandboxInfo | None = Field(default=None, description="What keeps it apart (docs/security.md): as it is "
                                        "while it runs, as it will be otherwise")
    network: NetworkRulesModel | None = None
    limits: LimitsModel | None = None
    usage: UsageModel | None = Field(default=None, description="What it uses now, while it runs in a cgroup")
    auto_pause_seconds: int | None = None
    auto_delete_seconds: int | None = None
    auto_pause_at: str | None = Field(default=None, description="When it pauses by itself, while it runs")
    auto_delete_at: str | None = Field(default=None, description="When it is deleted by itself, while it is paused")
    osworld: OsworldGuest | None = Field(default=None, description="Its OSWorld guest API, while it is served")


class DesktopListResponse(WireModel):
    desktops: list[DesktopResource]


class TokenRequest(WireModel):
    # A plain string, checked against TokenRole by the server: a wrong name is a 400 naming the field.
    role: str = Field(description="`view` (status, screenshots, windows, the live view without input) or "
                                  "`control` (everything on this desktop)")
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, description="Lifetime (default 3600)")


class TokenResponse(WireModel):
    token: str = Field(description="Send as `Authorization: Bearer ...`, or `?access_token=` on the live view")
    role: str
    desktop_id: str
    expires_at: str
    inspector_url: str = Field(description="The inspector on this desktop with this token: a share link")
