"""An action's effect (docs/effects.md): whether a call asked for it, watching the action, and the wire's `effect`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from desktop.accessibility.acting import ActOutcome
from desktop.effects import effect as domain
from desktop.lifecycle.runtime import Desktop
from sandbox_desktop_wire.effects import Effect, EffectElement, EffectFocus, EffectRegion, EffectWindow

T = TypeVar("T")


def wants_effect(asked: bool | None, desktop: Desktop) -> bool:
    """The call's `reportEffect`, else the desktop's `reportEffects` start option."""
    if asked is not None:
        return asked
    return desktop.options is not None and desktop.options.report_effects


async def observed(desktop: Desktop, asked: bool | None, act: Callable[[], Awaitable[T]],
                   element: Callable[[T], domain.ElementChange | None] = lambda result: None,
                   ) -> tuple[T, Effect | None]:
    """`act()`'s result, and what it changed when the call asked (else None, and nothing is watched)."""
    if not wants_effect(asked, desktop):
        return await act(), None
    async with desktop.effects.watch() as watch:
        result = await act()
        return result, effect_model(await watch.finish(element=element(result)))


def effect_model(effect: domain.Effect) -> Effect:
    focus = None
    if effect.focus is not None:
        window_id = str(effect.focus.window_id) if effect.focus.window_id else None
        focus = EffectFocus(window_id=window_id, title=effect.focus.title)
    e = effect.element
    element = None if e is None else EffectElement(
        id=e.id, role=e.role, name=e.name, states_added=list(e.states_added), states_removed=list(e.states_removed),
        value_before=e.value_before, value_after=e.value_after)
    return Effect(changed=effect.changed, summary=effect.summary,
                  regions=[EffectRegion(x=r.x, y=r.y, width=r.width, height=r.height) for r in effect.regions],
                  windows_opened=[_window(w) for w in effect.windows_opened],
                  windows_closed=[_window(w) for w in effect.windows_closed],
                  focus=focus, element=element, clipboard=effect.clipboard, watched_ms=effect.watched_ms)


def _window(window: domain.WindowSeen) -> EffectWindow:
    return EffectWindow(window_id=str(window.window_id), title=window.title)


def acted_element(outcome: ActOutcome) -> domain.ElementChange:
    """How the element acted on changed: its states and value before the action and after it."""
    e = outcome.element
    return domain.element_change(e.id, e.role, e.name, outcome.states_before, e.states, outcome.value_before,
                                 e.value)
