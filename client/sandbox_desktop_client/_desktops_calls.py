"""The server's own calls about its desktops and approvals, as `Call`s (_base.py has the desktop's actions):
create, list, get, update and delete desktops, their lifecycle, tokens and network; approvals
(docs/desktops.md, docs/approvals.md). `AsyncClient`, `AsyncDesktops` and `AsyncDesktopClient` send them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from sandbox_desktop_wire.approvals import Approval, ApprovalListResponse, ApprovalStatus, Decision
from sandbox_desktop_wire.desktops import DesktopListResponse, DesktopResource, TokenResponse
from sandbox_desktop_wire.sandbox import NetworkResponse

from ._base import Call, as_json, model, nothing, path_id, wire
from ._types import CreateOptions, DesktopChanges


def approvals(status: ApprovalStatus | None, desktop_id: str | None) -> Call[list[Approval]]:
    params = {k: v for k, v in (("status", status), ("desktopId", desktop_id)) if v is not None}
    return Call("GET", "/v1/approvals", lambda r: ApprovalListResponse.model_validate(r.json()).approvals,
                params=params)


def approval(approval_id: str) -> Call[Approval]:
    return Call("GET", f"/v1/approvals/{path_id(approval_id)}", model(Approval))


def decide(approval_id: str, decision: Decision, message: str | None, by: str | None) -> Call[Approval]:
    return Call("POST", f"/v1/approvals/{path_id(approval_id)}", model(Approval),
                json=wire(decision=decision, message=message, by=by))


def create_desktop(**options: Unpack[CreateOptions]) -> Call[DesktopResource]:
    tags, network, limits = options.pop("tags", None), options.pop("network", None), options.pop("limits", None)
    return Call("POST", "/v1/desktops", model(DesktopResource), extra_timeout=30,
                json=wire(**options, tags=dict(tags) if tags else None, network=as_json(network),
                          limits=as_json(limits)))


def update_desktop(desktop_id: str, **changes: Unpack[DesktopChanges]) -> Call[DesktopResource]:
    tags, network, limits = changes.pop("tags", None), changes.pop("network", None), changes.pop("limits", None)
    body = wire(**changes, tags=dict(tags) if tags is not None else None, network=as_json(network),
                limits=as_json(limits))
    return Call("PATCH", f"/v1/desktops/{path_id(desktop_id)}", model(DesktopResource), json=body)


def desktop_network(desktop_id: str, limit: int | None) -> Call[NetworkResponse]:
    return Call("GET", f"/v1/desktops/{path_id(desktop_id)}/network", model(NetworkResponse),
                params=wire(limit=limit))


def list_desktops(tags: Mapping[str, str] | None) -> Call[list[DesktopResource]]:
    params = {"tag": [f"{k}={v}" for k, v in (tags or {}).items()]} if tags else {}
    return Call("GET", "/v1/desktops", lambda r: DesktopListResponse.model_validate(r.json()).desktops,
                params=params)


def get_desktop(desktop_id: str) -> Call[DesktopResource]:
    return Call("GET", f"/v1/desktops/{path_id(desktop_id)}", model(DesktopResource))


def delete_desktop(desktop_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/desktops/{path_id(desktop_id)}", nothing, extra_timeout=30)


def desktop_lifecycle(desktop_id: str, action: str, params: dict[str, Any] | None = None) -> Call[DesktopResource]:
    """`pause`, `resume`, `reset` or `connect` (which waits up to 30 s for a pause in progress)."""
    return Call("POST", f"/v1/desktops/{path_id(desktop_id)}/{action}", model(DesktopResource),
                params=params or {}, extra_timeout=30)


def desktop_token(desktop_id: str, role: str, ttl_seconds: int | None) -> Call[TokenResponse]:
    return Call("POST", f"/v1/desktops/{path_id(desktop_id)}/tokens", model(TokenResponse),
                json=wire(role=role, ttl_seconds=ttl_seconds))
