"""`/v1/approvals`: agent actions held for a person's decision, on every desktop (docs/approvals.md).

Server-wide, so only the server token reaches them: a desktop's scoped token (`view` or `control`) is refused with
403 `token_scope` (api/server/scoped_tokens.py), and an agent given one cannot approve its own actions. These routes are
never held themselves (api/approvals/gate.py holds only the operations in its tables).
"""

from __future__ import annotations

from starlette.requests import Request

from api.http.operations import Operation
from api.server.services import server_of
from sandbox_desktop_wire.approvals import Approval, ApprovalListQuery, ApprovalListResponse, DecisionRequest

TAGS = ("approvals",)
ONE = "/v1/approvals/{approval_id}"


async def list_approvals(request: Request, *, query: ApprovalListQuery) -> ApprovalListResponse:
    book = server_of(request).approvals
    return ApprovalListResponse(approvals=[r.to_wire() for r in book.list(query.status, query.desktop_id)])


async def get_approval(request: Request) -> Approval:
    return server_of(request).approvals.get(request.path_params["approval_id"]).to_wire()


async def decide(request: Request, *, body: DecisionRequest) -> Approval:
    book = server_of(request).approvals
    return book.decide(request.path_params["approval_id"], body.decision, body.message, body.by).to_wire()


OPERATIONS = [
    Operation("GET", "/v1/approvals", list_approvals, "Agent actions waiting for a person's decision, and the last "
              "decided ones (`status=pending` for the waiting ones only)", query=ApprovalListQuery,
              response=ApprovalListResponse, errors=(400,), tags=TAGS),
    Operation("GET", ONE, get_approval, "One approval", response=Approval, errors=(404,), tags=TAGS),
    Operation("POST", ONE, decide, "Approve or deny a pending action: the agent's call goes on at once (denied: "
              "403 action_denied with the message)", body=DecisionRequest, response=Approval, body_required=True,
              errors=(400, 404, 409), tags=TAGS),
]
