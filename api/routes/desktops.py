"""`/v1/desktops`: many desktops in one server, each with a lifecycle (docs/desktops.md).

Every `/v1/desktop/<path>` operation is also served as `/v1/desktops/{desktop_id}/<path>` from the
same table (`per_desktop` below, used by api/app.py): one route table, not two.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from api.convert.desktop import resolution, sandbox_model, start_options
from api.convert.sandbox import SandboxSettings, limits_model, network_model, rules_model, usage_model
from api.http.desktop_paths import MANY_PREFIX
from api.http.operations import Operation
from api.server.desktop_services import DesktopServices, Lifecycle
from api.server.registry import Ended
from api.server.scoped_tokens import DEFAULT_TTL_S
from api.server.services import desktop_services, server_of
from desktop.core.errors import DesktopBusy, StreamError, invalid_action
from desktop.lifecycle.policy import Timer
from desktop.lifecycle.runtime import Desktop
from desktop.lifecycle.vm_image import VmImage
from sandbox_desktop_wire.approvals import ActionKind, parse_kinds
from sandbox_desktop_wire.desktop import DesktopStartRequest
from sandbox_desktop_wire.desktops import (
    DesktopCreateRequest,
    DesktopListResponse,
    DesktopPatchRequest,
    DesktopResource,
    NetworkQuery,
    OsworldGuest,
    PauseQuery,
    TokenRequest,
    TokenResponse,
)
from sandbox_desktop_wire.enums import OnIdle, TokenRole
from sandbox_desktop_wire.limits import MAX_TAG_LENGTH, MAX_TAGS
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.sandbox import NetworkResponse

TAGS = ("desktops",)
CONNECT_TIMEOUT_S = 30.0
"""How long a connect waits for a pause in progress to end."""
INVALID = ProblemCode.DESKTOP_INVALID_ACTION


def iso(epoch: float | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat() if epoch is not None else None


def resource(services: DesktopServices) -> DesktopResource:
    desktop, life = services.desktop, services.lifecycle
    options = desktop.options
    return DesktopResource(
        id=services.id, state=desktop.current_state(),
        display=desktop.display_name,
        resolution=resolution(options) if options is not None and desktop.display_name else None,
        tags=life.tags, created_at=iso(life.created_at) or "", expires_at=iso(life.expires_at),
        last_activity_at=iso(life.last_activity_at) or "", idle_timeout_seconds=life.idle_timeout_seconds,
        on_idle=life.on_idle.value if life.idle_timeout_seconds is not None else None,
        paused_reason=desktop.paused_reason, approve=kind_names(life.approve),
        sandbox=sandbox_model(desktop.sandbox_report()),
        network=rules_model(desktop.network_rules), limits=limits_model(desktop.limits),
        usage=usage_model(usage) if (usage := desktop.usage()) is not None else None,
        auto_pause_seconds=life.auto_pause_seconds, auto_delete_seconds=life.auto_delete_seconds,
        auto_pause_at=iso(max(desktop.active_since, life.created_at) + life.auto_pause_seconds)
        if life.auto_pause_seconds is not None and not desktop.paused and desktop.display_name else None,
        auto_delete_at=iso(desktop.paused_at + life.auto_delete_seconds)
        if life.auto_delete_seconds is not None and desktop.paused_at is not None else None,
        osworld=osworld_model(services),
    )


def osworld_model(services: DesktopServices) -> OsworldGuest | None:
    guest = services.osworld
    if guest.url is None or guest.port is None:
        return None
    return OsworldGuest(url=guest.url, port=guest.port, token_required=guest.require_token,
                        cdp_port=guest.cdp.outer_port, vlc_port=guest.vlc.outer_port,
                        home_user=services.desktop.sees_home_alias())


async def serve_osworld(services: DesktopServices, on: bool | None, token: bool | None) -> None:
    """Start or stop the desktop's guest API (None: leave it), wanting a token or not (None: as it was); a port
    that cannot be had is the machine's trouble, a 503."""
    if token is not None:
        services.osworld.require_token = token  # before a start: no request slips in without one
    if on is None:
        return
    if not on:
        await services.osworld.stop()
        return
    try:
        await services.osworld.start()
    except OSError as exc:
        raise StreamError(f"cannot listen for the OSWorld guest API on {services.osworld.host}: {exc}") from exc


def kind_names(kinds: frozenset[ActionKind] | None) -> list[str] | None:
    return None if kinds is None else [kind.value for kind in ActionKind if kind in kinds]


def approve_policy(names: list[str] | None) -> frozenset[ActionKind] | None:
    """A desktop's own `approve` (None: the server's applies); an unknown kind is a 400 naming it."""
    if names is None:
        return None
    kinds: set[ActionKind] = set()
    for i, name in enumerate(names):
        try:
            found = parse_kinds(name) if name.strip() and "," not in name else frozenset()
        except ValueError:
            found = frozenset()
        if not found:
            raise invalid_action(f"approve[{i}] must be one of {', '.join(ActionKind)} or all, got {name[:40]!r}",
                                 f"approve[{i}]")
        kinds |= found
    return frozenset(kinds)


def ended_resource(ended: Ended) -> DesktopResource:
    life = ended.lifecycle
    return DesktopResource(id=ended.id, state="deleted", tags=life.tags, created_at=iso(life.created_at) or "",
                           expires_at=iso(life.expires_at), last_activity_at=iso(life.last_activity_at) or "",
                           idle_timeout_seconds=life.idle_timeout_seconds, ended_reason=ended.reason)


def check_tags(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > MAX_TAGS:
        raise invalid_action(f"at most {MAX_TAGS} tags", "tags")
    for key, value in tags.items():
        if not key or len(key) > MAX_TAG_LENGTH or len(value) > MAX_TAG_LENGTH or "=" in key:
            raise invalid_action(f"tag keys must be 1-{MAX_TAG_LENGTH} characters without '=', values at most "
                                 f"{MAX_TAG_LENGTH}; got {key[:40]!r}", f"tags.{key[:40]}")
    return tags


def tag_filter(request: Request) -> dict[str, str]:
    """`?tag=key=value`, repeatable: every one must match."""
    wanted: dict[str, str] = {}
    for item in request.query_params.getlist("tag"):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise invalid_action(f"tag filters are key=value, got {item!r}", "tag")
        wanted[key] = value
    return wanted


async def create_desktop(request: Request, body: DesktopCreateRequest) -> Response:
    on_idle = OnIdle.DELETE
    if body.on_idle is not None:
        try:
            on_idle = OnIdle(body.on_idle)
        except ValueError:
            raise invalid_action("onIdle must be `delete` or `pause`", "onIdle") from None
    policy = server_of(request).config.desktop_policy
    lifecycle = Lifecycle(tags=check_tags(policy.tags_of(body.tags or {})), on_idle=on_idle,
                          home_template=home_template(body.home_template), approve=approve_policy(body.approve),
                          ttl_seconds=policy.timer(Timer.TTL, body.ttl_seconds),
                          idle_timeout_seconds=policy.timer(Timer.IDLE_TIMEOUT, body.idle_timeout_seconds),
                          auto_pause_seconds=policy.timer(Timer.AUTO_PAUSE, body.auto_pause_seconds),
                          auto_delete_seconds=policy.timer(Timer.AUTO_DELETE, body.auto_delete_seconds))
    sandbox = SandboxSettings.parse(body.network, body.limits).within(policy, creating=True)
    start = body.model_dump(exclude=set(DesktopCreateRequest.model_fields) - set(DesktopStartRequest.model_fields))
    requested = {name for name, value in start.items() if value is not None}
    options = start_options(DesktopStartRequest(**start))
    registry = server_of(request).desktops
    image = VmImage(python=server_of(request).config.osworld_python) if body.osworld else None

    async def prepare(desktop: Desktop) -> None:
        desktop.vm_image = image  # dressed as OSWorld's VM from its first start (docs/osworld.md)
        await sandbox.apply(desktop)

    services = await registry.create(options, requested, lifecycle, prepare)
    try:
        await serve_osworld(services, body.osworld, body.osworld_token)
    except BaseException:
        await registry.delete(services.id)  # a desktop asked for with its guest API is not half made
        raise
    return Response(resource(services).to_json(), status_code=201, media_type="application/json",
                    headers={"Location": f"/v1/desktops/{services.id}"})


def home_template(text: str | None) -> Path | None:
    if text is None:
        return None
    path = Path(text)
    if not path.is_absolute() or "\x00" in text:
        raise invalid_action(f"homeTemplate must be an absolute directory, got {text!r}", "homeTemplate")
    if not path.is_dir():
        raise invalid_action(f"homeTemplate {text!r} is not a directory", "homeTemplate")
    return path


async def list_desktops(request: Request) -> DesktopListResponse:
    registry = server_of(request).desktops
    return DesktopListResponse(desktops=[resource(s) for s in registry.list(tag_filter(request))])


async def get_desktop(request: Request) -> DesktopResource:
    registry = server_of(request).desktops
    ended = registry.ended(request.path_params["desktop_id"])
    if ended is not None:
        return ended_resource(ended)
    return resource(registry.get(request.path_params["desktop_id"]))


async def delete_desktop(request: Request) -> None:
    await server_of(request).desktops.delete(request.path_params["desktop_id"])


async def issue_token(request: Request, body: TokenRequest) -> Response:
    try:
        role = TokenRole(body.role)
    except ValueError:
        raise invalid_action("role must be `view` or `control`", "role") from None
    services = desktop_services(request)
    server = server_of(request)
    token, scoped = server.tokens.issue(services.id, role, body.ttl_seconds or DEFAULT_TTL_S)
    answer = TokenResponse(token=token, role=role.value, desktop_id=services.id,
                           expires_at=iso(scoped.expires_at) or "",
                           inspector_url=f"{server.config.url}/ui/#token={token}&desktop={services.id}")
    return Response(answer.to_json(), status_code=201, media_type="application/json")


async def pause_desktop(request: Request, *, query: PauseQuery) -> Response:
    """Freeze it; with `wait=false` answer 202 at once, while its processes are being frozen."""
    services = desktop_services(request)
    if query.wait:
        await services.desktop.pause("paused by request")
        return Response(resource(services).to_json(), media_type="application/json")
    services.desktop.require_active()
    pausing = asyncio.get_running_loop().create_task(services.desktop.pause("paused by request"))
    _background.add(pausing)
    pausing.add_done_callback(_background.discard)
    await asyncio.sleep(0)  # the pause marks the desktop paused before it answers
    return Response(resource(services).to_json(), status_code=202, media_type="application/json")


_background: set[asyncio.Task[None]] = set()
"""Pauses asked with `wait=false`, kept referenced until they end."""


async def connect_desktop(request: Request) -> DesktopResource:
    """What an agent calls at the start of its turn: the desktop running, resumed if paused (after a pause still
    in progress), its auto-pause clock started again."""
    services = desktop_services(request)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await services.desktop.resume()
    except TimeoutError:
        raise DesktopBusy(f"the desktop did not finish pausing within {CONNECT_TIMEOUT_S:.0f} s; retry",
                          retry_after=1) from None
    services.desktop.require_active()
    return resource(services)


async def patch_desktop(request: Request, body: DesktopPatchRequest) -> DesktopResource:
    """Change what may change while it lives: tags, timers, network rules, limits (each checked before any is
    applied; a refused one changes nothing)."""
    services = desktop_services(request)
    life, policy = services.lifecycle, server_of(request).config.desktop_policy
    tags = check_tags(policy.tags_of(body.tags)) if body.tags is not None else None
    timers = {timer.attribute: policy.timer(timer, getattr(body, timer.attribute))
              for timer in Timer if timer.attribute in body.model_fields_set}
    settings = SandboxSettings.parse(body.network, body.limits).within(policy, creating=False)
    await settings.apply(services.desktop)
    await serve_osworld(services, body.osworld, body.osworld_token)
    if body.osworld is not None:  # dressed as the VM image (or not) from its next start (a reset keeps its sandbox)
        services.desktop.vm_image = VmImage(python=server_of(request).config.osworld_python) if body.osworld else None
    if tags is not None:
        life.tags = tags
    for name, value in timers.items():
        setattr(life, name, value)
    return resource(services)


async def desktop_network(request: Request, *, query: NetworkQuery) -> NetworkResponse:
    return network_model(desktop_services(request).desktop, query.limit)


async def reset_desktop(request: Request) -> DesktopResource:
    services = desktop_services(request)
    await services.desktop.reset()
    return resource(services)


async def resume_desktop(request: Request) -> DesktopResource:
    services = desktop_services(request)
    await services.desktop.resume()
    return resource(services)


ONE = MANY_PREFIX.removesuffix("/")
OPERATIONS = [
    Operation("POST", "/v1/desktops", create_desktop, "Create and start a desktop of its own (201)",
              body=DesktopCreateRequest, response=DesktopResource, status=201, invalid_code=INVALID,
              errors=(400, 429, 503), tags=TAGS),
    Operation("GET", "/v1/desktops", list_desktops, "The server's desktops, `?tag=key=value` (repeatable) to filter",
              response=DesktopListResponse, errors=(400,), tags=TAGS),
    Operation("GET", ONE, get_desktop, "One desktop (a deleted one answers with state `deleted` and why)",
              response=DesktopResource, errors=(404,), tags=TAGS),
    Operation("DELETE", ONE, delete_desktop, "Delete a desktop: stop everything it ran, finalise its recording",
              status=204, errors=(404, 409), tags=TAGS),
    Operation("POST", ONE + "/tokens", issue_token, "A token for this desktop only, `view` or `control` (201)",
              body=TokenRequest, response=TokenResponse, status=201, invalid_code=INVALID, body_required=True,
              errors=(400, 404), tags=TAGS),
    Operation("POST", ONE + "/pause", pause_desktop, "Freeze every process of the desktop; it keeps its windows "
              "(`wait=false`: 202 at once)", query=PauseQuery, response=DesktopResource, errors=(404, 409), tags=TAGS),
    Operation("POST", ONE + "/connect", connect_desktop, "Resume the desktop if it is paused, then answer (an "
              "agent's turn begins)", response=DesktopResource, errors=(404, 409, 503), tags=TAGS),
    Operation("PATCH", ONE, patch_desktop, "Change its tags, timers, network rules, limits or "
              "OSWorld guest API",
              body=DesktopPatchRequest, response=DesktopResource, invalid_code=INVALID, body_required=True,
              errors=(400, 404), tags=TAGS),
    Operation("GET", ONE + "/network", desktop_network, "Its network rules and its newest connections",
              query=NetworkQuery, response=NetworkResponse, errors=(404,), tags=TAGS),
    Operation("POST", ONE + "/resume", resume_desktop, "Thaw a paused desktop",
              response=DesktopResource, errors=(404, 409), tags=TAGS),
    Operation("POST", ONE + "/reset", reset_desktop,
              "Back to a freshly started state (apps gone, clipboard empty, HOME from its template); same id and "
              "display", response=DesktopResource, errors=(404, 409, 503), tags=TAGS),
]


