"""The vendors' computer-use calls as batch steps over the desktop's screen: the model's coordinate space, the
screenshot's size and the translated plan, for the endpoints (api/routes/vendors.py) and the approval gate
(api/approvals/gate.py) alike, so that what a person approves is what runs."""

from __future__ import annotations

from desktop.core.errors import invalid_action
from desktop.input.coordinates import CoordinateSpace, ImageFit
from desktop.vendors import anthropic, openai
from desktop.vendors.common import display_space
from desktop.x11.session import Session
from sandbox_desktop_wire.vendors import AnthropicRequest, OpenAIRequest


def anthropic_plan(body: AnthropicRequest, session: Session) -> tuple[anthropic.Plan, CoordinateSpace, ImageFit]:
    """The tool call's plan, in the space of the display size the model was told (the screen without one)."""
    t = body.tool
    space, fit = display_space(session.width, session.height, t.display_width_px, t.display_height_px,
                               "tool.display_width_px")
    tool = anthropic.Tool(t.type, t.display_width_px, t.display_height_px, t.enable_zoom)
    return anthropic.Translator(tool, space).plan(body.input.model_dump(exclude_none=True)), space, fit


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
