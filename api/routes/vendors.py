"""Vendor computer-use endpoints: a model's tool call in, the result to send back to the model out.

Each plans with api/convert/vendors.py (as the approval gate does) and runs on the batch coordinator of
`POST /v1/desktop/actions`, so a vendor call and a batch never interleave and settle the same way.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from api.convert.actions import image_model
from api.convert.effects import effect_model, wants_effect
from api.convert.open_models import model_plan
from api.convert.vendors import AnthropicPlans, anthropic_plan, gemini_plan, openai_plan
from api.http.operations import Operation
from api.http.problems import problem_document
from api.server.services import desktop_of, desktop_services
from desktop.actions import batch as steps
from desktop.core.errors import DomainError
from desktop.events.action_log import acting_as
from desktop.input.coordinates import CoordinateSpace
from desktop.screen.screenshots import ShotOptions
from desktop.vendors import anthropic, anthropic_toolset, browser, gemini, openai
from desktop.x11.session import Session
from sandbox_desktop_wire.actions import SettleOptions
from sandbox_desktop_wire.enums import ActionSource
from sandbox_desktop_wire.open_models import ModelActRequest, ModelActResult
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.vendors import (
    AnthropicRequest,
    AnthropicResult,
    ComputerCallOutput,
    GeminiRequest,
    GeminiResult,
    OpenAIRequest,
)

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (409, 502, 503)
DEFAULT_SETTLE = steps.Settle(300, 5000)


def settle_of(options: SettleOptions | None) -> steps.Settle:
    return DEFAULT_SETTLE if options is None else steps.Settle(options.quiet_ms, options.timeout_ms)


async def anthropic_computer(request: Request, *, body: AnthropicRequest) -> AnthropicResult:
    with acting_as(ActionSource.ANTHROPIC):
        desktop = desktop_of(request)
        session = desktop.session()
        planned = anthropic_plan(body, session)
        if planned.tool_use_ids is None:
            return AnthropicResult(**await run_anthropic(request, session, planned.plans[0], planned, body))
        # A turn's calls in order; after the first that fails the rest do not run, as the SDK's runner does it.
        results: list[dict[str, Any]] = []
        for use_id, plan in zip(planned.tool_use_ids, planned.plans, strict=True):
            if results and results[-1].get("is_error"):
                result = anthropic.error_result(anthropic_toolset.NOT_EXECUTED, prefix="")
            else:
                result = await run_anthropic(request, session, plan, planned, body)
            results.append({"type": "tool_result", "tool_use_id": use_id, **result})
    return AnthropicResult(tool_results=results)


async def run_anthropic(request: Request, session: Session, plan: anthropic.Plan, planned: AnthropicPlans,
                        body: AnthropicRequest) -> dict[str, Any]:
    """One call's tool_result fields."""
    desktop = desktop_of(request)
    if plan.press is not None:
        # Outside the batch, as `POST /mouse/down` does it: a batch would release it when it ends.
        try:
            at = plan.press.at
            if isinstance(at, steps.ElementAt):
                at, _found = await desktop.accessibility.locate(session, at.target)
            await desktop.mouse.button(session, at[0] if at else None, at[1] if at else None,
                                       plan.press.button, down=True)
        except DomainError as exc:
            return anthropic.error_result(problem_document(exc)["detail"])
    final = plan.shot or (ShotOptions(scale=planned.fit.scale) if plan.render == "screenshot" else None)
    outcome = await desktop_services(request).batches.run(session, plan.steps, settle_of(body.settle) if plan.settle
                                                          else None, final, wants_effect(body.report_effect, desktop))
    return anthropic.content(plan, outcome, planned.space, lambda exc: problem_document(exc)["detail"])


async def openai_computer(request: Request, *, body: OpenAIRequest) -> ComputerCallOutput:
    with acting_as(ActionSource.OPENAI):
        session = desktop_of(request).session()
        plan, _space, fit = openai_plan(body, session)
        settle = settle_of(body.settle) if plan.steps else None
        outcome = await desktop_services(request).batches.run(session, plan.steps, settle,
                                                              ShotOptions(scale=fit.scale))
    if outcome.error is not None:
        index, exc = outcome.error
        where = plan.prefixes[plan.origins[index]] if index < len(plan.steps) else "the screenshot"
        exc.extensions["failedAction"] = where
        exc.message = f"{where} failed (the actions before it ran): {exc.message}"
        raise exc
    assert outcome.shot is not None
    checks = [check.model_dump(exclude_none=True) for check in body.call.pending_safety_checks]
    return ComputerCallOutput(**openai.call_output(body.call.call_id, checks, outcome.shot))


async def gemini_computer(request: Request, *, body: GeminiRequest) -> GeminiResult:
    with acting_as(ActionSource.GEMINI):
        desktop = desktop_of(request)
        session = desktop.session()
        plan = gemini_plan(body, session)
        steps_run = plan.steps
        if plan.browser is not None:
            # The browser first (outside the batch: launching waits for a window); a browser just launched at
            # the URL needs no keys.
            steps_run = await browser.browser_steps(desktop.windows, desktop.apps, desktop.accessibility, session,
                                                    plan.browser)
        outcome = await desktop_services(request).batches.run(session, steps_run, settle_of(body.settle),
                                                              ShotOptions(scale=1.0),
                                                              wants_effect(body.report_effect, desktop))
        if outcome.error is not None:
            raise outcome.error[1]
        assert outcome.shot is not None
        url = await browser.focused_url(desktop.windows, desktop.accessibility, session)
    effect = outcome.effect.summary if outcome.effect is not None else None
    return GeminiResult(parts=gemini.parts(plan.name, url, plan.confirm is not None, outcome.shot, effect))


async def model_act(request: Request, *, body: ModelActRequest) -> ModelActResult:
    """An open model's output: parsed whole before anything runs, then its steps (or its browser move) as one
    batch, and the screenshot in the model's convention. A final answer alone runs nothing and shows nothing."""
    with acting_as(ActionSource.OPEN_MODEL):
        desktop = desktop_of(request)
        session = desktop.session()
        plan, space = model_plan(body, session)
        steps_run = plan.steps
        if plan.browser is not None:
            steps_run = await browser.browser_steps(desktop.windows, desktop.apps, desktop.accessibility, session,
                                                    plan.browser)
        acted = bool(steps_run) or plan.browser is not None
        shot = ShotOptions(size=space.resized) if body.screenshot and (acted or plan.final is None) else None
        outcome = None
        if acted or shot is not None:
            # The settle is for the screenshot: without one, only a `settle` asked for is waited for.
            settle = settle_of(body.settle) if acted and (shot is not None or body.settle is not None) else None
            outcome = await desktop_services(request).batches.run(session, steps_run, settle, shot,
                                                                  wants_effect(body.report_effect, desktop))
    if outcome is not None and outcome.error is not None:
        index, exc = outcome.error
        if index < len(steps_run):
            exc.message = f"step {index + 1} of {len(steps_run)} failed (the steps before it ran): {exc.message}"
        raise exc
    image = None
    if outcome is not None and outcome.shot is not None:
        image = image_model(outcome.shot, CoordinateSpace.screen(session.width, session.height))
        image.frame.space = space.convention
    return ModelActResult(family=body.family, convention=space.convention, model_width=space.width,
                          model_height=space.height, thought=plan.thought, actions=plan.actions, final=plan.final,
                          screenshot=image,
                          effect=effect_model(outcome.effect) if outcome is not None and outcome.effect else None)


OPERATIONS = [
    Operation("POST", "/v1/desktop/anthropic/computer", anthropic_computer,
              "Run an Anthropic computer-tool action, or computer toolset calls, and answer the tool_result content to "
              "forward",
              body=AnthropicRequest, response=AnthropicResult, body_required=True, invalid_code=INVALID,
              errors=ERRORS, tags=("vendors",)),
    Operation("POST", "/v1/desktop/openai/computer", openai_computer,
              "Run an OpenAI computer_call (one action or a batch) and answer the computer_call_output item",
              body=OpenAIRequest, response=ComputerCallOutput, body_required=True, invalid_code=INVALID,
              errors=ERRORS, tags=("vendors",)),
    Operation("POST", "/v1/desktop/gemini/computer", gemini_computer,
              "Run a Gemini computer-use functionCall and answer the functionResponse and screenshot parts to send "
              "back",
              body=GeminiRequest, response=GeminiResult, body_required=True, invalid_code=INVALID,
              errors=(404, *ERRORS), tags=("vendors",)),
    Operation("POST", "/v1/desktop/models/act", model_act,
              "Run what an open computer-use model printed (Qwen2.5-VL, Qwen3-VL, UI-TARS, OpenCUA, Fara tool calls or "
              "action lines, parsed, never executed) and answer the parsed actions, a final answer and the next "
              "screenshot in the model's coordinate convention",
              body=ModelActRequest, response=ModelActResult, body_required=True, invalid_code=INVALID,
              errors=(400, 404, 413, *ERRORS), tags=("vendors",)),
]
