"""Which X window an application's top-level accessible object is.

AT-SPI knows nothing of X window ids, so they are matched: the same process (`_NET_WM_PID` against
the application's D-Bus peer), then the same title (a frame's accessible name is its window title in
GTK, Qt and Chromium), then the most overlapping geometry.
"""

from __future__ import annotations

from desktop.accessibility.query import WindowScope
from desktop.accessibility.tree import Element
from desktop.windows.query import Rect, WindowInfo


def _overlap(a: Rect, x: int, y: int, width: int, height: int) -> float:
    """Intersection over union of two rectangles."""
    ix = max(0, min(a.x + a.width, x + width) - max(a.x, x))
    iy = max(0, min(a.y + a.height, y + height) - max(a.y, y))
    inter = ix * iy
    union = a.width * a.height + width * height - inter
    return inter / union if union > 0 else 0.0


def _score(root: Element, window: WindowInfo) -> float:
    score = 0.0
    if root.pid is not None and window.pid == root.pid:
        score += 4
    if root.name and root.name.strip() == window.title.strip():
        score += 2
    if root.bounds is not None:
        b = root.bounds
        score += max(_overlap(window.client, b.x, b.y, b.width, b.height),
                     _overlap(window.frame, b.x, b.y, b.width, b.height))
    return score


def assign_windows(roots: list[Element], windows: list[WindowInfo]) -> None:
    """Set `window_id` on each top-level object that some window matches (best match first, each window
    taken once): a pid match with the title or the geometry, or a title and geometry match without pid."""
    pairs = sorted(((_score(root, window), i, window.id) for i, root in enumerate(roots) for window in windows),
                   reverse=True)
    taken_roots: set[int] = set()
    taken_windows: set[int] = set()
    for score, index, window_id in pairs:
        if score < 2.5 or index in taken_roots or window_id in taken_windows:
            continue  # 2.5: more than a pid or a title alone (an app's hidden frames share both)
        roots[index].window_id = window_id
        taken_roots.add(index)
        taken_windows.add(window_id)


def scope_roots(roots: list[Element], windows: list[WindowInfo], scope: WindowScope | int) -> list[Element]:
    """The top-level objects a tree or a query covers: all showing ones, those of the focused window,
    or those of one window."""
    if scope == WindowScope.ALL:
        # Only what is on the screen: a frame no window matches is a popup the toolkit never mapped
        # (Chromium keeps several) or a window not mapped yet. A client without _NET_WM_PID still
        # matches by title and geometry.
        return [r for r in roots if r.window_id is not None]
    if scope == WindowScope.FOCUSED:
        active = next((w.id for w in windows if w.is_active), None)
        found = [r for r in roots if active is not None and r.window_id == active]
        return found or [r for r in roots if "active" in r.states]
    return [r for r in roots if r.window_id == scope]
