"""The key events of chords pressed, held and released and of text typed, built without I/O from a keymap's strokes.

The X thread's steps (desktop/input/keyboard.py, desktop/input/typing_steps.py) send them after binding what a chord
lacks; the raw jobs send the same events from the event loop when nothing needs binding or reading
(desktop/x11/on_loop.py), so each key action is built once whichever side sends it. `Held` is the keys `down`
pressed and `up` has not released yet. `send` and `pressed_keycodes` are the two calls here that reach the server,
on the X thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from Xlib import X
from Xlib.display import Display

from desktop.input.keymap import Keymap, Stroke
from desktop.x11 import raw as xraw

Held = dict[int, list[int]]
"""keysym -> the keycodes a `down` pressed for it (the key, and Shift/AltGr when it took them), until its `up`."""


def synced(display: Display, events: Sequence[bytes]) -> xraw.Exchange:
    """`events` in one write, and a round trip: the server has handled them when it is answered."""
    return xraw.Exchange([*events, xraw.round_trip()], [False] * len(events) + [True])


def send(display: Display, events: Sequence[bytes] = ()) -> None:
    """`synced(events)` from the X thread: when it returns, the server has handled them and all sent before."""
    step = synced(display, events)
    xraw.exchange(display, step.requests, step.answered)


def pressed_keycodes(display: Display) -> list[int]:
    """Keycodes the server reports down (QueryKeymap, a round trip, on the X thread)."""
    bits = display.query_keymap()
    return [i * 8 + b for i, byte in enumerate(bits) for b in range(8) if byte >> b & 1]


def tapped(display: Display, keycode: int) -> list[bytes]:
    """A press and release of `keycode`."""
    return [xraw.fake_input(display, X.KeyPress, keycode), xraw.fake_input(display, X.KeyRelease, keycode)]


def typed(display: Display, keymap: Keymap, strokes: Sequence[Stroke], now: float) -> list[bytes]:
    """Each stroke pressed and released, its Shift/AltGr held only as long as the strokes in a row need it."""
    events: list[bytes] = []
    held: list[int] = []
    for stroke in strokes:
        for code in [c for c in held if c not in stroke.modifiers]:
            events.append(xraw.fake_input(display, X.KeyRelease, code))
            held.remove(code)
        for code in stroke.modifiers:
            if code not in held:
                events.append(xraw.fake_input(display, X.KeyPress, code))
                held.append(code)
        events += tapped(display, stroke.keycode)
        keymap.use(stroke.keycode, now)
    events += (xraw.fake_input(display, X.KeyRelease, code) for code in reversed(held))
    return events


def press(display: Display, keymap: Keymap, strokes: Sequence[Stroke], chords: Sequence[Sequence[int]],
          held: Held) -> list[bytes]:
    """Each chord's keys pressed in order and released in reverse (Shift/AltGr as the strokes need them); keys held
    by a `down` are neither pressed nor released."""
    held_by_us = {code for codes in held.values() for code in codes}
    now = time.monotonic()
    events: list[bytes] = []
    position = 0
    for chord in chords:
        pressed: list[int] = []
        for stroke in strokes[position:position + len(chord)]:
            for code in (*stroke.modifiers, stroke.keycode):
                if code not in pressed and code not in held_by_us:
                    events.append(xraw.fake_input(display, X.KeyPress, code))
                    pressed.append(code)
            keymap.use(stroke.keycode, now)
        events += (xraw.fake_input(display, X.KeyRelease, code) for code in reversed(pressed))
        position += len(chord)
    return events


def down_codes(strokes: Sequence[Stroke], with_levels: bool, held: Held) -> list[int]:
    """The keycodes a `down` of these strokes presses, in order: not those held already."""
    held_by_us = {code for codes in held.values() for code in codes}
    pressed: list[int] = []
    for stroke in strokes:
        for code in (*stroke.modifiers, stroke.keycode) if with_levels else (stroke.keycode,):
            if code not in held_by_us and code not in pressed:
                pressed.append(code)
    return pressed


def hold(keymap: Keymap, keysyms: Sequence[int], strokes: Sequence[Stroke], with_levels: bool,
         pressed: Sequence[int], held: Held) -> None:
    """Record what a `down` pressed (once its events are sent): its keys are held, their keycodes never rebound."""
    for keysym, stroke in zip(keysyms, strokes, strict=True):
        codes = (*stroke.modifiers, stroke.keycode) if with_levels else (stroke.keycode,)
        held.setdefault(keysym, []).extend(c for c in codes if c in pressed)
        keymap.pinned.add(stroke.keycode)


def up(display: Display, keymap: Keymap, keysyms: Sequence[int], held: Held) -> list[bytes]:
    """The releases of `keysyms`, last first: what their `down` pressed, else each one's key; no longer held."""
    now = time.monotonic()
    events: list[bytes] = []
    for keysym in reversed(keysyms):
        codes = held.pop(keysym, None)
        if codes is None:
            stroke = keymap.stroke(keysym)
            codes = [stroke.keycode] if stroke is not None else []
        for code in reversed(codes):
            events.append(xraw.fake_input(display, X.KeyRelease, code))
            keymap.pinned.discard(code)
            keymap.use(code, now)
    return events
