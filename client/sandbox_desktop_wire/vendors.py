"""Wire models of the vendor computer-use endpoints: the vendors' own snake_case shapes, as they send them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from sandbox_desktop_wire.actions import SettleOptions
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.limits import MAX_IMAGE_SIZE


class VendorModel(WireModel):
    """A vendor's JSON: field names as the vendor spells them (no camelCase), unknown fields ignored."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, extra="ignore")


class VendorCall(VendorModel):
    """Our options of every vendor call."""

    report_effect: bool | None = Field(default=None, alias="reportEffect", description="Say what the action "
                                       "changed in the text the model reads (docs/effects.md); default: the "
                                       "desktop's `reportEffects`")


class AnthropicTool(VendorModel):
    """The tool definition given to the model: a `computer` tool, or the `computer_toolset_20260801` entry."""

    type: Literal["computer_20241022", "computer_20250124", "computer_20251124", "computer_toolset_20260801"]
    name: str = "computer"
    display_width_px: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE, description="Required for the "
                                         "computer_* versions; the toolset has none (screenshots are sized within "
                                         "the model's image limits)")
    display_height_px: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE)
    display_number: int | None = Field(default=None, description="Ignored: the running desktop is used")
    enable_zoom: bool = False
    configs: dict[str, dict[str, Any] | None] | None = Field(
        default=None, description="computer_toolset_20260801: per-member configs as sent to the API; a member "
        "with `enabled: false` is refused")


class AnthropicInput(VendorModel):
    """The `input` of the model's `tool_use` block, as is (a toolset member's input has no `action`)."""

    action: str | None = Field(default=None, description="Required for the computer_* versions")
    coordinate: list[int] | None = None
    element: int | str | None = Field(default=None, description="Our extension: instead of `coordinate`, a number of "
                                      "the last set-of-marks screenshot (or an element id)")
    start_coordinate: list[int] | None = None
    text: str | None = None
    scroll_direction: str | None = None
    scroll_amount: int | None = None
    duration: float | None = Field(default=None, description="Seconds (hold_key, wait), 0-100")
    region: list[int] | None = Field(default=None, description="zoom: [x1, y1, x2, y2] in the display")
    key: str | None = Field(default=None, description="Modifiers held during a click or scroll (the reference "
                            "demo's spelling of `text`)")
    repeat: int | None = Field(default=None, description="computer_toolset_20260801 `key`: times to press, 1-100")


class AnthropicToolUse(VendorModel):
    """One `tool_use` block of the assistant's turn, as the API sends it."""

    type: Literal["tool_use"] = "tool_use"
    id: str = Field(min_length=1)
    name: str
    input: AnthropicInput = AnthropicInput()
    toolset_name: str | None = None


class AnthropicRequest(VendorCall):
    tool: AnthropicTool
    input: AnthropicInput | None = Field(default=None, description="The tool_use input (`{}` when absent for a "
                                         "toolset member)")
    name: str | None = Field(default=None, description="computer_toolset_20260801: the member (`tool_use.name`)")
    tool_uses: list[AnthropicToolUse] | None = Field(
        default=None, min_length=1, description="computer_toolset_20260801: a turn's tool_use blocks, run in order "
        "until one fails; instead of `name` and `input`")
    settle: SettleOptions | None = Field(default=None, description="Wait for the screen to settle before the "
                                         "screenshot (default quietMs 300, timeoutMs 5000)")


class AnthropicResult(VendorModel):
    """The tool_result fields to forward: `content` blocks, and `is_error` when the action failed; for a turn's
    `tool_uses`, `tool_results` instead: one `tool_result` block per tool_use, in order."""

    content: list[dict[str, Any]] | None = None
    is_error: bool | None = None
    tool_results: list[dict[str, Any]] | None = None


class SafetyCheck(VendorModel):
    id: str
    code: str | None = None
    message: str | None = None


class ComputerCall(VendorModel):
    """The model's `computer_call` item: one `action` (legacy) or a batch of `actions`."""

    type: Literal["computer_call"] = "computer_call"
    call_id: str = Field(min_length=1)
    id: str | None = None
    status: str | None = None
    action: dict[str, Any] | None = None
    actions: list[dict[str, Any]] | None = None
    pending_safety_checks: list[SafetyCheck] = []


class OpenAIRequest(VendorModel):
    display_width: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE, description="The tool's display size: "
                                      "coordinates and the screenshot are in it (default: screen pixels)")
    display_height: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE)
    call: ComputerCall
    settle: SettleOptions | None = Field(default=None, description="default quietMs 300, timeoutMs 5000")


class ComputerScreenshot(VendorModel):
    type: Literal["computer_screenshot"] = "computer_screenshot"
    image_url: str


class ComputerCallOutput(VendorModel):
    """The `computer_call_output` item to send back to the model."""

    type: Literal["computer_call_output"] = "computer_call_output"
    call_id: str
    acknowledged_safety_checks: list[SafetyCheck]
    output: ComputerScreenshot


DEFAULT_SEARCH_URL = "https://www.google.com/"


class GeminiFunctionCall(VendorModel):
    """The `functionCall` of the model's `Part`, as the REST API writes it."""

    name: str = Field(description="One of the computer-use functions: click_at, hover_at, type_text_at, "
                      "scroll_document, scroll_at, key_combination, drag_and_drop, wait_5_seconds, navigate, go_back, "
                      "go_forward, search, open_web_browser")
    args: dict[str, Any] = Field(default={}, description="Points and magnitudes on the 0-999 grid; a "
                                 "`safety_decision` of `require_confirmation` is held for approval when approvals "
                                 "are on")
    id: str | None = None


class GeminiRequest(VendorCall):
    """A Gemini `Part` holding a `functionCall` (camelCase, as the REST API sends it), and our options."""

    function_call: GeminiFunctionCall = Field(alias="functionCall")
    search_url: str = Field(default=DEFAULT_SEARCH_URL, alias="searchUrl", min_length=1,
                            description="Where `search` navigates (Gemini's `search` takes no arguments)")
    settle: SettleOptions | None = Field(default=None, description="default quietMs 300, timeoutMs 5000")


class GeminiResult(VendorModel):
    """The `Part`s to send back in the next user turn: a `functionResponse`, then the screenshot as `inlineData`."""

    parts: list[dict[str, Any]]
