"""The approval gate: which operations propose agent actions, what they propose, and holding them (docs/approvals.md).

`guard_for(operation)` gives api/http/operations.py the hook it runs between parsing a request and calling its
handler, for the operations in the tables below (the same for `/v1/desktop/...` and `/v1/desktops/{id}/...`):
no route module knows about approvals. A guard reads the desktop's policy (its `approve`, else the server's
`--approve`), turns the parsed body into the steps it would run (points in screen pixels, after the request's
coordinate scaling, as the handler maps them), and when a step is of a held kind, waits for a person's decision
(desktop/control/approvals.py) for as long as the request's `Prefer: wait=N`, else `--approval-timeout`. Approved, the
handler runs as it would have; denied or expired, the request answers 403 and nothing ran.

MCP tool calls, served in-process (api/mcp/http.py) or by `sandbox-desktop mcp`, reach the desktop through these
same HTTP operations, so they are held here too; the live view's input is a person's own and is never held.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from api.approvals.proposals import KEY, POINTER, TYPE, pointer, steps_of, summary, target_text, typed
from api.convert.actions import plan_batch
from api.convert.elements import target_of
from api.convert.open_models import model_plan
from api.convert.vendors import anthropic_plan, gemini_plan, openai_plan
from api.http.desktop_paths import desktop_path
from api.http.operations import Guard, Operation
from api.server.desktop_services import DesktopServices
from api.server.services import desktop_services, server_of
from desktop.actions.batch import ElementAt
from desktop.control.approvals import Venue
from desktop.events.action_log import action_source, action_wait
from desktop.vendors.gemini import Browser
from desktop.x11.session import Session
from sandbox_desktop_wire.accessibility import ActRequest, ElementAction
from sandbox_desktop_wire.actions import ActionsRequest
from sandbox_desktop_wire.approvals import ActionKind, ProposedAction, ProposedStep, Screen
from sandbox_desktop_wire.apps import LaunchRequest, OpenRequest
from sandbox_desktop_wire.enums import ActionSource
from sandbox_desktop_wire.files_into_apps import DropRequest, FileDialogRequest
from sandbox_desktop_wire.keyboard import KeyboardKeyRequest, KeyboardPressRequest, KeyboardTypeRequest
from sandbox_desktop_wire.mouse import (
    MouseButtonRequest,
    MouseClickRequest,
    MouseDragRequest,
    MouseMoveRequest,
    MouseScrollRequest,
)
from sandbox_desktop_wire.open_models import ModelActRequest
from sandbox_desktop_wire.processes import ProcessCreateRequest, ProcessRunRequest
from sandbox_desktop_wire.vendors import AnthropicRequest, GeminiRequest, OpenAIRequest


@dataclass(frozen=True)
class Proposal:
    """A request's parsed body with what describing it needs."""

    body: Any
    services: DesktopServices

    def session(self) -> Session:
        """The desktop's session: 409 when it is not running, as the handler would answer."""
        return self.services.desktop.session()


Describe = Callable[[Proposal], Awaitable[list[ProposedStep]]]


@dataclass(frozen=True)
class Gate:
    describe: Describe
    source: ActionSource | None = None
    """The action log's source the handler acts as (`acting_as`); None: the request's (rest, mcp)."""
    confirms: Callable[[list[ProposedStep]], bool] | None = None
    """Whether the request itself asks for a person (Gemini's `require_confirmation`): held under any policy that
    holds something, whatever its steps' kinds."""


# -- mouse and keyboard (screen pixels) ------------------------------------------------------------------

async def mouse_move(p: Proposal) -> list[ProposedStep]:
    body: MouseMoveRequest = p.body
    return [ProposedStep(kind=POINTER, type="move", x=body.x, y=body.y)]


async def mouse_click(p: Proposal) -> list[ProposedStep]:
    body: MouseClickRequest = p.body
    return [ProposedStep(kind=POINTER, type="click", x=body.x, y=body.y, button=body.button.value,
                         count=body.click_count)]


def mouse_button(type_: str) -> Describe:
    async def describe(p: Proposal) -> list[ProposedStep]:
        body: MouseButtonRequest = p.body
        return [ProposedStep(kind=POINTER, type=type_, x=body.x, y=body.y, button=body.button.value)]
    return describe


async def mouse_drag(p: Proposal) -> list[ProposedStep]:
    body: MouseDragRequest = p.body
    return [ProposedStep(kind=POINTER, type="drag", x=body.start_x, y=body.start_y, end_x=body.end_x,
                         end_y=body.end_y, button=body.button.value)]


async def mouse_scroll(p: Proposal) -> list[ProposedStep]:
    body: MouseScrollRequest = p.body
    return [ProposedStep(kind=POINTER, type="scroll", x=body.x, y=body.y, delta_x=body.delta_x,
                         delta_y=body.delta_y)]


async def key_type(p: Proposal) -> list[ProposedStep]:
    body: KeyboardTypeRequest = p.body
    return [typed(body.text)]


async def key_press(p: Proposal) -> list[ProposedStep]:
    body: KeyboardPressRequest = p.body
    mods = body.modifiers
    held = [name for name in ("ctrl", "shift", "alt", "cmd") if mods is not None and getattr(mods, name)]
    keys = body.key if not held else " ".join("+".join([*held, chord]) for chord in body.key.split())
    return [ProposedStep(kind=KEY, type="key", keys=keys)]


def key_hold(type_: str) -> Describe:
    async def describe(p: Proposal) -> list[ProposedStep]:
        body: KeyboardKeyRequest = p.body
        return [ProposedStep(kind=KEY, type=type_, keys=body.key)]
    return describe


# -- batches and the vendors' computer-use tools (planned as the handlers plan them) -------------------------

async def batch(p: Proposal) -> list[ProposedStep]:
    """Planned as `run_actions` plans it (api/routes/actions.py): the same steps, the same 400s."""
    body: ActionsRequest = p.body
    session = p.session()
    accessibility = p.services.desktop.accessibility
    return await steps_of((await plan_batch(body, session, accessibility)).steps, session, accessibility)


async def anthropic_computer(p: Proposal) -> list[ProposedStep]:
    body: AnthropicRequest = p.body
    session = p.session()
    # Every call of a turn's `tool_uses`, as one proposal: the handler runs them all once approved.
    planned = [step for plan in anthropic_plan(body, session).plans
               for step in ([plan.press, *plan.steps] if plan.press is not None else plan.steps)]
    return await steps_of(planned, session, p.services.desktop.accessibility)


async def openai_computer(p: Proposal) -> list[ProposedStep]:
    body: OpenAIRequest = p.body
    session = p.session()
    plan = openai_plan(body, session)[0]  # the handler's 400s too, before asking anyone
    return await steps_of(plan.steps, session, p.services.desktop.accessibility)


CONFIRMATION = "safety-confirmation"
"""The step that carries a Gemini call's `require_confirmation` explanation into the approval."""


async def gemini_computer(p: Proposal) -> list[ProposedStep]:
    body: GeminiRequest = p.body
    session = p.session()
    plan = gemini_plan(body, session)  # the handler's 400s and 422s too, before asking anyone
    proposed = await steps_of(plan.steps, session, p.services.desktop.accessibility)
    if plan.browser is not None:
        proposed.append(browser_step(plan.browser))
    if plan.confirm is not None:
        proposed.append(ProposedStep(type=CONFIRMATION, command=plan.confirm))
    return proposed


def browser_step(browser: Browser) -> ProposedStep:
    """What a browser move amounts to: opening a URL is a launch; back and forward are keys."""
    if browser.kind in ("navigate", "open"):
        return ProposedStep(kind=ActionKind.LAUNCH, type="open", command=browser.url or "the web browser")
    return ProposedStep(kind=KEY, type="key", keys="alt+Left" if browser.kind == "back" else "alt+Right")


async def model_act(p: Proposal) -> list[ProposedStep]:
    body: ModelActRequest = p.body
    session = p.session()
    plan = model_plan(body, session)[0]  # the handler's 400s and 422s too, before asking anyone
    proposed = await steps_of(plan.steps, session, p.services.desktop.accessibility)
    return proposed + ([browser_step(plan.browser)] if plan.browser is not None else [])


def gemini_confirms(proposed: list[ProposedStep]) -> bool:
    return any(s.type == CONFIRMATION for s in proposed)


# -- elements, apps, processes ------------------------------------------------------------------------------

_ELEMENT_KINDS = {ElementAction.CLICK: POINTER, ElementAction.INVOKE: POINTER, ElementAction.SELECT: POINTER,
                  ElementAction.SET_VALUE: TYPE}
"""What acting on an element amounts to; `focus` is no kind (it moves the keyboard focus only)."""


async def element_act(p: Proposal) -> list[ProposedStep]:
    body: ActRequest = p.body
    target = target_of(body.element)
    kind = _ELEMENT_KINDS.get(body.action)
    if kind is POINTER:
        return [await pointer(body.action.value, ElementAt(target), p.session(), p.services.desktop.accessibility)]
    if kind is TYPE:
        step = typed(body.value or "", TYPE, body.action.value)
        return [step.model_copy(update={"element": target_text(target)})]
    return [ProposedStep(type=body.action.value, element=target_text(target))]


async def launch(p: Proposal) -> list[ProposedStep]:
    body: LaunchRequest = p.body
    return [ProposedStep(kind=ActionKind.LAUNCH, type="launch", command=body.app, args=body.args)]


async def open_target(p: Proposal) -> list[ProposedStep]:
    body: OpenRequest = p.body
    return [ProposedStep(kind=ActionKind.LAUNCH, type="open", command=body.target)]


async def drop(p: Proposal) -> list[ProposedStep]:
    body: DropRequest = p.body
    return [ProposedStep(kind=POINTER, type="drop", x=body.x, y=body.y, args=body.paths)]


async def file_dialog(p: Proposal) -> list[ProposedStep]:
    body: FileDialogRequest = p.body
    return [ProposedStep(kind=POINTER, type="file-dialog", command=body.path)]


def process(type_: str) -> Describe:
    async def describe(p: Proposal) -> list[ProposedStep]:
        body: ProcessCreateRequest | ProcessRunRequest = p.body
        return [ProposedStep(kind=ActionKind.PROCESS, type=type_, command=body.command, args=body.args or [],
                             cwd=body.cwd)]
    return describe


DESKTOP_GATES: dict[tuple[str, str], Gate] = {
    ("POST", "/mouse/move"): Gate(mouse_move),
    ("POST", "/mouse/click"): Gate(mouse_click),
    ("POST", "/mouse/down"): Gate(mouse_button("down")),
    ("POST", "/mouse/up"): Gate(mouse_button("up")),
    ("POST", "/mouse/drag"): Gate(mouse_drag),
    ("POST", "/mouse/scroll"): Gate(mouse_scroll),
    ("POST", "/keyboard/type"): Gate(key_type),
    ("POST", "/keyboard/press"): Gate(key_press),
    ("POST", "/keyboard/down"): Gate(key_hold("key_down")),
    ("POST", "/keyboard/up"): Gate(key_hold("key_up")),
    ("POST", "/actions"): Gate(batch, ActionSource.BATCH),
    ("POST", "/anthropic/computer"): Gate(anthropic_computer, ActionSource.ANTHROPIC),
    ("POST", "/openai/computer"): Gate(openai_computer, ActionSource.OPENAI),
    ("POST", "/gemini/computer"): Gate(gemini_computer, ActionSource.GEMINI, gemini_confirms),
    ("POST", "/models/act"): Gate(model_act, ActionSource.OPEN_MODEL),
    ("POST", "/accessibility/act"): Gate(element_act),
    ("POST", "/launch"): Gate(launch),
    ("POST", "/open"): Gate(open_target),
    ("POST", "/drop"): Gate(drop),
    ("POST", "/file-dialog"): Gate(file_dialog),
    ("POST", "/processes"): Gate(process("start")),
    ("POST", "/processes/run"): Gate(process("run")),
}
"""Per-desktop operations by (method, path below `/v1/desktop` or `/v1/desktops/{id}`)."""
SERVER_GATES: dict[tuple[str, str], Gate] = {
    ("POST", "/v1/processes"): Gate(process("start")),
    ("POST", "/v1/processes/run"): Gate(process("run")),
}
"""Server-wide operations: processes run with the default desktop's environment, under its policy."""


def gate_of(operation: Operation) -> tuple[Gate, bool] | None:
    """The operation's gate and whether it is about one desktop (else the default desktop's policy applies)."""
    about = desktop_path(operation.path)
    if about is not None:
        found = DESKTOP_GATES.get((operation.method, about[1]))
        return (found, True) if found is not None else None
    found = SERVER_GATES.get((operation.method, operation.path))
    return (found, False) if found is not None else None


def guard_for(operation: Operation) -> Guard | None:
    """The hook api/http/operations.py runs before this operation's handler, or None for an operation never held."""
    found = gate_of(operation)
    if found is None:
        return None
    gate, per_desktop = found

    async def guard(request: Request, kwargs: dict[str, Any]) -> None:
        server = server_of(request)
        services = desktop_services(request) if per_desktop else server.desktops.default
        policy = services.lifecycle.approve
        held = server.config.approve if policy is None else policy
        if not held:
            return
        proposed = await gate.describe(Proposal(kwargs.get("body"), services))
        kinds = sorted({s.kind for s in proposed if s.kind is not None and s.kind in held})
        if not kinds and gate.confirms is not None and gate.confirms(proposed):
            # Asked for by the request: its own kinds, or (a wait) the policy's.
            kinds = sorted({s.kind for s in proposed if s.kind is not None}) or sorted(held)
        if not kinds:
            return
        desktop = services.desktop
        # Where x and y lie, for a view to draw them (a stopped desktop answered its 409 in describing already).
        session = desktop.session() if per_desktop else None
        action = ProposedAction(operation=f"{request.method} {request.url.path}", kinds=kinds, steps=proposed,
                                summary=summary(proposed, frozenset(kinds)),
                                screen=Screen(width=session.width, height=session.height) if session else None)
        wait = action_wait.get()
        timeout = server.config.approval_timeout if wait is None else wait
        venue = Venue(services.id, desktop.events.bus, desktop.action_log)
        await server.approvals.hold(venue, action, gate.source or action_source.get(), timeout)

    return guard


def guarded(operations: Iterable[Operation]) -> list[Operation]:
    """The operations, each an approval policy may hold with its guard set and its 403 (`action_denied`,
    `approval_expired`) documented."""
    return [op if (guard := guard_for(op)) is None else
            dataclasses.replace(op, guard=guard, errors=tuple(sorted({*op.errors, 403}))) for op in operations]
