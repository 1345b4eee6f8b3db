"""Mouse input through XTest, run on the session's input thread so actions keep their order.

Every public coroutine validates its coordinates against the screen first (400 naming the field,
no 16-bit wrap-around), then does all X work in one call on the input thread, and answers the
pointer position after the action with the window under it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import xtest
from Xlib.protocol import request

from desktop.action_log import ActionLog
from desktop.errors import invalid_action
from desktop.session import Session
from desktop.window_control import SOURCE_PAGER, send_root_message
from desktop.windows import active_window_id

BUTTONS = {"left": 1, "middle": 2, "right": 3, "back": 8, "forward": 9}
WHEEL_UP, WHEEL_DOWN, WHEEL_LEFT, WHEEL_RIGHT = 4, 5, 6, 7
MAX_CLICKS = 3
# Gap between the clicks of a double/triple click: well inside every toolkit's multi-click time,
# and long enough that no toolkit merges or drops events with identical timestamps.
MULTI_CLICK_GAP_S = 0.008
MAX_DRAG_STEPS = 1000
MAX_DRAG_MS = 60_000
SETTLE_POINTER_S = 0.5
# Presses of these buttons focus and raise the window under the pointer (click-to-focus).
FOCUSING_BUTTONS = (1, 2, 3)
ACTIVATE_TIMEOUT_S = 0.2
BUTTON_MASKS = X.Button1Mask | X.Button2Mask | X.Button3Mask | X.Button4Mask | X.Button5Mask
MAX_WINDOW_DEPTH = 32


@dataclass(frozen=True)
class PointerState:
    """Where the pointer is after an action, and the client window under it."""

    x: int
    y: int
    screen: int
    window: int | None


def check_point(session: Session, x: int, y: int, x_field: str = "x", y_field: str = "y") -> None:
    """Coordinates must lie on the screen: 0 <= x < width, 0 <= y < height."""
    for value, field, limit in ((x, x_field, session.width), (y, y_field, session.height)):
        if value < 0:
            raise invalid_action("Desktop coordinates must be non-negative", field)
        if value >= limit:
            raise invalid_action(f"{field}={value} is outside the {session.width}x{session.height} screen "
                          f"(0 <= x < {session.width}, 0 <= y < {session.height})", field)


def button_number(name: str) -> int:
    try:
        return BUTTONS[name]
    except KeyError:
        raise invalid_action(f"button must be one of {', '.join(BUTTONS)}", "button") from None


# -- in-thread primitives (take the Display) ---------------------------------------------------

def _xid(window: object) -> int:
    """A window id from a reply field that is a Window object or X.NONE."""
    return int(getattr(window, "id", window) or 0)  # type: ignore[call-overload]


def pointer_state(d: Display) -> PointerState:
    """The pointer position and the client window (the one with WM_STATE) under it."""
    x, y, client, top = _under_pointer(d)
    # An override-redirect window (menus, tooltips) has no WM_STATE: report the top-level itself.
    return PointerState(x, y, 0, client or top or None)


def _under_pointer(d: Display) -> tuple[int, int, int | None, int]:
    """Pointer position, the managed client window under it (or None) and the top-level under it.

    One round trip per level: each level's WM_STATE and child-under-pointer are asked together.
    """
    reply = d.screen().root.query_pointer()
    top = _xid(reply.child)
    wm_state = d.get_atom("WM_STATE")
    window = None
    candidate = top
    # Descend along the pointer from the top-level (openbox's frame) to the client window.
    for _ in range(8):
        if not candidate:
            break
        state = request.GetProperty(display=d.display, defer=True, delete=False, window=candidate,
                                    property=wm_state, type=X.AnyPropertyType, long_offset=0, long_length=0)
        below = request.QueryPointer(display=d.display, defer=True, window=candidate)
        try:
            state.reply()
            below.reply()
        except (xerror.BadWindow, xerror.BadMatch):
            break
        if state.property_type:
            window = candidate
            break
        candidate = _xid(below.child)
    return int(reply.root_x), int(reply.root_y), window, top


def _activate_under_pointer(d: Display) -> None:
    """Click-to-focus, done here rather than by a window manager binding.

    A WM's click-to-focus binding grabs the pointer synchronously: the pointer freezes until the
    WM has handled the press, and events sent meanwhile are reordered (keys overtake clicks) or
    replayed to the WM instead of the app. Activating the window first (EWMH, as a pager would)
    keeps every event in order; keys typed next go to the window that was clicked.
    """
    _, _, client, _ = _under_pointer(d)
    if client is None or client == active_window_id(d):
        return
    send_root_message(d, client, "_NET_ACTIVE_WINDOW", [SOURCE_PAGER, X.CurrentTime, 0])
    deadline = time.monotonic() + ACTIVATE_TIMEOUT_S
    while active_window_id(d) != client and time.monotonic() < deadline:
        time.sleep(0.001)


def _move(d: Display, x: int, y: int) -> None:
    xtest.fake_input(d, X.MotionNotify, x=x, y=y)


def _press(d: Display, button: int) -> None:
    if button in FOCUSING_BUTTONS:
        _activate_under_pointer(d)
    xtest.fake_input(d, X.ButtonPress, button)


def _release(d: Display, button: int) -> None:
    xtest.fake_input(d, X.ButtonRelease, button)


def _finish(d: Display, target: tuple[int, int] | None = None) -> PointerState:
    """The pointer state after an action; with a `target`, once the pointer has got there.

    The server answers QueryPointer only after the events sent before it, except while a client
    holds the pointer frozen: openbox does, briefly, after a button press on a window (its
    click-to-focus binding), and motion sent meanwhile waits in the server's queue. So a position
    that is not yet the target is read again, for at most SETTLE_POINTER_S.
    """
    state = pointer_state(d)
    deadline = time.monotonic() + SETTLE_POINTER_S
    while target is not None and (state.x, state.y) != target and time.monotonic() < deadline:
        time.sleep(0.002)
        state = pointer_state(d)
    return state


def _move_to(d: Display, x: int, y: int) -> PointerState:
    _move(d, x, y)
    return _finish(d, (x, y))


def _click(d: Display, x: int, y: int, button: int, count: int) -> PointerState:
    _move(d, x, y)
    for i in range(count):
        if i:
            d.sync()
            time.sleep(MULTI_CLICK_GAP_S)
        _press(d, button)
        _release(d, button)
    return _finish(d, (x, y))


def _button(d: Display, x: int | None, y: int | None, button: int, down: bool) -> PointerState:
    if x is not None and y is not None:
        _move(d, x, y)
    (_press if down else _release)(d, button)
    return _finish(d, (x, y) if x is not None and y is not None else None)


def drag_path(start: tuple[int, int], end: tuple[int, int], steps: int) -> Iterator[tuple[int, int]]:
    """`steps` evenly spaced points after `start`, the last one exactly `end`."""
    (sx, sy), (ex, ey) = start, end
    for i in range(1, steps + 1):
        yield round(sx + (ex - sx) * i / steps), round(sy + (ey - sy) * i / steps)


def _drag(d: Display, start: tuple[int, int], end: tuple[int, int], button: int, steps: int,
          duration_s: float) -> PointerState:
    _move(d, *start)
    _press(d, button)
    try:
        d.sync()
        pause = duration_s / steps if steps else 0.0
        for point in drag_path(start, end, steps):
            if pause:
                time.sleep(pause)
            _move(d, *point)
            d.sync()
    finally:
        _release(d, button)  # never leave the button held, whatever failed
    return _finish(d, end)


def _scroll(d: Display, x: int, y: int, delta_x: int, delta_y: int) -> PointerState:
    _move(d, x, y)
    for count, positive, negative in ((delta_y, WHEEL_DOWN, WHEEL_UP), (delta_x, WHEEL_RIGHT, WHEEL_LEFT)):
        button = positive if count > 0 else negative
        for _ in range(abs(count)):
            _press(d, button)
            _release(d, button)
    return _finish(d, (x, y))


def pointer_grabbed(d: Display) -> bool:
    """Whether another client holds the pointer grabbed (a menu open, or a client hung holding it).

    There is no request that asks, so this tries a grab of its own and releases it at once. It grabs
    the window the pointer is in, which generates no crossing events: nobody sees the probe. While a
    button is held the press's own implicit grab would answer, so that case reads as not grabbed.
    """
    root = d.screen().root
    reply = root.query_pointer()
    if int(reply.mask) & BUTTON_MASKS:
        return False
    window, child = root, _xid(reply.child)
    try:
        for _ in range(MAX_WINDOW_DEPTH):  # down to the deepest window under the pointer, as the server sees it
            if not child:
                break
            window = d.create_resource_object("window", child)
            child = _xid(window.query_pointer().child)
        status = window.grab_pointer(False, 0, X.GrabModeAsync, X.GrabModeAsync, X.NONE, X.NONE, X.CurrentTime)
    except xerror.BadWindow:  # the window went away meanwhile: ask again next time
        return False
    if status == X.GrabSuccess:
        d.ungrab_pointer(X.CurrentTime)
        d.flush()
    return status in (X.AlreadyGrabbed, X.GrabFrozen)


def release_buttons(d: Display) -> None:
    """Release every pointer button that is down (after an error, or a viewer leaving)."""
    mask = int(d.screen().root.query_pointer().mask)
    for button, bit in ((1, X.Button1Mask), (2, X.Button2Mask), (3, X.Button3Mask), (4, X.Button4Mask),
                        (5, X.Button5Mask)):
        if mask & bit:
            _release(d, button)
    d.sync()


# -- the feature -----------------------------------------------------------------------------

class Mouse:
    """Mouse actions; stateless, everything happens on the session's input thread.

    With an `ActionLog`, each action is recorded once it has been validated, before it runs.
    """

    def __init__(self, log: ActionLog | None = None) -> None:
        self.log = log

    def _record(self, kind: str, **fields: object) -> None:
        if self.log is not None:
            self.log.record(kind, **fields)

    async def position(self, session: Session) -> PointerState:
        return await session.x.call(pointer_state)

    async def move(self, session: Session, x: int, y: int) -> PointerState:
        check_point(session, x, y)
        self._record("move", x=x, y=y)
        return await session.x.call(_move_to, x, y)

    async def click(self, session: Session, x: int, y: int, button: str = "left", count: int = 1) -> PointerState:
        check_point(session, x, y)
        if not 1 <= count <= MAX_CLICKS:
            raise invalid_action(f"clickCount must be between 1 and {MAX_CLICKS}", "clickCount")
        number = button_number(button)
        self._record("click", x=x, y=y, button=button, count=count)
        return await session.x.call(_click, x, y, number, count)

    async def button(self, session: Session, x: int | None, y: int | None, button: str, down: bool) -> PointerState:
        if (x is None) != (y is None):
            raise invalid_action("x and y must both be provided when setting coordinates", "x" if x is None else "y")
        if x is not None and y is not None:
            check_point(session, x, y)
        number = button_number(button)
        self._record("mouse_down" if down else "mouse_up", x=x, y=y, button=button)
        return await session.x.call(_button, x, y, number, down)

    async def drag(self, session: Session, start: tuple[int, int], end: tuple[int, int], button: str = "left",
                   steps: int | None = None, duration_ms: int = 0) -> PointerState:
        check_point(session, *start, x_field="startX", y_field="startY")
        check_point(session, *end, x_field="endX", y_field="endY")
        if steps is None:
            # Enough motion for drag thresholds and toolkits that track intermediate points.
            steps = max(2, min(20, max(abs(end[0] - start[0]), abs(end[1] - start[1])) // 25))
        if not 1 <= steps <= MAX_DRAG_STEPS:
            raise invalid_action(f"steps must be between 1 and {MAX_DRAG_STEPS}", "steps")
        if not 0 <= duration_ms <= MAX_DRAG_MS:
            raise invalid_action(f"durationMs must be between 0 and {MAX_DRAG_MS}", "durationMs")
        number = button_number(button)
        self._record("drag", x=start[0], y=start[1], endX=end[0], endY=end[1], button=button)
        return await session.x.call(_drag, start, end, number, steps, duration_ms / 1000)

    async def scroll(self, session: Session, x: int, y: int, delta_x: int, delta_y: int) -> PointerState:
        check_point(session, x, y)
        if delta_x == 0 and delta_y == 0:
            raise invalid_action("deltaX or deltaY must be non-zero", "deltaY")
        for value, field in ((delta_x, "deltaX"), (delta_y, "deltaY")):
            if abs(value) > 100:
                raise invalid_action(f"{field} must be between -100 and 100 wheel clicks", field)
        self._record("scroll", x=x, y=y, deltaX=delta_x, deltaY=delta_y)
        return await session.x.call(_scroll, x, y, delta_x, delta_y)

    async def release_all(self, session: Session) -> None:
        await session.x.call(release_buttons)
