"""An action's effect, as the desktop's events showed it, and the one line an agent reads of it.

Pure values, no X: the observer (desktop/effects/observer.py) fills them from the events of the action's
window; the API turns them into the wire's `effect` (docs/effects.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from desktop.core.geometry import Bounds

MAX_REGIONS = 4
"""More separate areas than this are reported as their bounding box: an agent wants where to look, not a map."""
NEAR_PX = 16
"""Areas this close are one: the glyphs of one typed word, a button and its focus ring."""
TEXT_CHARS = 40
"""A title or a value longer than this is cut in the summary (the fields hold it whole)."""


@dataclass(frozen=True)
class WindowSeen:
    window_id: int
    title: str


@dataclass(frozen=True)
class FocusSeen:
    """The window that has the keyboard focus after the action (None: none has)."""

    window_id: int | None
    title: str | None


@dataclass(frozen=True)
class ElementChange:
    """What an element acted on (`POST /accessibility/act`) shows after the action that it did not before."""

    id: str
    role: str
    name: str
    states_added: tuple[str, ...]
    states_removed: tuple[str, ...]
    value_before: str | None
    value_after: str | None

    @property
    def changed(self) -> bool:
        return bool(self.states_added or self.states_removed or self.value_before != self.value_after)


def element_change(id_: str, role: str, name: str, states_before: frozenset[str], states_after: frozenset[str],
                   value_before: str | None, value_after: str | None) -> ElementChange:
    return ElementChange(id_, role, name, tuple(sorted(states_after - states_before)),
                         tuple(sorted(states_before - states_after)), value_before, value_after)


@dataclass(frozen=True)
class Effect:
    regions: tuple[Bounds, ...] = ()
    """Where the screen was drawn, in screen pixels, merged (at most MAX_REGIONS)."""
    windows_opened: tuple[WindowSeen, ...] = ()
    windows_closed: tuple[WindowSeen, ...] = ()
    focus: FocusSeen | None = None
    """Set when the focus moved to another window."""
    element: ElementChange | None = None
    clipboard: bool = False
    """Another client took the clipboard (a copy)."""
    watched_ms: int = 0
    """How long the action and its settle were watched."""

    @property
    def changed(self) -> bool:
        return bool(self.regions or self.windows_opened or self.windows_closed or self.focus is not None
                    or self.clipboard or (self.element is not None and self.element.changed))

    @property
    def summary(self) -> str:
        """One line: what changed, most telling first; or that nothing visible did."""
        parts = [f"window {_quote(w.title)} opened" for w in self.windows_opened]
        parts += [f"window {_quote(w.title)} closed" for w in self.windows_closed]
        if self.focus is not None:
            parts.append("focus moved to " + (_quote(self.focus.title or "") if self.focus.window_id else "no window"))
        if self.element is not None and self.element.changed:
            parts.append(_element_line(self.element))
        if self.regions:
            first = self.regions[0]
            more = f" and {len(self.regions) - 1} more area{'s' if len(self.regions) > 2 else ''}" \
                if len(self.regions) > 1 else ""
            parts.append(f"screen changed in {first.width}x{first.height} at ({first.x},{first.y}){more}")
        if self.clipboard:
            parts.append("clipboard changed")
        if not parts:
            return f"no visible change within {self.watched_ms} ms: the action may have missed its target"
        return "; ".join(parts)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"


def _quote(text: str) -> str:
    return "'" + _cut(text) + "'" if text else "(untitled)"


def _element_line(change: ElementChange) -> str:
    what = [f"value '{_cut(change.value_before or '')}' -> '{_cut(change.value_after or '')}'"] \
        if change.value_before != change.value_after else []
    what += [f"now {state}" for state in change.states_added]
    what += [f"no longer {state}" for state in change.states_removed]
    return f"{change.role} {_quote(change.name)}: " + ", ".join(what)


def merge_regions(rects: list[Bounds]) -> tuple[Bounds, ...]:
    """Drawn areas as few rectangles: those that touch or come within NEAR_PX of each other joined, and all of
    them as one bounding box when more than MAX_REGIONS stay apart. Largest first."""
    merged: list[Bounds] = []
    for rect in rects:
        while True:
            near = next((i for i, m in enumerate(merged) if _near(m, rect)), None)
            if near is None:
                break
            rect = _union(merged.pop(near), rect)
        merged.append(rect)
    if len(merged) > MAX_REGIONS:
        whole = merged[0]
        for rect in merged[1:]:
            whole = _union(whole, rect)
        merged = [whole]
    return tuple(sorted(merged, key=lambda r: -r.width * r.height))


def _near(a: Bounds, b: Bounds) -> bool:
    return (a.x - NEAR_PX <= b.x + b.width and b.x - NEAR_PX <= a.x + a.width
            and a.y - NEAR_PX <= b.y + b.height and b.y - NEAR_PX <= a.y + a.height)


def _union(a: Bounds, b: Bounds) -> Bounds:
    x, y = min(a.x, b.x), min(a.y, b.y)
    return Bounds(x, y, max(a.x + a.width, b.x + b.width) - x, max(a.y + a.height, b.y + b.height) - y)
