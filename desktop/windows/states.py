"""Window states through the window manager: minimise, maximise, restore, raise, always on top, close.

Each change is an EWMH/ICCCM client message to the root window (the window manager acts on it), then
a read back until the state shows or `STATE_TIMEOUT_S` passes: the answer is the window as the X
server has it, so a refused request shows as an unchanged state rather than a claimed success.
Requests are short jobs on the desktop's X thread; every wait is on the event loop between them.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from Xlib import X
from Xlib.display import Display
from Xlib.protocol import request

from desktop.windows.control import SOURCE_PAGER, managed, send_root_message
from desktop.windows.query import (
    ICONIC_STATE,
    WindowInfo,
    WindowNotViewable,
    client_window_ids,
    describe_windows,
    root_cardinals,
)
from desktop.x11.session import Session
from desktop.x11.thread import XThread

STATE_TIMEOUT_S = 1.0
"""How long a state change may take to show before the window is answered as it is."""
FORCE_TIMEOUT_S = 2.0
"""How long a killed client's windows may take to go."""
POLL_S = 0.01
STEADY_READS = 2
"""Reads in a row that must agree after a state showed: the window manager may still be placing the window."""
_NET_WM_STATE_REMOVE, _NET_WM_STATE_ADD = 0, 1
_MAXIMIZED = ("_NET_WM_STATE_MAXIMIZED_VERT", "_NET_WM_STATE_MAXIMIZED_HORZ")

T = TypeVar("T")


class WindowCommand(enum.StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"
    RESTORE = "restore"
    RAISE = "raise"


@dataclass(frozen=True)
class Closed:
    """How a close went: `closed` once the window left the window manager's list."""

    window_id: int
    closed: bool
    forced: bool
    """Whether the polite request ran out of time and the client was disconnected (XKillClient)."""
    elapsed_s: float


def _wm_state(d: Display, wid: int, action: int, *names: str) -> None:
    atoms = [d.get_atom(name) for name in names] + [0, 0]
    send_root_message(d, wid, "_NET_WM_STATE", [action, atoms[0], atoms[1], SOURCE_PAGER])


def _activate(d: Display, wid: int) -> None:
    # From a pager, openbox de-iconifies the window, raises it and gives it the focus.
    send_root_message(d, wid, "_NET_ACTIVE_WINDOW", [SOURCE_PAGER, X.CurrentTime, 0])


def _command(d: Display, wid: int, command: WindowCommand) -> WindowInfo:
    """Send the request for `command`; the window as it was before."""
    info = managed(d, wid, hidden=True)
    match command:
        case WindowCommand.MINIMIZE:
            send_root_message(d, wid, "WM_CHANGE_STATE", [ICONIC_STATE])  # ICCCM 4.1.4: iconify
        case WindowCommand.MAXIMIZE:
            if info.minimized:
                _activate(d, wid)
            _wm_state(d, wid, _NET_WM_STATE_ADD, *_MAXIMIZED)
        case WindowCommand.RESTORE:
            if info.minimized:
                _activate(d, wid)
            if info.maximized:
                _wm_state(d, wid, _NET_WM_STATE_REMOVE, *_MAXIMIZED)
        case WindowCommand.RAISE:
            if not info.viewable:
                raise WindowNotViewable.of(info, "a minimised window cannot be raised")
            send_root_message(d, wid, "_NET_RESTACK_WINDOW", [SOURCE_PAGER, X.NONE, X.Above])
    return info


def _done(command: WindowCommand) -> Callable[[WindowInfo], bool]:
    match command:
        case WindowCommand.MINIMIZE:
            return lambda w: w.minimized
        case WindowCommand.MAXIMIZE:
            return lambda w: w.maximized and w.viewable
        case WindowCommand.RESTORE:
            return lambda w: w.viewable and not w.minimized and not w.maximized
        case WindowCommand.RAISE:
            return lambda w: True  # checked on the stacking order (`_on_top`)


def _on_top(d: Display, wid: int) -> tuple[WindowInfo, bool]:
    """The window, and whether it is the highest of its layer (always-on-top windows stay above others)."""
    info = managed(d, wid, hidden=True)
    stacking = root_cardinals(d, "_NET_CLIENT_LIST_STACKING")  # bottom to top
    if wid not in stacking:
        return info, False
    above = describe_windows(d, stacking[stacking.index(wid) + 1:], hidden=True)
    return info, all(w.above and not info.above for w in above)


def _set_above(d: Display, wid: int, enabled: bool) -> WindowInfo:
    info = managed(d, wid, hidden=True)
    _wm_state(d, wid, _NET_WM_STATE_ADD if enabled else _NET_WM_STATE_REMOVE, "_NET_WM_STATE_ABOVE")
    return info


def _close(d: Display, wid: int) -> None:
    managed(d, wid, hidden=True)
    # The window manager sends WM_DELETE_WINDOW to a client that takes part in it, and disconnects one
    # that does not (openbox's client_close): the polite way whatever the application supports.
    send_root_message(d, wid, "_NET_CLOSE_WINDOW", [X.CurrentTime, SOURCE_PAGER])


def _kill_client(d: Display, wid: int) -> None:
    """Disconnect the window's X client (XKillClient, as xkill does): all its windows go at once."""
    request.KillClient(display=d.display, resource=wid)
    d.sync()


def _gone(d: Display, wid: int) -> bool:
    return wid not in client_window_ids(d)


async def poll(x: XThread, job: Callable[..., T], args: tuple[object, ...], done: Callable[[T], bool],
               timeout_s: float) -> T:
    """Run `job` on the X thread until `done(result)` or the timeout; the last result."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await x.call(job, *args)
        if done(result) or time.monotonic() > deadline:
            return result
        await asyncio.sleep(POLL_S)


# Each change holds the desktop's input lock while its request is sent and read back (it changes where
# input lands, like focus and move in desktop/windows/control.py).


async def change(session: Session, wid: int, command: WindowCommand) -> WindowInfo:
    async with session.x.input:
        before = await session.x.call(_command, wid, command)
        if command == WindowCommand.RAISE:
            info, _top = await poll(session.x, _on_top, (wid,), lambda r: r[1], STATE_TIMEOUT_S)
            return info
        done = _done(command)
        # Openbox sets _NET_WM_STATE before it resizes the frame: a change of size waits for the new size.
        resized = (command == WindowCommand.MAXIMIZE and not before.maximized) or (
            command == WindowCommand.RESTORE and before.maximized)
        return await _settled(session.x, wid, lambda w: done(w) and (not resized or w.client != before.client))


async def _settled(x: XThread, wid: int, done: Callable[[WindowInfo], bool]) -> WindowInfo:
    """The window once `done` holds and it reads the same `STEADY_READS` times (or at the timeout)."""
    deadline = time.monotonic() + STATE_TIMEOUT_S
    same, last = 0, None
    while True:
        info = await x.call(managed, wid, True)
        same = same + 1 if info == last and done(info) else 0
        if same >= STEADY_READS or time.monotonic() > deadline:
            return info
        last = info
        await asyncio.sleep(POLL_S)


async def set_above(session: Session, wid: int, enabled: bool) -> WindowInfo:
    async with session.x.input:
        await session.x.call(_set_above, wid, enabled)
        return await _settled(session.x, wid, lambda w: w.above == enabled)


async def close(session: Session, wid: int, timeout_s: float, force: bool) -> Closed:
    """Ask politely, wait up to `timeout_s`, then (with `force`) disconnect the client.

    The input lock is held only while a request is sent: waiting for an application to exit must not
    hold up input to the other windows."""
    began = time.monotonic()
    async with session.x.input:
        await session.x.call(_close, wid)
    gone = await poll(session.x, _gone, (wid,), bool, timeout_s)
    forced = False
    if not gone and force:
        async with session.x.input:
            await session.x.call(_kill_client, wid)
        forced = True
        gone = await poll(session.x, _gone, (wid,), bool, FORCE_TIMEOUT_S)
    return Closed(wid, gone, forced, time.monotonic() - began)
