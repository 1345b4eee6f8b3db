"""An open model's output as a plan over the desktop's screen, for `POST /v1/desktop/models/act`
(api/routes/vendors.py) and the approval gate (api/approvals/gate.py) alike: the family picks the parser, the
convention (the family's own unless the request names one) the space its points are in."""

from __future__ import annotations

from desktop.core.errors import invalid_action
from desktop.vendors import pyautogui_lines, qwen, ui_tars
from desktop.vendors.model_plan import ModelPlan
from desktop.vendors.model_space import DEFAULTS, ModelSpace, ResizeBounds
from desktop.x11.session import Session
from sandbox_desktop_wire.open_models import ModelActRequest, ModelFamily


def model_space(body: ModelActRequest, width: int, height: int) -> ModelSpace:
    convention, bounds = DEFAULTS[body.family]
    bounds = ResizeBounds(body.factor or bounds.factor, body.min_pixels or bounds.min_pixels,
                          body.max_pixels or bounds.max_pixels)
    if bounds.min_pixels > bounds.max_pixels:
        raise invalid_action(f"minPixels {bounds.min_pixels} is above maxPixels {bounds.max_pixels}", "minPixels")
    return ModelSpace.of(body.convention or convention, width, height, bounds)


def model_plan(body: ModelActRequest, session: Session) -> tuple[ModelPlan, ModelSpace]:
    space = model_space(body, session.width, session.height)
    match body.family:
        case ModelFamily.QWEN25_VL | ModelFamily.QWEN3_VL | ModelFamily.FARA:
            plan = qwen.plan(body.text, space, body.family is ModelFamily.FARA, body.search_url)
        case ModelFamily.UI_TARS_1 | ModelFamily.UI_TARS_15:
            plan = ui_tars.plan(body.text, space)
        case ModelFamily.OPENCUA:
            plan = pyautogui_lines.plan(body.text, space)
    return plan, space
