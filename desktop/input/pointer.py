"""What is under the pointer: its position, the managed client window below it and the top-level
(openbox's frame) it lies in, found in as few X round trips as the pointer's path allows. Raw jobs
(desktop/x11/raw.py): the X thread runs them, or the event loop on the thread's idle connection."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from Xlib.display import Display

from desktop.x11 import raw as xraw


@dataclass(frozen=True)
class PointerState:
    """Where the pointer is after an action, and the client window under it."""

    x: int
    y: int
    screen: int
    window: int | None



def xid(window: object) -> int:
    """A window id from a reply field that is a Window object or X.NONE."""
    return int(getattr(window, "id", window) or 0)  # type: ignore[call-overload]


def pointer_state(d: Display) -> xraw.RawJob[PointerState]:
    """The pointer position and the client window (the one with WM_STATE) under it."""
    return (yield from look_under_pointer(d)).state


@dataclass(frozen=True)
class Look:
    """What one look under the pointer found: `top` is the top-level under it (0: the root), `client` the
    managed window below that, `active` is `_NET_ACTIVE_WINDOW` when it was asked for."""

    state: PointerState
    top: int
    client: int | None
    active: int | None = None


_paths: WeakKeyDictionary[Display, tuple[int, ...]] = WeakKeyDictionary()
"""Per connection, the windows from the top-level last found under the pointer down to its client.

Finding the client takes a round trip per level (the frame, then the window in it); the pointer mostly
stays over the same window, so the next look asks about these windows in its first round trip, and
descends level by level only when they no longer hold."""


def look_under_pointer(d: Display, active: bool = False, *, first: Sequence[bytes] = ()) -> xraw.RawJob[Look]:
    """Pointer position, the managed client window under it (or None) and the top-level under it; with
    `active`, `_NET_ACTIVE_WINDOW` as well. One round trip while the pointer stays over the same client.
    `first`: requests without a reply (desktop/x11/raw.py) sent in the same write, before the look (a motion)."""
    root = d.screen().root.id
    wm_state = d.get_atom("WM_STATE")
    path = _paths.get(d, ())
    asked = [xraw.query_pointer(root)]
    if active:
        asked.append(xraw.get_property(root, d.get_atom("_NET_ACTIVE_WINDOW"), 1))
    asked += [xraw.query_pointer(w) for w in path[:-1]]
    if path:
        asked.append(xraw.get_property(path[-1], wm_state, 0))
    answers = yield xraw.Exchange([*first, *asked], [False] * len(first) + [True] * len(asked))
    pointer = answers.pop(0)
    assert isinstance(pointer, bytes), "the root always answers QueryPointer"
    top, x, y = xraw.pointer_reply(pointer)
    active_id = None
    if active:
        focus = answers.pop(0)
        values = xraw.property_reply(focus)[1] if isinstance(focus, bytes) else []
        active_id = values[0] or None if values else None
    # Still managed (it has WM_STATE) and still under the pointer, level by level; an error: a window is gone.
    replies = [a for a in answers if isinstance(a, bytes)]
    holds = bool(path) and len(replies) == len(answers)
    if holds:
        *below, managed = replies
        children = [top, *(xraw.pointer_reply(a)[0] for a in below)]
        holds = bool(xraw.property_reply(managed)[0]) and children == list(path)
    client = path[-1] if holds else (yield from _descend(d, top, wm_state))
    # An override-redirect window (menus, tooltips) has no WM_STATE: report the top-level itself.
    return Look(PointerState(x, y, 0, client or top or None), top, client, active_id)


def _descend(d: Display, top: int, wm_state: int) -> Generator[xraw.Exchange, list[xraw.Answer], int | None]:
    """The managed window below `top` along the pointer, one round trip per level: each level's WM_STATE
    and child-under-pointer are asked together. Remembers the path for the next look."""
    path: list[int] = []
    candidate = top
    for _ in range(8):  # from the top-level (openbox's frame) down to the client window
        if not candidate:
            break
        state, below = yield xraw.Exchange([xraw.get_property(candidate, wm_state, 0), xraw.query_pointer(candidate)],
                                           [True, True])
        if not isinstance(state, bytes) or not isinstance(below, bytes):  # the window is gone
            break
        path.append(candidate)
        if xraw.property_reply(state)[0]:
            _paths[d] = tuple(path)
            return candidate
        candidate = xraw.pointer_reply(below)[0]
    _paths.pop(d, None)
    return None
