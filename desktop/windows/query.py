"""Window queries through EWMH (runs inside an XThread; every function takes the Display).

Geometry convention: `x`, `y`, `width`, `height` are the *client area* (what the application
draws, in root coordinates); `frame` adds the window manager's decorations from
`_NET_FRAME_EXTENTS`. Requests for all windows are pipelined (python-xlib's `defer=True`), so a
list of ten windows costs about one round trip instead of seventy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import request

from desktop.core.errors import DomainError
from sandbox_desktop_wire.problems import ProblemCode

_SKIPPED_TYPES = ("_NET_WM_WINDOW_TYPE_DOCK", "_NET_WM_WINDOW_TYPE_DESKTOP")
_MAXIMIZED = ("_NET_WM_STATE_MAXIMIZED_VERT", "_NET_WM_STATE_MAXIMIZED_HORZ")
ICONIC_STATE = 3  # ICCCM WM_STATE / WM_CHANGE_STATE: IconicState
_GONE = (xerror.BadWindow, xerror.BadDrawable, xerror.BadMatch, xerror.BadValue)
# Titles longer than this many 32-bit units are fetched again in full.
_TITLE_UNITS = 256


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class WindowInfo:
    """A top-level application window as the window manager manages it."""

    id: int
    title: str
    client: Rect
    frame: Rect
    is_active: bool
    pid: int | None
    viewable: bool = True
    """Mapped and shown; a minimised (iconic) window is not, and has no pixels to capture or click."""
    minimized: bool = False
    maximized: bool = False
    """Maximised both ways (`_NET_WM_STATE_MAXIMIZED_VERT` and `_HORZ`)."""
    above: bool = False
    """Always on top (`_NET_WM_STATE_ABOVE`)."""
    wm_class: tuple[str, str] | None = None
    """WM_CLASS: (instance name, class name), e.g. ("xterm", "XTerm")."""


class WindowNotViewable(DomainError):
    """A managed window with nothing on screen (minimised or unmapped): no pixels to capture or click in."""

    code = ProblemCode.WINDOW_NOT_VIEWABLE

    @classmethod
    def of(cls, info: WindowInfo, why: str = "") -> WindowNotViewable:
        state = "minimized" if info.minimized else "unmapped"
        return cls(f"Window {info.id} is {state}{' (' + why + ')' if why else ''}: restore it first "
                   f"(POST /v1/desktop/windows/{info.id}/restore)", windowId=str(info.id), windowState=state)


def _get_property(d: Display, wid: int, name: str | int, length: int = 64) -> request.GetProperty:
    atom = d.get_atom(name) if isinstance(name, str) else name
    return request.GetProperty(display=d.display, defer=True, delete=False, window=wid, property=atom,
                               type=X.AnyPropertyType, long_offset=0, long_length=length)


def _values(req: request.GetProperty) -> list[Any]:
    """A property reply's values ([] when unset)."""
    req.reply()
    if not req.property_type:
        return []
    fmt, data = req.value
    return list(data) if fmt else []


def _text(d: Display, wid: int, req: request.GetProperty, name: str | int) -> str:
    req.reply()
    if req.bytes_after:
        req = _get_property(d, wid, name, length=req.bytes_after // 4 + _TITLE_UNITS + 1)
        req.reply()
    if not req.property_type:
        return ""
    _fmt, value = req.value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def root_cardinals(d: Display, name: str) -> list[int]:
    """A CARDINAL/WINDOW list property of the root window."""
    req = _get_property(d, d.screen().root.id, name, length=4096)
    req.reply()
    return [int(v) for v in _values(req)]


def active_window_id(d: Display) -> int | None:
    """`_NET_ACTIVE_WINDOW`, or None when nothing has focus."""
    values = root_cardinals(d, "_NET_ACTIVE_WINDOW")
    return values[0] if values and values[0] else None


def client_window_ids(d: Display) -> list[int]:
    """`_NET_CLIENT_LIST`: the windows the window manager manages, in mapping order."""
    return root_cardinals(d, "_NET_CLIENT_LIST")


class _WindowQuery:
    """Every request needed to describe one window, sent without waiting for replies."""

    def __init__(self, d: Display, wid: int, root: int) -> None:
        self.wid = wid
        self.types = _get_property(d, wid, "_NET_WM_WINDOW_TYPE")
        self.attributes = request.GetWindowAttributes(display=d.display, defer=True, window=wid)
        self.geometry = request.GetGeometry(display=d.display, defer=True, drawable=wid)
        self.origin = request.TranslateCoords(display=d.display, defer=True, src_wid=wid, dst_wid=root,
                                              src_x=0, src_y=0)
        self.extents = _get_property(d, wid, "_NET_FRAME_EXTENTS")
        self.pid = _get_property(d, wid, "_NET_WM_PID")
        self.net_name = _get_property(d, wid, "_NET_WM_NAME", _TITLE_UNITS)
        self.wm_name = _get_property(d, wid, Xatom.WM_NAME, _TITLE_UNITS)
        self.states = _get_property(d, wid, "_NET_WM_STATE")
        self.wm_state = _get_property(d, wid, "WM_STATE", 2)
        self.wm_class = _get_property(d, wid, Xatom.WM_CLASS)

    def result(self, d: Display, active: int | None, atoms: _Atoms, hidden: bool) -> WindowInfo | None:
        """Collect the replies; None for a window that vanished or is not a normal one, or is not
        mapped (unless `hidden` asks for minimised windows too)."""
        try:
            if atoms.skipped & set(_values(self.types)):
                return None
            self.attributes.reply()
            viewable = self.attributes.map_state == X.IsViewable
            states = set(_values(self.states))
            wm_state = _values(self.wm_state)
            minimized = atoms.hidden in states or bool(wm_state and wm_state[0] == ICONIC_STATE)
            if not viewable and not (hidden and minimized):
                return None
            self.geometry.reply()
            self.origin.reply()
            extents = _values(self.extents) or [0, 0, 0, 0]
            pids = _values(self.pid)
            title = _text(d, self.wid, self.net_name, "_NET_WM_NAME")
            if not title:
                title = _text(d, self.wid, self.wm_name, Xatom.WM_NAME)
            wm_class = _wm_class(self.wm_class)
        except _GONE:
            return None  # destroyed between listing and querying
        x, y = int(self.origin.x), int(self.origin.y)
        width, height = int(self.geometry.width), int(self.geometry.height)
        left, right, top, bottom = (int(v) for v in extents[:4])
        return WindowInfo(
            id=self.wid,
            title=title,
            client=Rect(x, y, width, height),
            frame=Rect(x - left, y - top, width + left + right, height + top + bottom),
            is_active=self.wid == active,
            pid=int(pids[0]) if pids else None,
            viewable=viewable,
            minimized=minimized,
            maximized=atoms.maximized <= states,
            above=atoms.above in states,
            wm_class=wm_class,
        )


def _wm_class(req: request.GetProperty) -> tuple[str, str] | None:
    """WM_CLASS's two NUL-terminated strings (instance, class), or None when unset."""
    req.reply()
    if not req.property_type:
        return None
    _fmt, value = req.value
    raw = value if isinstance(value, bytes) else str(value).encode()
    parts = raw.decode("utf-8", "replace").split("\0")
    return (parts[0], parts[1] if len(parts) > 1 else "")


@dataclass(frozen=True)
class _Atoms:
    skipped: frozenset[int]
    hidden: int
    maximized: frozenset[int]
    above: int

    @classmethod
    def of(cls, d: Display) -> _Atoms:
        return cls(frozenset(d.get_atom(name) for name in _SKIPPED_TYPES), d.get_atom("_NET_WM_STATE_HIDDEN"),
                   frozenset(d.get_atom(name) for name in _MAXIMIZED), d.get_atom("_NET_WM_STATE_ABOVE"))


def describe_windows(d: Display, wids: list[int], *, hidden: bool = False) -> list[WindowInfo]:
    """Describe these windows with all requests in flight at once; `hidden` keeps minimised ones."""
    root = d.screen().root.id
    active_req = _get_property(d, root, "_NET_ACTIVE_WINDOW")
    queries = [_WindowQuery(d, wid, root) for wid in wids]
    active_values = _values(active_req)
    active = int(active_values[0]) if active_values and active_values[0] else None
    atoms = _Atoms.of(d)
    found = (q.result(d, active, atoms, hidden) for q in queries)
    return [w for w in found if w is not None]


def list_windows(d: Display, *, hidden: bool = False) -> list[WindowInfo]:
    """Visible, managed application windows (docks, the desktop and unmapped windows left out;
    minimised ones kept when `hidden`)."""
    return describe_windows(d, client_window_ids(d), hidden=hidden)


def close_other_clients(d: Display) -> int:
    """Disconnect the X client of every managed window (XKillClient): what a fresh desktop would not have.
    The window manager's own windows are not client windows, so it stays; returns how many were closed."""
    windows = list_windows(d)
    for window in windows:
        request.KillClient(display=d.display, onerror=None, resource=window.id)
    d.sync()
    return len(windows)
