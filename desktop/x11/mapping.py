"""The keyboard mapping changes a connection has been told of: what lets a cached keymap stay valid between actions.

The X server sends every client a MappingNotify when the keyboard or modifier mapping changes, whoever changed it
(`setxkbmap`, `xmodmap`, an app, our own spare-keycode bindings: desktop/input/keymap.py). Reading the whole
mapping again costs two round trips and parsing ~250 keycodes, which every key action paid before; counting these
events instead, each connection's keymap is read again only after a change (docs/keyboard.md, "Layouts").

The X threads parse and drop whatever events their connections receive (nothing on them selects any, but these
arrive regardless); `drain` counts the mapping changes among them. A raw exchange (desktop/x11/raw.py `Replies`)
counts those it reads among its replies and keeps them from python-xlib (which would parse the events handed back
to it only once more data arrived, too late for the next key): so a change is counted once, however it was read.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from Xlib import X
from Xlib.display import Display

_changes: WeakKeyDictionary[Any, int] = WeakKeyDictionary()
"""Per connection (python-xlib's protocol-level display, which raw exchanges see), the changes told of so far."""


def told(p: Any, request: int) -> None:
    """A MappingNotify for `request` (X.MappingModifier, X.MappingKeyboard or X.MappingPointer) arrived on `p`."""
    if request != X.MappingPointer:
        _changes[p] = _changes.get(p, 0) + 1


def drain(display: Display) -> None:
    """Parse and drop the events python-xlib has read, or can read now without blocking, counting the keyboard and
    modifier mapping changes among them."""
    while display.pending_events():
        event = display.next_event()
        if event.type == X.MappingNotify:
            told(display.display, event.request)


def changes(display: Display) -> int:
    """How many keyboard or modifier mapping changes `display` has been told of so far."""
    return _changes.get(display.display, 0)
