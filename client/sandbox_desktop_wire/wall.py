"""Wire models of the wall (`/v1/wall/ws`): every desktop a token may see, as tiles (docs/inspector.md, "Wall")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.approvals import Approval
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.enums import DesktopRuntimeState

WALL_SOCKET_PATH = "/v1/wall/ws"


class WallTile(WireModel):
    """One desktop as the wall shows it."""

    id: str
    state: DesktopRuntimeState
    tags: dict[str, str] = Field(default_factory=dict)
    width: int | None = Field(default=None, description="The screen's size while it runs")
    height: int | None = None
    approvals: list[Approval] = Field(default_factory=list, description="Its agent actions waiting for a person")


class WallDesktops(WireModel):
    """The wall's text message: sent when the socket opens and whenever a tile changes (a desktop came or went,
    its state, tags or pending approvals)."""

    type: Literal["wall/desktops"] = "wall/desktops"
    desktops: list[WallTile]
    can_decide: bool = Field(description="Whether this token may approve and deny (the server token only)")
    scope: str | None = Field(default=None, description="The one desktop a scoped token sees")
