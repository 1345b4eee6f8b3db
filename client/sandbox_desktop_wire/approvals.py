"""Wire models of approvals (`/v1/approvals`, docs/approvals.md): agent actions held until a person decides."""

from __future__ import annotations

import enum

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.enums import ActionSource

DEFAULT_APPROVAL_TIMEOUT_S = 300.0
"""How long a held action waits for a decision unless the server (`--approval-timeout`) or the request (`Prefer:
wait=N`) says otherwise."""
MAX_MESSAGE_CHARS = 2000
MAX_DECIDER_CHARS = 100
MAX_SHOWN_TEXT_CHARS = 4000
"""Text an approval shows of what would be typed; `textLength` tells the whole length."""


class ActionKind(enum.StrEnum):
    """The kinds of agent actions a policy (`--approve`, a desktop's `approve`) can hold for a person."""

    POINTER = "pointer"
    """Clicks, moves, button presses, drags and scrolls; an element's click, invoke or select."""
    TYPE = "type"
    """Typing text; an element's setValue."""
    KEY = "key"
    """Key presses, chords and held keys."""
    LAUNCH = "launch"
    """Launching an app, opening a file or URL."""
    PROCESS = "process"
    """Running or starting a process (`/v1/processes`)."""


ALL_KINDS = "all"
"""The policy that holds every kind."""


def parse_kinds(text: str) -> frozenset[ActionKind]:
    """`launch,process,type` or `all` as the kinds it names; ValueError naming the first unknown name."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    if ALL_KINDS in names:
        return frozenset(ActionKind)
    kinds = set()
    for name in names:
        try:
            kinds.add(ActionKind(name))
        except ValueError:
            raise ValueError(f"unknown action kind {name!r}: choose from {', '.join(ActionKind)} or all") from None
    return frozenset(kinds)


class ApprovalStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    """Nobody decided within the timeout (or the agent's request ended first): the action did not run."""


class Decision(enum.StrEnum):
    APPROVE = "approve"
    DENY = "deny"


class Screen(WireModel):
    width: int
    height: int


class ProposedStep(WireModel):
    """One action the agent asked for, as it would run: points in screen pixels (after any scaling)."""

    kind: ActionKind | None = Field(default=None, description="Its kind; none for steps no policy holds "
                                    "(screenshot, wait, zoom, cursor_position)")
    type: str = Field(description="What it does: click, move, down, up, drag, scroll, type, key, hold_key, launch, "
                      "open, run, start, focus, wait, screenshot, ...")
    x: int | None = Field(default=None, description="Screen pixel where it lands (a click, a press, a scroll)")
    y: int | None = None
    end_x: int | None = Field(default=None, description="A drag: where it ends")
    end_y: int | None = None
    button: str | None = None
    count: int | None = None
    delta_x: int | None = None
    delta_y: int | None = None
    text: str | None = Field(default=None, description=f"What would be typed (the first {MAX_SHOWN_TEXT_CHARS} "
                             "characters)")
    text_length: int | None = Field(default=None, description="The whole text's length in characters")
    keys: str | None = Field(default=None, description="Keys pressed, `ctrl+s Return`; or held during a click")
    element: str | None = Field(default=None, description="The element it is aimed at, as the agent named it")
    command: str | None = Field(default=None, description="The program (launch, run, start), the target (open) or "
                                "the path chosen (file-dialog)")
    args: list[str] | None = Field(default=None, description="The program's arguments; the files dropped (drop)")
    cwd: str | None = None


class ProposedAction(WireModel):
    """What an approval holds: one request of the agent, with each of its steps."""

    operation: str = Field(description="`POST /v1/desktop/mouse/click`: the request held")
    kinds: list[ActionKind] = Field(description="The kinds of its steps the policy holds")
    steps: list[ProposedStep]
    summary: str = Field(description="One line for a person: `click left at 120,300`, `type \"hello\"`")
    screen: Screen | None = Field(default=None, description="The desktop's screen size, to place x and y on a view")


class Approval(WireModel):
    id: str
    status: ApprovalStatus
    action: ProposedAction
    source: ActionSource = Field(description="Who asked, as the action log names it")
    desktop_id: str
    created_at: str
    expires_at: str = Field(description="When it expires if nobody decides")
    decided_at: str | None = None
    decided_by: str | None = Field(default=None, description="Who decided: the `by` of the decision (default "
                                   "`admin`, the server token); none when it expired")
    message: str | None = Field(default=None, description="The person's message to the agent")


class ApprovalListQuery(QueryModel):
    status: ApprovalStatus | None = Field(default=None, description="Only approvals in this state")
    desktop_id: str | None = Field(default=None, description="Only this desktop's")


class ApprovalListResponse(WireModel):
    approvals: list[Approval] = Field(description="Pending ones first (oldest first), then decided ones, most "
                                      "recently decided first")


class DecisionRequest(WireModel):
    decision: Decision
    message: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS, description="Told to the agent: with a "
                                "denial, the 403's `message` (why, what to do instead)")
    by: str | None = Field(default=None, min_length=1, max_length=MAX_DECIDER_CHARS,
                           description="Who decides, for the record and the action log (default `admin`)")
