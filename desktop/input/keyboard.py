"""The keyboard through XTest, in-process: type any Unicode text, press chords, hold and release keys.

Every X call is a short job of the session's X thread (`session.x`) that never sleeps; a press, a `down` or an
`up` whose keys are all in the mapping is a raw job the event loop runs itself while the thread is idle (one write,
one round trip: desktop/input/key_events.py, docs/keyboard.md "Layouts"). The waits between characters (`delayMs`)
and for spare keycodes are on the event loop; a `type` request's steps are desktop/input/typing_steps.py.
Keyboard requests hold the desktop's input lock (`session.x.input`, desktop/x11/thread.py) for their whole
duration, as mouse and window actions do: two concurrent `type` requests never interleave, and no click or drag
lands between the characters of a text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import cast

from Xlib import X
from Xlib.display import Display

from desktop.control.takeover import TakeoverGate
from desktop.core.errors import DesktopInactive, InputFailed
from desktop.events import action_log as logged
from desktop.events.action_log import MAX_TEXT_CHARS, ActionLog, LoggedAction, chord_name, keysym_text
from desktop.input import key_events, typing_steps
from desktop.input.keymap import Keymap, Stroke
from desktop.input.keys import invalid_key, text_keysyms
from desktop.x11 import raw as xraw
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from sandbox_desktop_wire.limits import MAX_TYPE_DELAY_MS

logger = logging.getLogger("sandbox_desktop.keyboard")

DEFAULT_DELAY_MS = 10
MAX_DELAY_MS = MAX_TYPE_DELAY_MS
CHUNK_CHARS = 200
"""Characters typed per input-thread call at delayMs 0 (about 7 ms of X work)."""
HOLD_S = 0.25
"""A bound keycode is not rebound until this long after its last key event."""
IDLE_RESTORE_S = 5.0
"""Bindings unused for this long are removed, leaving the layout as it was. An app reads a key typed through a
binding with the binding it finds then: one starved of CPU (a loaded CI machine) once read it after 1.5 s, the
binding already gone, and lost the character."""
_MAX_ROUNDS = 10_000


def check_delay(delay_ms: int) -> None:
    """`delayMs` must lie in 0..MAX_DELAY_MS (400 naming the field)."""
    if not 0 <= delay_ms <= MAX_DELAY_MS:
        raise invalid_key(f"delayMs must be between 0 and {MAX_DELAY_MS}", "delayMs")


class Keyboard:
    """XTest keyboard for the desktop; `hold` and `idle_restore` tune the spare-keycode LRU."""

    def __init__(self, hold: float = HOLD_S, idle_restore: float = IDLE_RESTORE_S,
                 log: ActionLog | None = None, gate: TakeoverGate | None = None) -> None:
        self.hold = hold
        self.log = log
        self.gate = gate
        """Agent input waits or is refused while a person holds control (desktop/control/takeover.py)."""
        self.idle_restore = idle_restore
        self._x: XThread | None = None
        self._restorer: asyncio.Task[None] | None = None
        self._restore_at = 0.0
        """When the keyboard will have been idle long enough for `_restore_idle` (monotonic)."""
        self._generation = 0
        # Input-thread state: the keymap of the current connection, and keys held by key_down.
        self._keymap: Keymap | None = None
        self._held: key_events.Held = {}

    # -- public API (event loop) -----------------------------------------------------------------

    async def type_text(self, session: Session, text: str, delay_ms: int = DEFAULT_DELAY_MS) -> None:
        """Type `text` exactly, whatever the layout, Shift, AltGr or Caps Lock state."""
        check_delay(delay_ms)
        await self.type_keysyms(session, text_keysyms(text), delay_ms)

    async def type_keysyms(self, session: Session, keysyms: list[int], delay_ms: int = DEFAULT_DELAY_MS) -> None:
        """Type keysyms from `text_keysyms`, `delay_ms` apart (0: in chunks, as fast as possible)."""
        job = typing_steps.Typing(keysyms, step=1 if delay_ms > 0 else CHUNK_CHARS)
        async with self._exclusive(session) as generation:
            text = keysym_text(keysyms)
            self._record(logged.Type(len(text), text[:MAX_TEXT_CHARS]))
            try:
                for _ in range(2 * len(job.keysyms) + _MAX_ROUNDS):
                    wait = await session.x.call(self._type_step, job)
                    if job.finished:
                        return
                    await asyncio.sleep(max(wait, delay_ms / 1000))
                    if generation != self._generation:
                        raise DesktopInactive("the desktop stopped while typing")
                raise InputFailed("typing made no progress; the keymap keeps changing")
            finally:
                if not job.finished and generation == self._generation:
                    await session.x.call(typing_steps.finish, job)

    async def press_chords(self, session: Session, chords: list[list[int]]) -> None:
        """Press and release each chord in turn (keys in order, released in reverse)."""
        async with self._exclusive(session):
            self._record(logged.Press(" ".join(chord_name(chord) for chord in chords)))
            if not await session.x.raw(self._press_job, chords):
                await self._until_bound(session, self._press_step, chords)

    async def press_keysyms(self, session: Session, keysyms: list[int]) -> None:
        """Press and release one chord of keysyms, e.g. `parse_chord("ctrl+shift+t")`."""
        await self.press_chords(session, [keysyms])

    async def chord_down(self, session: Session, keysyms: list[int]) -> None:
        """Hold the keys of a chord (with Shift/AltGr when a key needs it) until `chord_up`."""
        async with self._exclusive(session):
            self._record(logged.KeyDown(chord_name(keysyms)))
            if not await session.x.raw(self._down_job, keysyms, True):
                await self._until_bound(session, self._down_step, keysyms, True)

    async def chord_up(self, session: Session, keysyms: list[int]) -> None:
        """Release what `chord_down` (or `key_down`) pressed for these keysyms, in reverse order."""
        async with self._exclusive(session):
            self._record(logged.KeyUp(chord_name(keysyms)))
            if not await session.x.raw(self._up_job, keysyms):
                await session.x.call(self._up, keysyms)

    async def key_down(self, session: Session, keysym: int) -> None:
        """Press one raw keysym without adding modifiers (the live view sends its own)."""
        async with self._exclusive(session):
            self._record(logged.KeyDown(chord_name([keysym])))
            if not await session.x.raw(self._down_job, [keysym], False):
                await self._until_bound(session, self._down_step, [keysym], False)

    async def key_up(self, session: Session, keysym: int) -> None:
        await self.chord_up(session, [keysym])

    async def release_all(self, session: Session) -> None:
        """Release every key the server reports down (for error paths; takes no lock)."""
        await session.x.call(self._release_all)
        self.schedule_restore(session)

    def schedule_restore(self, session: Session) -> None:
        """Push back the idle timer that unbinds spare keycodes (started if none runs); call after binding
        one. One task sleeps through a run of actions: none is made or cancelled per action."""
        self._x = session.x
        self._restore_at = time.monotonic() + self.idle_restore
        if self._restorer is None or self._restorer.done():
            self._restorer = asyncio.get_running_loop().create_task(self._restore_when_idle())

    async def close(self) -> None:
        """Release held keys and give the spare keycodes back; the desktop is stopping."""
        self._generation += 1
        if self._restorer is not None:
            self._restorer.cancel()
            self._restorer = None
        x, self._x = self._x, None
        if x is not None:
            try:
                await x.call(self._shutdown)
            except Exception as exc:  # the X server may already be gone, taking the bindings with it
                logger.debug("keyboard close: %s", exc)

    # -- input thread ---------------------------------------------------------------------------

    def keycode_of(self, display: Display, keysym: int) -> int | None:
        """The keycode that sends `keysym` now, None if no key does (input thread only). Binding one is the key
        and typing paths' work, which wait for apps to read the new mapping (desktop/input/settling.py)."""
        stroke = self._keymap_for(display).stroke(keysym)
        return None if stroke is None else stroke.keycode

    def _keymap_for(self, display: Display) -> Keymap:
        keymap = self._keymap
        if keymap is None or keymap.display is not display:  # first use, or a new connection
            if keymap is not None:
                keymap.close()
            keymap = self._keymap = Keymap(display)
            self._held.clear()
        return keymap.current()

    def _type_step(self, display: Display, job: typing_steps.Typing) -> float:
        keymap = self._keymap_for(display)
        if job.display is None:
            typing_steps.begin(display, keymap, job)
        wait = typing_steps.type_some(display, keymap, job, self.hold)
        if job.index >= len(job.keysyms):
            typing_steps.finish(display, job)
        return wait

    def _resolve(self, display: Display, keysyms: list[int]) -> tuple[Keymap, list[Stroke] | float]:
        """Strokes for every keysym (binding spares first), or the seconds to wait before binding."""
        keymap = self._keymap_for(display)
        now = time.monotonic()
        wait = keymap.bind(keysyms, now, self.hold) or keymap.settling(keysyms, now)
        if wait > 0:
            return keymap, wait
        strokes = [keymap.stroke(k) for k in keysyms]
        return keymap, [s for s in strokes if s is not None]

    def _press_step(self, display: Display, chords: list[list[int]]) -> float:
        keymap, strokes = self._resolve(display, [k for chord in chords for k in chord])
        if isinstance(strokes, float):
            return strokes
        key_events.send(display, key_events.press(display, keymap, strokes, chords, self._held))
        return 0.0

    def _down_step(self, display: Display, keysyms: list[int], with_levels: bool) -> float:
        keymap, strokes = self._resolve(display, keysyms)
        if isinstance(strokes, float):
            return strokes
        pressed = key_events.down_codes(strokes, with_levels, self._held)
        try:
            key_events.send(display, [xraw.fake_input(display, X.KeyPress, code) for code in pressed])
        except BaseException:
            # Never leave half a chord held (the write may have gone out in part); the first error is the one told.
            with contextlib.suppress(Exception):
                key_events.send(display, [xraw.fake_input(display, X.KeyRelease, code) for code in reversed(pressed)])
            raise
        key_events.hold(keymap, keysyms, strokes, with_levels, pressed, self._held)
        return 0.0

    def _up(self, display: Display, keysyms: list[int]) -> None:
        key_events.send(display, key_events.up(display, self._keymap_for(display), keysyms, self._held))

    # -- raw jobs: the same key events from the event loop, when nothing needs binding or reading ----------------

    def _ready(self, display: Display, keysyms: list[int]) -> tuple[Keymap, list[Stroke]] | None:
        """The keymap and strokes for `keysyms` when they are known as they stand: the keymap read on this
        connection, no mapping change told of or unread since, every keysym in it and past its settling. Else None:
        the X thread's step reads and binds first."""
        keymap = self._keymap
        if keymap is None or keymap.display is not display or not xraw.quiet(display) or keymap.changed():
            return None
        strokes = [keymap.stroke(k) for k in keysyms]
        if not all(strokes) or not keymap.settled(keysyms):
            return None
        return keymap, cast(list[Stroke], strokes)

    def _press_job(self, display: Display, chords: list[list[int]]) -> xraw.RawJob[bool]:
        """`_press_step` as a raw job; False (nothing sent) when it must run as the step."""
        ready = self._ready(display, [k for chord in chords for k in chord])
        if ready is None:
            return False
        yield key_events.synced(display, key_events.press(display, *ready, chords, self._held))
        return True

    def _down_job(self, display: Display, keysyms: list[int], with_levels: bool) -> xraw.RawJob[bool]:
        """`_down_step` as a raw job; False (nothing sent) when it must run as the step."""
        ready = self._ready(display, keysyms)
        if ready is None:
            return False
        keymap, strokes = ready
        pressed = key_events.down_codes(strokes, with_levels, self._held)
        yield key_events.synced(display, [xraw.fake_input(display, X.KeyPress, code) for code in pressed])
        key_events.hold(keymap, keysyms, strokes, with_levels, pressed, self._held)
        return True

    def _up_job(self, display: Display, keysyms: list[int]) -> xraw.RawJob[bool]:
        """`_up` as a raw job; False (nothing sent) when it must run as the step."""
        if self._ready(display, []) is None:
            return False
        assert self._keymap is not None
        yield key_events.synced(display, key_events.up(display, self._keymap, keysyms, self._held))
        return True

    def _release_all(self, display: Display) -> None:
        down = key_events.pressed_keycodes(display)
        key_events.send(display, [xraw.fake_input(display, X.KeyRelease, code) for code in down])
        self._held.clear()
        if self._keymap is not None:
            self._keymap.pinned.clear()

    def _shutdown(self, display: Display) -> None:
        self._release_all(display)
        if self._keymap is not None and self._keymap.display is display:
            self._keymap.restore_all()
            key_events.send(display)
        if self._keymap is not None:
            self._keymap.close()
        self._keymap = None

    def _restore_idle(self, display: Display) -> float | None:
        keymap = self._keymap
        if keymap is None or keymap.display is not display:
            return None
        due = keymap.current().restore_idle(time.monotonic(), self.idle_restore)
        key_events.send(display)
        return due

    # -- helpers (event loop) -------------------------------------------------------------------

    def _record(self, action: LoggedAction) -> None:
        if self.log is not None:
            self.log.record(action)

    @contextlib.asynccontextmanager
    async def _exclusive(self, session: Session) -> AsyncIterator[int]:
        """Input actions one at a time, in arrival order (the input lock, once the takeover gate admits them);
        arm the idle restore afterwards."""
        lock = session.x.input
        async with self.gate.admitted(lock) if self.gate is not None else lock:
            generation = self._generation
            self._x = session.x
            try:
                yield generation
            finally:
                if generation == self._generation:
                    self.schedule_restore(session)

    async def _until_bound(self, session: Session, step: Callable[..., float], *args: object) -> None:
        for _ in range(_MAX_ROUNDS):
            wait = await session.x.call(step, *args)
            if wait <= 0:
                return
            await asyncio.sleep(wait)
        raise InputFailed("could not bind the keys: the keymap keeps changing")

    async def _restore_when_idle(self) -> None:
        for _ in range(_MAX_ROUNDS):
            delay = self._restore_at - time.monotonic()
            if delay > 0:  # pushed back by the actions since: sleep on
                await asyncio.sleep(delay)
                continue
            x = self._x
            if x is None:
                return
            try:
                due = await x.call(self._restore_idle)
            except Exception as exc:  # the desktop stopped or restarted: nothing left to restore
                logger.debug("keyboard restore: %s", exc)
                return
            if due is None:
                return
            self._restore_at = max(self._restore_at, time.monotonic() + max(due, 0.05))
