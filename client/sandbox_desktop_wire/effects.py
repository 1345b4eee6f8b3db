"""Wire models of an action's effect (docs/effects.md): what an action changed, asked with `reportEffect`."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel


class ReportEffect(WireModel):
    """The option of every action's body (a base of each action request)."""

    report_effect: bool | None = Field(default=None, description="Answer what the action changed in `effect` "
                                       "(default: the desktop's `reportEffects`, false unless started with it)")


class EffectRegion(WireModel):
    """An area of the screen that was drawn, in screen pixels."""

    x: int
    y: int
    width: int
    height: int


class EffectWindow(WireModel):
    window_id: str
    title: str


class EffectFocus(WireModel):
    """The window that has the keyboard focus after the action; no `windowId`: none has."""

    window_id: str | None = None
    title: str | None = None


class EffectElement(WireModel):
    """The element acted on (`/accessibility/act`): what it shows now that it did not before."""

    id: str
    role: str
    name: str
    states_added: list[str]
    states_removed: list[str]
    value_before: str | None = None
    value_after: str | None = None


class Effect(WireModel):
    """What the action changed within its settle window (at most 300 ms after it, ending once quiet)."""

    changed: bool = Field(description="Anything at all: drawing, a window, the focus, the element, the clipboard")
    summary: str = Field(description="One line for an agent: \"screen changed in 312x40 at (100,220); window "
                         "'Save As' opened\", or \"no visible change ...: the action may have missed its target\"")
    regions: list[EffectRegion] = Field(description="Where the screen was drawn (screen pixels), largest first")
    windows_opened: list[EffectWindow]
    windows_closed: list[EffectWindow]
    focus: EffectFocus | None = Field(default=None, description="Present when the focus moved to another window")
    element: EffectElement | None = None
    clipboard: bool = Field(default=False, description="Another client took the clipboard (a copy)")
    watched_ms: int = Field(description="How long the action and its settle were watched")
