"""The book of approvals: agent actions held until a person approves or denies them (docs/approvals.md).

An agent's call that a policy holds waits in `hold` on a future of its own: no polling, no timer but
the one that ends it at its timeout, so a pending approval costs no CPU. `decide` (a person, through
`POST /v1/approvals/{id}`) resolves that future, and the waiting call resumes in the same turn of the
event loop. Every change of state goes through `_settle`, which logs it, publishes it on the desktop's
event bus and wakes the waiting call. Nothing here knows HTTP: the API layer (api/approvals/gate.py)
says what an action is and which kinds are held.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from desktop.core.errors import DomainError
from desktop.events import action_log as logged
from desktop.events.action_log import ActionLog, acting_as
from desktop.events.bus import EventBus
from desktop.events.event_types import ApprovalDecided, ApprovalRequested
from sandbox_desktop_wire.approvals import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    Approval,
    ApprovalStatus,
    Decision,
    ProposedAction,
)
from sandbox_desktop_wire.enums import ActionSource
from sandbox_desktop_wire.problems import ProblemCode

logger = logging.getLogger("sandbox_desktop.approvals")

DEFAULT_TIMEOUT_S = DEFAULT_APPROVAL_TIMEOUT_S
HISTORY = 1000
"""Decided approvals kept for `GET /v1/approvals`; the oldest decided go first (pending ones always stay)."""
ADMIN = "admin"
"""Who decided when the decision names nobody: the holder of the server token."""


class ActionDenied(DomainError):
    """A person denied the action; `message` (a member of the problem, and in its detail) is theirs, for the
    agent to plan around."""

    code = ProblemCode.ACTION_DENIED

    def __init__(self, detail: str, *, said: str | None, **facts: Any) -> None:
        super().__init__(detail, **facts)
        if said is not None:
            self.extensions["message"] = said


class ApprovalExpired(DomainError):
    code = ProblemCode.APPROVAL_EXPIRED


class ApprovalNotFound(DomainError):
    code = ProblemCode.APPROVAL_NOT_FOUND


class ApprovalAlreadyDecided(DomainError):
    code = ProblemCode.APPROVAL_ALREADY_DECIDED


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Venue:
    """Where a held action would run: its desktop's id, event bus and action log."""

    desktop_id: str
    bus: EventBus
    log: ActionLog


@dataclass(frozen=True)
class Record:
    id: str
    venue: Venue
    action: ProposedAction
    source: ActionSource
    created_at: float
    expires_at: float
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_at: float | None = None
    decided_by: str | None = None
    message: str | None = None

    def to_wire(self) -> Approval:
        return Approval(id=self.id, status=self.status, action=self.action, source=self.source,
                        desktop_id=self.venue.desktop_id, created_at=iso(self.created_at),
                        expires_at=iso(self.expires_at),
                        decided_at=iso(self.decided_at) if self.decided_at is not None else None,
                        decided_by=self.decided_by, message=self.message)


class ApprovalBook:
    """Every approval of the server, pending and recently decided, by id (one book for all desktops)."""

    def __init__(self, history: int = HISTORY) -> None:
        self._history = history
        self._records: OrderedDict[str, Record] = OrderedDict()
        """Pending ones in creation order; a decided one moves to the end when decided."""
        self._waiting: dict[str, asyncio.Future[Record]] = {}
        """The waiting call of each pending approval; it gets the decided record (which history may drop)."""

    # -- reading ------------------------------------------------------------------------------------

    def get(self, approval_id: str) -> Record:
        record = self._records.get(approval_id)
        if record is None:
            raise ApprovalNotFound(f"no approval with id {approval_id!r}; GET /v1/approvals lists them "
                                   f"(the last {self._history} decided ones are kept)", approvalId=approval_id)
        return record

    def list(self, status: ApprovalStatus | None = None, desktop_id: str | None = None) -> list[Record]:
        """Pending approvals oldest first, then decided ones, the most recently decided first."""
        records = [r for r in self._records.values() if (status is None or r.status is status)
                   and (desktop_id is None or r.venue.desktop_id == desktop_id)]
        pending = [r for r in records if r.status is ApprovalStatus.PENDING]
        decided = [r for r in reversed(records) if r.status is not ApprovalStatus.PENDING]
        return pending + decided

    @property
    def pending_count(self) -> int:
        return len(self._waiting)

    # -- the agent's side ---------------------------------------------------------------------------

    async def hold(self, venue: Venue, action: ProposedAction, source: ActionSource,
                   timeout_s: float) -> Record:
        """Wait until a person decides on `action` (at most `timeout_s`): the approved record, or ActionDenied /
        ApprovalExpired. A call cancelled while waiting (its client left) leaves the approval expired."""
        now = time.time()
        record = Record(f"apr_{secrets.token_hex(8)}", venue, action, source, now, now + timeout_s)
        decided: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        self._records[record.id] = record
        self._waiting[record.id] = decided
        logger.info("approval %s requested on desktop %s: %s (%s)", record.id, venue.desktop_id, action.summary,
                    source, extra={"desktop": venue.desktop_id, "approval": record.id})
        venue.bus.publish(ApprovalRequested(record.to_wire()))
        try:
            async with asyncio.timeout(timeout_s):
                final = await decided
        except TimeoutError:
            # Decided in the same turn as the timeout: the decision stands.
            final = (self._settle(record.id, ApprovalStatus.EXPIRED, f"nobody decided within {timeout_s:g} s", None)
                     if record.id in self._waiting else decided.result())
        except asyncio.CancelledError:
            if record.id in self._waiting:  # the request ended (its client left, the server stops)
                self._settle(record.id, ApprovalStatus.EXPIRED, "the request ended before a decision", None)
            raise
        with acting_as(source):  # the agent's action, whoever decided on it
            venue.log.record(logged.Approval(final.id, final.status, final.decided_by, action.operation, final.message))
        match final.status:
            case ApprovalStatus.APPROVED:
                return final
            case ApprovalStatus.DENIED:
                said = f": {final.message}" if final.message else " (no message)"
                raise ActionDenied(f"{final.decided_by} denied {action.summary}{said}", said=final.message,
                                   approvalId=final.id, decidedBy=final.decided_by)
            case _:
                raise ApprovalExpired(f"{action.summary} was not approved: {final.message}; it did not run",
                                      approvalId=final.id, timeoutSeconds=timeout_s)

    # -- the person's side --------------------------------------------------------------------------

    def decide(self, approval_id: str, decision: Decision, message: str | None, by: str | None) -> Record:
        """Approve or deny a pending approval; the waiting call resumes at once."""
        record = self.get(approval_id)
        if record.status is not ApprovalStatus.PENDING:
            raise ApprovalAlreadyDecided(f"approval {approval_id} is {record.status.value} already",
                                         approvalId=approval_id, approvalStatus=record.status.value)
        status = ApprovalStatus.APPROVED if decision is Decision.APPROVE else ApprovalStatus.DENIED
        return self._settle(approval_id, status, message, by or ADMIN)

    # -- the one state change -----------------------------------------------------------------------

    def _settle(self, approval_id: str, status: ApprovalStatus, message: str | None, by: str | None) -> Record:
        record = dataclasses.replace(self._records.pop(approval_id), status=status, decided_at=time.time(),
                                     decided_by=by, message=message)
        self._records[approval_id] = record  # at the end: the most recently decided
        waiting = self._waiting.pop(approval_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(record)
        logger.info("approval %s %s%s", approval_id, status.value, f" by {by}" if by else "",
                    extra={"desktop": record.venue.desktop_id, "approval": approval_id})
        record.venue.bus.publish(ApprovalDecided(approval_id, status, message, by, iso(record.decided_at or 0.0),
                                                 record.venue.desktop_id))
        self._forget_oldest_decided()
        return record

    def _forget_oldest_decided(self) -> None:
        decided = len(self._records) - len(self._waiting)
        if decided <= self._history:
            return
        for approval_id in [i for i, r in self._records.items() if r.status is not ApprovalStatus.PENDING]:
            if decided <= self._history:
                break
            del self._records[approval_id]
            decided -= 1
