"""Focus, move and resize windows through EWMH client messages, then read back what the WM applied.

Positions and sizes are the client area (see desktop/windows/query.py). A move asks the window manager
to put the frame where the client area lands on `x`, `y` (frame extents from `_NET_FRAME_EXTENTS`).
Window states (minimise, maximise, always on top, raise, close) are in desktop/windows/states.py.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from Xlib import X
from Xlib.display import Display

from desktop.core.errors import NoFocusedWindow, WindowNotFound, invalid_action
from desktop.windows.capture import WindowCapture
from desktop.windows.query import WindowInfo, active_window_id, client_window_ids, describe_windows, list_windows
from desktop.x11 import raw as xraw
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from sandbox_desktop_wire.limits import MAX_WINDOW_COORDINATE

SOURCE_PAGER = 2  # EWMH source indication: a pager or tool acting for the user
NORTHWEST_GRAVITY = 1
_MOVE_FLAGS = (1 << 8) | (1 << 9)
_SIZE_FLAGS = (1 << 10) | (1 << 11)
SETTLE_TIMEOUT_S = 1.0
MAX_COORDINATE = MAX_WINDOW_COORDINATE


def parse_window_id(text: str) -> int:
    """Decimal X id (as listed), or 0x-prefixed hex; anything else is a 404 naming it."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        value = -1
    if not 0 < value < 2**32:
        raise WindowNotFound(f"Window {text} not found")
    return value


@dataclass(frozen=True)
class WindowFilter:
    """Which windows a listing keeps; every given criterion must hold."""

    pid: int | None = None
    wm_class: str | None = None
    """Equal to WM_CLASS's instance or class name, ignoring case."""
    title: re.Pattern[str] | None = None
    """Searched in the title (`re.search`)."""
    minimized: bool = False
    """Keep minimised windows too."""

    def keeps(self, w: WindowInfo) -> bool:
        if self.pid is not None and w.pid != self.pid:
            return False
        if self.wm_class is not None and (w.wm_class is None
                                          or self.wm_class.casefold() not in (n.casefold() for n in w.wm_class)):
            return False
        return self.title is None or self.title.search(w.title) is not None


def managed(d: Display, wid: int, hidden: bool = False) -> WindowInfo:
    """The managed window: 404 when unknown or (unless `hidden`) minimised."""
    if wid not in client_window_ids(d):
        raise WindowNotFound(f"Window {wid} not found")
    found = describe_windows(d, [wid], hidden=hidden)
    if not found:
        raise WindowNotFound(f"Window {wid} is not a visible application window")
    return found[0]


def root_message(d: Display, wid: int, name: str, data: list[int]) -> bytes:
    """The client message (EWMH, ICCCM) asking the window manager `name` about `wid`, as a raw request
    (desktop/x11/raw.py): what `send_root_message` sends, and what a pointer job writes in its own exchange."""
    return xraw.client_message(d.screen().root.id, X.SubstructureRedirectMask | X.SubstructureNotifyMask, wid,
                               d.get_atom(name), data)


def send_root_message(d: Display, wid: int, name: str, data: list[int]) -> None:
    xraw.send(d, [root_message(d, wid, name, data)])


def _request_focus(d: Display, wid: int) -> WindowInfo:
    """Ask the WM to activate the window; the window as it is right after."""
    managed(d, wid)
    send_root_message(d, wid, "_NET_ACTIVE_WINDOW", [SOURCE_PAGER, X.CurrentTime, 0])
    return managed(d, wid)


def _request_move_resize(d: Display, wid: int, flags: int, x: int, y: int, width: int,
                         height: int) -> tuple[WindowInfo, WindowInfo]:
    """Ask the WM to move/resize the window; the window before the request and right after."""
    before = managed(d, wid)
    # NorthWestGravity positions the frame; the frame extents turn our client-area target into it.
    left, top = before.client.x - before.frame.x, before.client.y - before.frame.y
    send_root_message(d, wid, "_NET_MOVERESIZE_WINDOW",
                       [NORTHWEST_GRAVITY | flags | (SOURCE_PAGER << 12), x - left, y - top, width, height])
    return before, managed(d, wid)


async def _settle(x: XThread, wid: int, info: WindowInfo, done: Callable[[WindowInfo], bool],
                  before: WindowInfo | None = None) -> WindowInfo:
    """Poll until `done(info)` holds, or the window changed from `before` and then stopped changing.

    The second case covers a window manager or application that adjusts the request (terminals
    round sizes to character cells); SETTLE_TIMEOUT_S bounds a request that is refused outright.
    Each read is one short job on the X thread; the waits between them are on the event loop
    (desktop/x11/thread.py: jobs never sleep).
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last = None
    stable = 0
    while True:
        if done(info):
            return info
        stable = stable + 1 if info == last else 0
        changed = before is not None and info.client != before.client
        if (changed and stable >= 5) or time.monotonic() > deadline:
            return info
        last = info
        await asyncio.sleep(0.003)
        info = await x.call(managed, wid)


def _applied(flags: int, x: int, y: int, width: int, height: int) -> Callable[[WindowInfo], bool]:
    def applied(info: WindowInfo) -> bool:
        if flags & _MOVE_FLAGS and (info.client.x, info.client.y) != (x, y):
            return False
        return not (flags & _SIZE_FLAGS and (info.client.width, info.client.height) != (width, height))

    return applied


def _focused(d: Display) -> WindowInfo:
    wid = active_window_id(d)
    found = describe_windows(d, [wid]) if wid else []
    if not found:
        raise NoFocusedWindow("No window has the focus")
    return found[0]


class Windows:
    """Window queries and actions on the session's X thread.

    Focus, move and resize hold the desktop's input lock (desktop/x11/thread.py): they change where
    input lands, so they stay ordered with mouse and keyboard actions as they were when everything
    ran as one job each. The queries take no lock. Captures run on their own thread (`capture`,
    desktop/windows/capture.py).
    """

    def __init__(self) -> None:
        self.capture: WindowCapture = WindowCapture()

    def start(self, display: str) -> None:
        """Begin redirecting the display's windows for captures (once the X server is up; not waited for)."""
        self.capture.start(display)

    async def close(self) -> None:
        await self.capture.close()

    async def list(self, session: Session, where: WindowFilter | None = None) -> list[WindowInfo]:
        if where is None:
            return await session.x.call(list_windows)
        windows = await session.x.call(functools.partial(list_windows, hidden=where.minimized))
        return [w for w in windows if where.keeps(w)]

    async def focused(self, session: Session) -> WindowInfo:
        return await session.x.call(_focused)

    async def focus(self, session: Session, window_id: str) -> WindowInfo:
        wid = parse_window_id(window_id)
        async with session.x.input:
            info = await session.x.call(_request_focus, wid)
            return await _settle(session.x, wid, info, lambda found: found.is_active)

    async def move(self, session: Session, window_id: str, x: int, y: int) -> WindowInfo:
        wid = parse_window_id(window_id)
        for value, field in ((x, "x"), (y, "y")):
            if abs(value) > MAX_COORDINATE:
                raise invalid_action(f"{field} must be between -{MAX_COORDINATE} and {MAX_COORDINATE}", field)
        return await self._move_resize(session, wid, _MOVE_FLAGS, x, y, 0, 0)

    async def resize(self, session: Session, window_id: str, width: int, height: int) -> WindowInfo:
        wid = parse_window_id(window_id)
        for value, field in ((width, "width"), (height, "height")):
            if not 0 < value <= MAX_COORDINATE:
                raise invalid_action(f"{field} must be between 1 and {MAX_COORDINATE}", field)
        return await self._move_resize(session, wid, _SIZE_FLAGS, 0, 0, width, height)

    @staticmethod
    async def _move_resize(session: Session, wid: int, flags: int, x: int, y: int, width: int,
                           height: int) -> WindowInfo:
        async with session.x.input:
            before, info = await session.x.call(_request_move_resize, wid, flags, x, y, width, height)
            return await _settle(session.x, wid, info, _applied(flags, x, y, width, height), before)
