"""Mouse input through XTest, on the session's X thread, ordered by the desktop's input lock.

Every public coroutine validates its coordinates against the screen first (400 naming the field,
no 16-bit wrap-around), then takes the input lock and does its X work in short jobs on the X
thread, waiting between them on the event loop (a drag's pace, the gap of a double click, the
window manager applying click-to-focus; desktop/x11/thread.py says why), and answers the pointer
position after the action with the window under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display

from desktop.control.takeover import TakeoverGate
from desktop.core.errors import invalid_action
from desktop.events import action_log as logged
from desktop.events.action_log import ActionLog, LoggedAction
from desktop.input.pointer import Look, PointerState, look_under_pointer, pointer_state, xid
from desktop.windows.control import SOURCE_PAGER, root_message
from desktop.windows.query import active_window_id
from desktop.x11 import raw as xraw
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from sandbox_desktop_wire.enums import MouseButton
from sandbox_desktop_wire.limits import MAX_CLICKS, MAX_DRAG_MS, MAX_DRAG_STEPS, MAX_WHEEL_CLICKS

BUTTONS = {MouseButton.LEFT: 1, MouseButton.MIDDLE: 2, MouseButton.RIGHT: 3, MouseButton.BACK: 8,
           MouseButton.FORWARD: 9}
WHEEL_UP, WHEEL_DOWN, WHEEL_LEFT, WHEEL_RIGHT = 4, 5, 6, 7
# Gap between the clicks of a double/triple click: well inside every toolkit's multi-click time,
# and long enough that no toolkit merges or drops events with identical timestamps.
MULTI_CLICK_GAP_S = 0.008
SETTLE_POINTER_S = 0.5
# Presses of these buttons focus and raise the window under the pointer (click-to-focus).
FOCUSING_BUTTONS = (1, 2, 3)
ACTIVATE_TIMEOUT_S = 0.2
BUTTON_MASKS = X.Button1Mask | X.Button2Mask | X.Button3Mask | X.Button4Mask | X.Button5Mask
MAX_WINDOW_DEPTH = 32

Point = tuple[int, int]


def check_point(session: Session, x: int, y: int, x_field: str = "x", y_field: str = "y") -> None:
    """Coordinates must lie on the screen: 0 <= x < width, 0 <= y < height."""
    for value, field, limit in ((x, x_field, session.width), (y, y_field, session.height)):
        if value < 0:
            raise invalid_action("Desktop coordinates must be non-negative", field)
        if value >= limit:
            raise invalid_action(f"{field}={value} is outside the {session.width}x{session.height} screen "
                          f"(0 <= x < {session.width}, 0 <= y < {session.height})", field)


def button_number(button: MouseButton) -> int:
    return BUTTONS[button]


# -- in-thread primitives (take the Display) ---------------------------------------------------

def _request_activation(d: Display, first: Sequence[bytes]) -> xraw.RawJob[Look | int]:
    """Click-to-focus, done here rather than by a window manager binding.

    A WM's click-to-focus binding grabs the pointer synchronously: the pointer freezes until the
    WM has handled the press, and events sent meanwhile are reordered (keys overtake clicks) or
    replayed to the WM instead of the app. Activating the window first (EWMH, as a pager would)
    keeps every event in order; keys typed next go to the window that was clicked.

    Returns the client window when the press must wait for the WM to make it active (see
    `_await_active`), else what was under the pointer, for the answer. `first`: sent before the look.
    """
    look = yield from look_under_pointer(d, active=True, first=first)
    if look.client is None or look.client == look.active:
        return look
    ask = root_message(d, look.client, "_NET_ACTIVE_WINDOW", [SOURCE_PAGER, X.CurrentTime, 0])
    active = xraw.get_property(d.screen().root.id, d.get_atom("_NET_ACTIVE_WINDOW"), 1)
    now, = yield xraw.Exchange([ask, active], [False, True])
    values = xraw.property_reply(now)[1] if isinstance(now, bytes) else []
    return look if values and values[0] == look.client else look.client


def _motion(d: Display, x: int, y: int) -> bytes:
    return xraw.fake_input(d, X.MotionNotify, x=x, y=y)


def _move_sync(d: Display, x: int, y: int) -> xraw.RawJob[None]:
    yield xraw.Exchange([_motion(d, x, y), xraw.round_trip()], [False, True])


def _buttons(d: Display, button: int, press: bool, release: bool) -> list[bytes]:
    return ([xraw.fake_input(d, X.ButtonPress, button)] if press else []) + \
        ([xraw.fake_input(d, X.ButtonRelease, button)] if release else [])


@dataclass(frozen=True)
class _Activating:
    """A press held back until the window manager has made `client` active."""

    client: int


def _press_job(d: Display, at: tuple[int, int] | None, button: int, activate: bool, release: bool,
               finish: bool) -> xraw.RawJob[_Activating | PointerState | None]:
    """Move to `at`, press `button` (and release it), then read the pointer if `finish`: in one write
    and at most one round trip while the pointer stays over the active window (desktop/x11/raw.py).

    With `activate`, a focusing button first asks for click-to-focus; if the window manager has not
    applied it yet, nothing is pressed and the caller waits, then calls again without `activate`.
    """
    motion = [_motion(d, *at)] if at is not None else []
    if activate and button in FOCUSING_BUTTONS:
        activation = yield from _request_activation(d, motion)
        if isinstance(activation, int):
            return _Activating(activation)
        # Looked up after the motion, just before the press, which moves nothing: that is the answer, and
        # no round trip more is needed (any window the click opens appears later anyway).
        yield xraw.sending(_buttons(d, button, True, release))
        return activation.state
    if finish:
        return (yield from look_under_pointer(d, first=[*motion, *_buttons(d, button, True, release)])).state
    yield xraw.Exchange([*motion, *_buttons(d, button, True, release), xraw.round_trip()],
                        [False] * (len(motion) + 1 + release) + [True])
    return None


def _button_job(d: Display, at: tuple[int, int] | None, button: int) -> xraw.RawJob[PointerState]:
    """Move to `at` (if given) and release `button`; the pointer afterwards."""
    motion = [_motion(d, *at)] if at is not None else []
    return (yield from look_under_pointer(d, first=[*motion, *_buttons(d, button, False, True)])).state


def _move_job(d: Display, x: int, y: int) -> xraw.RawJob[PointerState]:
    return (yield from look_under_pointer(d, first=[_motion(d, x, y)])).state


def _scroll_job(d: Display, x: int, y: int, delta_x: int, delta_y: int) -> xraw.RawJob[PointerState]:
    wheel = [_motion(d, x, y)]
    for count, positive, negative in ((delta_y, WHEEL_DOWN, WHEEL_UP), (delta_x, WHEEL_RIGHT, WHEEL_LEFT)):
        button = positive if count > 0 else negative
        wheel += _buttons(d, button, True, True) * abs(count)  # wheel buttons do not focus: no activation
    return (yield from look_under_pointer(d, first=wheel)).state


def drag_path(start: Point, end: Point, steps: int) -> Iterator[Point]:
    """`steps` evenly spaced points after `start`, the last one exactly `end`."""
    (sx, sy), (ex, ey) = start, end
    for i in range(1, steps + 1):
        yield round(sx + (ex - sx) * i / steps), round(sy + (ey - sy) * i / steps)


def drag_points(path: Sequence[Point], steps: int | None = None) -> list[Point]:
    """The motion of a drag along `path` after its press at the first point, the last exactly the path's end.

    `steps` splits a path of one segment (a REST drag's `steps`). By default each segment gets one point per
    25 px, 1-20, and a one-segment path at least 2: enough motion for drag thresholds and toolkits that track
    intermediate points (docs/mouse.md, docs/actions.md).
    """
    least = 2 if len(path) == 2 else 1
    points: list[Point] = []
    for start, end in itertools.pairwise(path):
        count = steps if steps is not None else \
            max(least, min(20, max(abs(end[0] - start[0]), abs(end[1] - start[1])) // 25))
        points.extend(drag_path(start, end, count))
    return points


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
    window, child = root, xid(reply.child)
    try:
        for _ in range(MAX_WINDOW_DEPTH):  # down to the deepest window under the pointer, as the server sees it
            if not child:
                break
            window = d.create_resource_object("window", child)
            child = xid(window.query_pointer().child)
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
    held = [button for button, bit in ((1, X.Button1Mask), (2, X.Button2Mask), (3, X.Button3Mask),
                                       (4, X.Button4Mask), (5, X.Button5Mask)) if mask & bit]
    xraw.exchange(d, [*(xraw.fake_input(d, X.ButtonRelease, b) for b in held), xraw.round_trip()],
                  [False] * len(held) + [True])


# -- waiting, on the event loop between jobs (desktop/x11/thread.py: jobs never sleep) -----------------

async def _await_active(x: XThread, client: int) -> None:
    """Until the window manager has made `client` active, for at most ACTIVATE_TIMEOUT_S."""
    deadline = time.monotonic() + ACTIVATE_TIMEOUT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.001)
        if await x.call(active_window_id) == client:
            return


async def _press(x: XThread, at: tuple[int, int] | None, button: int, release: bool,
                 finish: bool) -> PointerState | None:
    """`_press_job`, waiting for click-to-focus between its two halves when the WM is not done yet."""
    result = await x.raw(_press_job, at, button, True, release, finish)
    if isinstance(result, _Activating):
        await _await_active(x, result.client)
        result = await x.raw(_press_job, None, button, False, release, finish)
    assert not isinstance(result, _Activating)
    return result


async def _settled(x: XThread, state: PointerState | None, target: tuple[int, int] | None) -> PointerState:
    """The pointer state after an action; with a `target`, once the pointer has got there.

    The server answers QueryPointer only after the events sent before it, except while a client
    holds the pointer frozen: openbox does, briefly, after a button press on a window (its
    click-to-focus binding), and motion sent meanwhile waits in the server's queue. So a position
    that is not yet the target is read again, for at most SETTLE_POINTER_S.
    """
    if state is None:
        state = await x.raw(pointer_state)
    deadline = time.monotonic() + SETTLE_POINTER_S
    while target is not None and (state.x, state.y) != target and time.monotonic() < deadline:
        await asyncio.sleep(0.002)
        state = await x.raw(pointer_state)
    return state


async def _click(x: XThread, at: tuple[int, int], button: int, count: int) -> PointerState:
    state = None
    for i in range(count):
        if i:
            await asyncio.sleep(MULTI_CLICK_GAP_S)
        state = await _press(x, None if i else at, button, release=True, finish=i == count - 1)
    return await _settled(x, state, at)


async def _drag(x: XThread, start: Point, points: Sequence[Point], button: int, duration_s: float) -> PointerState:
    """Press at `start`, move through `points` spread over `duration_s`, release at the last."""
    try:
        await _press(x, start, button, release=False, finish=False)
        pause = duration_s / len(points) if points else 0.0
        for point in points:
            if pause:
                await asyncio.sleep(pause)
            await x.raw(_move_sync, *point)
    finally:
        # Never leave the button held, whatever failed, also when the request is cancelled (its
        # client went away): the job is queued at once and runs even if this task stops waiting.
        state = await asyncio.shield(x.raw(_button_job, None, button))
    return await _settled(x, state, points[-1] if points else start)


# -- the feature -----------------------------------------------------------------------------

class Mouse:
    """Mouse actions; stateless. X work runs on the session's X thread in short jobs, and every
    action but `position` holds the desktop's input lock for its whole run (desktop/x11/thread.py).

    With an `ActionLog`, each action is recorded once it has been validated and holds the lock,
    before it runs. With a `TakeoverGate`, agent actions wait or are refused while a person holds
    control through the live view (desktop/control/takeover.py).
    """

    def __init__(self, log: ActionLog | None = None, gate: TakeoverGate | None = None) -> None:
        self.log = log
        self.gate = gate

    def exclusive(self, session: Session) -> contextlib.AbstractAsyncContextManager[None]:
        """The input lock, once the takeover gate admits this action (a batch takes it for all its steps)."""
        if self.gate is None:
            return session.x.input
        return self.gate.admitted(session.x.input)

    def _record(self, action: LoggedAction) -> None:
        if self.log is not None:
            self.log.record(action)

    async def position(self, session: Session) -> PointerState:
        return await session.x.raw(pointer_state)

    async def move(self, session: Session, x: int, y: int) -> PointerState:
        check_point(session, x, y)
        async with self.exclusive(session):
            self._record(logged.Move(x, y))
            return await _settled(session.x, await session.x.raw(_move_job, x, y), (x, y))

    async def click(self, session: Session, x: int, y: int, button: MouseButton = MouseButton.LEFT,
                    count: int = 1) -> PointerState:
        check_point(session, x, y)
        if not 1 <= count <= MAX_CLICKS:
            raise invalid_action(f"clickCount must be between 1 and {MAX_CLICKS}", "clickCount")
        number = button_number(button)
        async with self.exclusive(session):
            self._record(logged.Click(x, y, button, count))
            return await _click(session.x, (x, y), number, count)

    async def button(self, session: Session, x: int | None, y: int | None, button: MouseButton,
                     down: bool) -> PointerState:
        if (x is None) != (y is None):
            raise invalid_action("x and y must both be provided when setting coordinates", "x" if x is None else "y")
        at = None
        if x is not None and y is not None:
            check_point(session, x, y)
            at = (x, y)
        number = button_number(button)
        async with self.exclusive(session):
            self._record((logged.MouseDown if down else logged.MouseUp)(x, y, button))
            if down:
                state = await _press(session.x, at, number, release=False, finish=True)
            else:
                state = await session.x.raw(_button_job, at, number)
            return await _settled(session.x, state, at)

    async def drag(self, session: Session, start: tuple[int, int], end: tuple[int, int],
                   button: MouseButton = MouseButton.LEFT,
                   steps: int | None = None, duration_ms: int = 0) -> PointerState:
        check_point(session, *start, x_field="startX", y_field="startY")
        check_point(session, *end, x_field="endX", y_field="endY")
        if steps is not None and not 1 <= steps <= MAX_DRAG_STEPS:
            raise invalid_action(f"steps must be between 1 and {MAX_DRAG_STEPS}", "steps")
        if not 0 <= duration_ms <= MAX_DRAG_MS:
            raise invalid_action(f"durationMs must be between 0 and {MAX_DRAG_MS}", "durationMs")
        return await self.drag_along(session, (start, end), button, duration_ms, steps=steps)

    # The one drag. A batch's drag step was built of the REST press, moves and release and had drifted from
    # it: after the press and after every point it looked up the pointer and the window under it (a round trip
    # more for each level of windows the pointer crossed) and waited for the pointer to reach the point; its
    # release was not shielded (a cancelled batch could leave the button held); its press, every move and its
    # release asked the takeover gate again (a person taking control mid-drag got the release refused too); it
    # logged a `mouse_down`, a `move` a point and a `mouse_up` with no position (42 entries for a 3-point path
    # across the screen, and a trajectory that could not replay it); and it moved a short one-segment path in
    # one point where a REST drag takes two. Both now do what the REST drag did: the gate asked once, a motion
    # and a round trip a point, the release shielded, one `drag` entry.
    async def drag_along(self, session: Session, path: Sequence[Point], button: MouseButton = MouseButton.LEFT,
                         duration_ms: int = 0, *, steps: int | None = None) -> PointerState:
        """Press at the first point of `path`, move along it (`drag_points`) over `duration_ms`, release at its
        last point: a REST drag and a batch's drag step. `path` and `duration_ms` are checked by the caller."""
        number = button_number(button)
        points = drag_points(path, steps)
        async with self.exclusive(session):  # for the whole drag: no other input lands between its steps
            self._record(logged.Drag(*path[0], *path[-1], button))
            return await _drag(session.x, path[0], points, number, duration_ms / 1000)

    async def scroll(self, session: Session, x: int, y: int, delta_x: int, delta_y: int) -> PointerState:
        check_point(session, x, y)
        if delta_x == 0 and delta_y == 0:
            raise invalid_action("deltaX or deltaY must be non-zero", "deltaY")
        for value, field in ((delta_x, "deltaX"), (delta_y, "deltaY")):
            if abs(value) > MAX_WHEEL_CLICKS:
                raise invalid_action(f"{field} must be between -{MAX_WHEEL_CLICKS} and {MAX_WHEEL_CLICKS} wheel clicks",
                                     field)
        async with self.exclusive(session):
            self._record(logged.Scroll(x, y, delta_x, delta_y))
            return await _settled(session.x, await session.x.raw(_scroll_job, x, y, delta_x, delta_y), (x, y))

    async def release_all(self, session: Session) -> None:
        """Release every button that is down; takes no lock (for error paths)."""
        await session.x.call(release_buttons)
