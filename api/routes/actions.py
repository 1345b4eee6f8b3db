"""`POST /v1/desktop/actions`: validate a whole batch, map its coordinates to the screen, run it, observe.

Everything is checked before anything runs: a bad value is a 400 naming `actions[i].field`. Errors
while running are not HTTP errors: the answer is a 200 with the results so far and `error.index`.
"""

from __future__ import annotations

import re
from typing import get_args

from starlette.requests import Request
from starlette.responses import Response

from api.convert.actions import image_model, plan_batch, problem_of, result_model
from api.convert.effects import effect_model, wants_effect
from api.http.operations import Operation
from api.server.services import desktop_of, desktop_services
from desktop.actions import batch as steps
from desktop.core.errors import FieldError
from desktop.events.action_log import acting_as
from sandbox_desktop_wire.actions import (
    Action,
    ActionError,
    ActionLogQuery,
    ActionLogResponse,
    ActionsRequest,
    ActionsResponse,
    CoordinateFrame,
    Rect,
)
from sandbox_desktop_wire.enums import ActionSource
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (404, 409, 502, 503)
"""404: a window the batch names (its `window` coordinate space, a window action) does not exist."""
ACTION_TYPES = frozenset(get_args(model.model_fields["type"].annotation)[0] for model in get_args(get_args(Action)[0]))



# -- validation and mapping -------------------------------------------------------------------


# -- responses ----------------------------------------------------------------------------------


# -- the endpoint -------------------------------------------------------------------------------


async def run_actions(request: Request, body: ActionsRequest) -> ActionsResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    planned = await plan_batch(body, session, desktop.accessibility)
    space, shot, plan = planned.space, planned.shot, planned.steps
    settle = steps.Settle(body.settle.quiet_ms, body.settle.timeout_ms) if body.settle else None
    observe = shot if body.screenshot is not None or settle is not None else None
    with acting_as(ActionSource.BATCH):
        outcome = await desktop_services(request).batches.run(session, plan, settle, observe,
                                                              wants_effect(body.report_effect, desktop))

    response = ActionsResponse(
        results=[result_model(i, body.actions[i], r, space) for i, r in enumerate(outcome.results)],
        coordinates=CoordinateFrame(space=space.kind, width=space.width, height=space.height,
                                    screen_width=session.width, screen_height=session.height,
                                    window_id=body.coordinates.window_id if body.coordinates else None,
                                    area=Rect(x=space.area.x, y=space.area.y, width=space.area.width,
                                              height=space.area.height) if space.area else None),
    )
    if outcome.error is not None:
        index, exc = outcome.error
        kind = body.actions[index].type if index < len(body.actions) else "observe"
        response.error = ActionError(index=index, type=kind, problem=problem_of(exc))
    if outcome.settle is not None:
        response.settled = outcome.settle.settled
        response.settle_ms = round(outcome.settle.elapsed_s * 1000)
    if outcome.shot is not None:
        response.screenshot = image_model(outcome.shot, space)
    if outcome.effect is not None:
        response.effect = effect_model(outcome.effect)
    return response


_INDEX = re.compile(r"^(actions)\.(\d+)(?:\.([a-z_]+))?")


def wire_field(field: str) -> str:
    """`actions.3.click.x` (pydantic's location) as `actions[3].x`; `path.1.x` as `path[1].x`."""
    match = _INDEX.match(field)
    if match is not None:
        tag = match.group(3)
        rest = field[match.end():]
        if tag is not None and tag not in ACTION_TYPES:
            rest = "." + tag + rest
        field = f"actions[{match.group(2)}]{rest}"
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", field)


class BatchOperation(Operation):
    """An Operation whose body errors name fields the way the batch documentation does."""

    async def endpoint(self, request: Request, body: bytes | None = None) -> Response:
        try:
            return await super().endpoint(request, body)
        except FieldError as exc:
            errors = [{**e, "field": wire_field(e["field"])} for e in exc.extensions.get("errors", [])]
            if not errors:
                raise
            raise FieldError(errors, wrong_shape=exc.wrong_shape, code=exc.code) from None


async def action_log(request: Request, *, query: ActionLogQuery) -> ActionLogResponse:
    entries = desktop_of(request).action_log.entries(query.since, query.limit)
    return ActionLogResponse(entries=[entry.to_wire() for entry in entries])


OPERATIONS = [
    BatchOperation("POST", "/v1/desktop/actions", run_actions,
                   "Run a batch of input actions in order, then optionally wait for the screen to settle "
                   "and take a screenshot", body=ActionsRequest, response=ActionsResponse, body_required=True,
                   invalid_code=INVALID, errors=ERRORS, tags=("actions",)),
    Operation("GET", "/v1/desktop/actions/log", action_log,
              "Every input action executed (REST, batch, vendor, live view), oldest first; `since` pages on",
              query=ActionLogQuery, response=ActionLogResponse, tags=("actions",)),
]
