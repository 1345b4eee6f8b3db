"""One `type` request's steps on the X thread: the text arrives exactly as sent whatever modifiers are on.

`begin` turns Caps Lock off and lifts held Shift/AltGr for the request's duration, `type_some` types the next chunk
(binding spare keycodes for characters the layout lacks first: desktop/input/keymap.py) and `finish` puts the
modifiers back. desktop/input/keyboard.py runs them as jobs of the X thread and waits on the event loop between
them (`delayMs`, a binding's settling); the state of the request lives in `Typing`, touched only on the X thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from Xlib import X
from Xlib.display import Display

from desktop.input import key_events
from desktop.input.keymap import Keymap
from desktop.x11 import raw as xraw


@dataclass
class Typing:
    """One `type` request in progress; touched only on the X thread."""

    keysyms: list[int]
    step: int
    """Characters typed per step: 1 with a delay between characters, else a chunk."""
    index: int = 0
    display: Display | None = None
    finished: bool = False
    caps_lock: int | None = None
    """The Caps Lock keycode, when Caps Lock was on and we turned it off for the duration."""
    released: list[int] = field(default_factory=list)
    """Shift / AltGr keycodes that were held down, released for the duration."""


def begin(display: Display, keymap: Keymap, job: Typing) -> None:
    """Typed text must not depend on modifiers left on: turn Caps Lock off and lift held Shift/AltGr for the
    duration (`finish` puts them back)."""
    job.display = display
    mask = display.screen().root.query_pointer().mask
    events: list[bytes] = []
    if mask & X.LockMask and keymap.caps_lock is not None:
        job.caps_lock = keymap.caps_lock
        events += key_events.tapped(display, job.caps_lock)
    level_mask = X.ShiftMask | keymap.level3_mask
    if mask & level_mask:
        job.released = [code for code in key_events.pressed_keycodes(display)
                        if keymap.modifier_mask(code) & level_mask]
        events += (xraw.fake_input(display, X.KeyRelease, code) for code in job.released)
    if events:  # sent ahead of the first characters, whose exchange waits for the server (`type_some`)
        xraw.send(display, events)


def finish(display: Display, job: Typing) -> None:
    """Put back what `begin` lifted; once per request, whether it typed everything or stopped."""
    if job.finished:
        return
    job.finished = True
    if job.display is not display:  # never started, or the X server restarted meanwhile
        return
    events = [xraw.fake_input(display, X.KeyPress, code) for code in job.released]
    if job.caps_lock is not None:
        events += key_events.tapped(display, job.caps_lock)
    if events:  # else the last characters' exchange (`type_some`) has waited for the server already
        key_events.send(display, events)


def type_some(display: Display, keymap: Keymap, job: Typing, hold: float) -> float:
    """Type up to `job.step` characters whose unmapped keysyms fit the spare keycodes at once: one write and one
    round trip. 0.0 when some were typed, else the seconds to wait before a spare keycode may be rebound (`hold`
    after its last use) or a new binding has settled."""
    now = time.monotonic()
    start, end = job.index, min(len(job.keysyms), job.index + job.step)
    unmapped: set[int] = set()
    stop = start
    for keysym in job.keysyms[start:end]:
        if not keymap.in_layout(keysym) and keysym not in unmapped:
            if len(unmapped) >= keymap.capacity:
                break
            unmapped.add(keysym)
        stop += 1
    if stop == start:
        keymap.bind(job.keysyms[start:start + 1], now, hold)  # raises: no spare keycode at all
    keysyms = job.keysyms[start:stop]
    wait = keymap.bind(keysyms, now, hold) or keymap.settling(keysyms, now)
    if wait > 0:  # type what is mapped already while the LRU victims age or clients read the new mapping
        ready = start
        while ready < stop and keymap.stroke(job.keysyms[ready]) is not None \
                and not keymap.settling(job.keysyms[ready:ready + 1], now):
            ready += 1
        if ready == start:
            return wait
        stop = ready
    strokes = [keymap.stroke(k) for k in job.keysyms[start:stop]]
    key_events.send(display, key_events.typed(display, keymap, [s for s in strokes if s is not None], now))
    job.index = stop
    return 0.0
