"""The vendors' computer-use calls as batch steps over the desktop's screen: the model's coordinate space, the
screenshot's size and the translated plan, for the endpoints (api/routes/vendors.py) and the approval gate
(api/approvals/gate.py) alike, so that what a person approves is what runs."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.core.errors import FieldError, field_errors, invalid_action
from desktop.input.coordinates import CoordinateSpace, ImageFit
from desktop.vendors import anthropic, anthropic_toolset, gemini, openai
from desktop.vendors.common import display_space
from desktop.x11.session import Session
from sandbox_desktop_wire.vendors import AnthropicRequest, GeminiRequest, OpenAIRequest


@dataclass(frozen=True)
class AnthropicPlans:
    """What an Anthropic request runs: one plan per call (one for a single call), in order."""

    plans: list[anthropic.Plan]
    space: CoordinateSpace
    fit: ImageFit
    tool_use_ids: list[str] | None = None
    """A turn's `tool_uses`: the id each plan answers; None for a single call (`content` answers it)."""


def shape_error(field: str, message: str) -> FieldError:
    return FieldError(field_errors(field, message), wrong_shape=True)


def anthropic_plan(body: AnthropicRequest, session: Session) -> AnthropicPlans:
    """The calls' plans, in the space the model's points are in: the display size it was told (the screen without
    one), or for the toolset the screenshot it is shown."""
    t = body.tool
    if t.type == anthropic_toolset.TOOLSET:
        return toolset_plans(body, session)
    if body.name is not None or body.tool_uses is not None:
        raise invalid_action(f"`name` and `tool_uses` are for {anthropic_toolset.TOOLSET}; {t.type} takes `input` "
                             "with an `action`", "name" if body.name is not None else "tool_uses")
    if t.display_width_px is None or t.display_height_px is None:
        raise shape_error("tool.display_width_px" if t.display_width_px is None else "tool.display_height_px",
                          f"field required for {t.type}")
    if body.input is None or body.input.action is None:
        raise shape_error("input.action" if body.input is not None else "input", "field required")
    space, fit = display_space(session.width, session.height, t.display_width_px, t.display_height_px,
                               "tool.display_width_px")
    tool = anthropic.Tool(t.type, t.display_width_px, t.display_height_px, t.enable_zoom)
    return AnthropicPlans([anthropic.Translator(tool, space).plan(body.input.model_dump(exclude_none=True))],
                          space, fit)


def toolset_plans(body: AnthropicRequest, session: Session) -> AnthropicPlans:
    """Every call planned before any runs, so a bad one is refused with nothing done (and nothing to approve)."""
    t = body.tool
    if t.display_width_px is not None or t.display_height_px is not None:
        raise invalid_action(f"{anthropic_toolset.TOOLSET} has no display size: points are pixels of its "
                             "screenshots, sized within the model's image limits", "tool.display_width_px")
    disabled = set()
    for member, config in (t.configs or {}).items():
        if member not in anthropic_toolset.ACKNOWLEDGEMENTS:
            raise shape_error(f"tool.configs.{member}", f"not a member of {anthropic_toolset.TOOLSET}")
        if config is not None and config.get("enabled") is False:
            disabled.add(member)
    fit = anthropic_toolset.screenshot_fit(session.width, session.height)
    space = CoordinateSpace.image(session.width, session.height, fit.width, fit.height)
    if body.tool_uses is not None:
        if body.name is not None or body.input is not None:
            raise shape_error("tool_uses", "give `tool_uses`, or `name` and `input`, not both")
        plans, ids = [], []
        for i, use in enumerate(body.tool_uses):
            if use.toolset_name not in (None, t.name):
                raise shape_error(f"tool_uses[{i}].toolset_name", f"{use.toolset_name!r} is not the toolset "
                                  f"{t.name!r}; pass only its tool_use blocks")
            translator = anthropic_toolset.ToolsetTranslator(space, frozenset(disabled), f"tool_uses[{i}].")
            plans.append(translator.plan(use.name, use.input.model_dump(exclude_none=True)))
            ids.append(use.id)
        return AnthropicPlans(plans, space, fit, ids)
    if body.name is None:
        raise shape_error("name", f"field required: the {anthropic_toolset.TOOLSET} member, or `tool_uses`")
    data = body.input.model_dump(exclude_none=True) if body.input is not None else {}
    return AnthropicPlans([anthropic_toolset.ToolsetTranslator(space, frozenset(disabled)).plan(body.name, data)],
                          space, fit)


def openai_plan(body: OpenAIRequest, session: Session) -> tuple[openai.Plan, CoordinateSpace, ImageFit]:
    """The computer_call's plan, in the space of `display_width` x `display_height` (both or neither: the
    screen)."""
    if (body.display_width is None) != (body.display_height is None):
        missing = "display_width" if body.display_width is None else "display_height"
        raise invalid_action("give display_width and display_height together, or neither for screen pixels",
                             missing)
    space, fit = display_space(session.width, session.height, body.display_width, body.display_height,
                               "display_width")
    return openai.Translator(space).plan(body.call.model_dump(exclude_none=True)), space, fit


def gemini_plan(body: GeminiRequest, session: Session) -> gemini.Plan:
    """The functionCall's plan on the 0-999 grid over the whole screen (Gemini is never told a display size)."""
    call = body.function_call
    return gemini.Translator(session.width, session.height, body.search_url).plan(call.name, call.args)
