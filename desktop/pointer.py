"""What is under the pointer: its position, the managed client window below it and the top-level
(openbox's frame) it lies in, found in as few X round trips as the pointer's path allows. Runs on the
thread that owns the connection it is given (desktop/xthread.py)."""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import request


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


def pointer_state(d: Display) -> PointerState:
    """The pointer position and the client window (the one with WM_STATE) under it."""
    return look_under_pointer(d).state


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


def look_under_pointer(d: Display, active: bool = False) -> Look:
    """Pointer position, the managed client window under it (or None) and the top-level under it; with
    `active`, `_NET_ACTIVE_WINDOW` as well. One round trip while the pointer stays over the same client."""
    root = d.screen().root
    wm_state = d.get_atom("WM_STATE")
    pointer = request.QueryPointer(display=d.display, defer=True, window=root)
    focus = _property(d, root.id, d.get_atom("_NET_ACTIVE_WINDOW"), 1) if active else None
    path = _paths.get(d, ())
    below = [request.QueryPointer(display=d.display, defer=True, window=w) for w in path[:-1]]
    managed = _property(d, path[-1], wm_state, 0) if path else None
    pointer.reply()
    top = xid(pointer.child)
    active_id = None
    if focus is not None:
        focus.reply()
        active_id = int(focus.value[1][0]) or None if focus.property_type and focus.value[1] else None
    try:
        for query in [*below, *([managed] if managed is not None else [])]:
            query.reply()
        holds = managed is not None and bool(managed.property_type)  # still managed: it has WM_STATE
        holds = holds and [top, *(xid(q.child) for q in below)] == list(path)  # and still under the pointer
    except (xerror.BadWindow, xerror.BadMatch):  # a window of the path is gone
        holds = False
    client = path[-1] if holds else _descend(d, top, wm_state)
    # An override-redirect window (menus, tooltips) has no WM_STATE: report the top-level itself.
    return Look(PointerState(int(pointer.root_x), int(pointer.root_y), 0, client or top or None), top, client,
                 active_id)


def _property(d: Display, window: int, atom: int, length: int) -> request.GetProperty:
    return request.GetProperty(display=d.display, defer=True, delete=False, window=window, property=atom,
                               type=X.AnyPropertyType, long_offset=0, long_length=length)


def _descend(d: Display, top: int, wm_state: int) -> int | None:
    """The managed window below `top` along the pointer, one round trip per level: each level's WM_STATE
    and child-under-pointer are asked together. Remembers the path for the next look."""
    path: list[int] = []
    candidate = top
    for _ in range(8):  # from the top-level (openbox's frame) down to the client window
        if not candidate:
            break
        state = _property(d, candidate, wm_state, 0)
        below = request.QueryPointer(display=d.display, defer=True, window=candidate)
        try:
            state.reply()
            below.reply()
            found, child = bool(state.property_type), xid(below.child)
        except (xerror.BadWindow, xerror.BadMatch):
            break
        path.append(candidate)
        if found:
            _paths[d] = tuple(path)
            return candidate
        candidate = child
    _paths.pop(d, None)
    return None
