"""Data-channel input (neko's binary, big-endian opcodes, docs/streaming.md) → the desktop's input path.

Events go through `desktop.input.mouse` and `desktop.input.keyboard`, which take the desktop's input lock and
run on the same X thread as the REST API, so ordering holds across both (an event arriving during a
REST drag is applied after its release). One task per viewer applies its events in order;
pointer moves queued behind each other are coalesced (only the newest matters). Every key and
button a viewer holds is released when it disconnects or loses control, and a key held for
HELD_KEY_TIMEOUT_S without the browser repeating its keydown is released (a lost keyup).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from desktop.core.errors import DomainError
from desktop.events.action_log import acting_as, action_source
from desktop.input.keys import UNICODE_KEYSYM_BASE
from desktop.input.mouse import BUTTONS
from desktop.lifecycle.runtime import Desktop
from desktop.x11.session import Session
from sandbox_desktop_wire.enums import ActionSource, MouseButton

logger = logging.getLogger("sandbox_desktop.stream.input")

OP_MOVE, OP_SCROLL, OP_KEY_DOWN, OP_KEY_UP, OP_BUTTON_DOWN, OP_BUTTON_UP, OP_PING = range(1, 8)
OP_PONG = 0x03
"""Server → client: the ping's client timestamps and the server's (neko `payload.Pong`)."""
HEADER = struct.Struct("!BH")
BUTTON_NAMES = {number: button for button, number in BUTTONS.items()}
"""The X button numbers a viewer sends, as the buttons the desktop presses."""
WHEEL_BUTTONS = {4: (0, -1), 5: (0, 1), 6: (-1, 0), 7: (1, 0)}
"""Buttons 4-7 sent as buttons: one wheel click each, as (dx, dy)."""
CONTROL_L = 0xFFE3
WHEEL_STEP_PX = 50
"""Browser wheel pixels per wheel click (noVNC's step): a 100 px notch scrolls two clicks."""
WHEEL_GESTURE_GAP_S = 0.25
"""A wheel event after this pause starts a new gesture, which always scrolls at least one click."""
MAX_CLICKS_PER_EVENT = 10
HELD_KEY_TIMEOUT_S = 10.0
MAX_QUEUED = 1000
CLOSE_TIMEOUT_S = 5.0
"""How long closing waits for the event being applied (an X call in flight) before cancelling."""


@dataclass(frozen=True)
class Move:
    x: int
    y: int


@dataclass(frozen=True)
class Scroll:
    dx: int
    dy: int
    control: bool


@dataclass(frozen=True)
class Key:
    keysym: int
    down: bool


@dataclass(frozen=True)
class Button:
    button: int
    down: bool


@dataclass(frozen=True)
class Ping:
    timestamps: bytes


@dataclass(frozen=True)
class _ReleaseAll:
    """Queued by `release()`: let go of everything, in order with the events before it."""


Event = Move | Scroll | Key | Button | Ping


def decode(message: bytes) -> list[Event]:
    """The events in one data-channel message; unknown opcodes and truncated frames are skipped."""
    events: list[Event] = []
    offset = 0
    while offset + HEADER.size <= len(message):
        opcode, length = HEADER.unpack_from(message, offset)
        payload = message[offset + HEADER.size:offset + HEADER.size + length]
        offset += HEADER.size + length
        if len(payload) < length:
            break
        event = _event(opcode, payload)
        if event is not None:
            events.append(event)
    return events


def _event(opcode: int, payload: bytes) -> Event | None:
    if opcode == OP_MOVE and len(payload) >= 4:
        return Move(*struct.unpack_from("!HH", payload))
    if opcode == OP_SCROLL and len(payload) >= 4:
        dx, dy = struct.unpack_from("!hh", payload)
        return Scroll(dx, dy, len(payload) >= 5 and payload[4] != 0)
    if opcode in (OP_KEY_DOWN, OP_KEY_UP) and len(payload) >= 4:
        return Key(struct.unpack_from("!I", payload)[0], opcode == OP_KEY_DOWN)
    if opcode in (OP_BUTTON_DOWN, OP_BUTTON_UP) and len(payload) >= 4:
        return Button(struct.unpack_from("!I", payload)[0], opcode == OP_BUTTON_DOWN)
    if opcode == OP_PING and len(payload) >= 8:
        return Ping(bytes(payload[:8]))
    return None


def normalize_keysym(keysym: int) -> int:
    """Unicode keysyms of Latin-1 characters (the SDK sends é as 0x010000e9) as their layout keysym."""
    code = keysym - UNICODE_KEYSYM_BASE
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return keysym


def pong(ping: Ping, now_ms: int) -> bytes:
    """neko's pong: the client's two u32 timestamps, then the server's (ts1 * 0xFFFFFFFF + ts2 = ms)."""
    high, low = divmod(now_ms, 0xFFFFFFFF)
    return HEADER.pack(OP_PONG, 16) + ping.timestamps + struct.pack("!II", high & 0xFFFFFFFF, low)


class WheelAccumulator:
    """Browser wheel pixels → wheel clicks, per axis, keeping the remainder between events."""

    def __init__(self) -> None:
        self._rest = [0, 0]
        self._last = -float("inf")

    def clicks(self, dx: int, dy: int, now: float) -> tuple[int, int]:
        fresh = now - self._last > WHEEL_GESTURE_GAP_S
        self._last = now
        return self._axis(0, dx, fresh), self._axis(1, dy, fresh)

    def _axis(self, axis: int, delta: int, fresh: bool) -> int:
        if delta == 0:
            return 0
        rest = self._rest[axis]
        if fresh or (rest and (rest > 0) != (delta > 0)):  # a new gesture, or the direction flipped
            rest = 0
        total = rest + delta
        clicks = int(total / WHEEL_STEP_PX)
        if clicks == 0 and fresh:
            clicks = 1 if delta > 0 else -1
        clicks = max(-MAX_CLICKS_PER_EVENT, min(MAX_CLICKS_PER_EVENT, clicks))
        self._rest[axis] = total - clicks * WHEEL_STEP_PX
        return clicks


class RemoteInput:
    """One viewer's input: decoded, queued, applied in order while `allowed()`; held state released."""

    def __init__(self, desktop: Desktop, allowed: Callable[[], bool], reply: Callable[[bytes], None],
                 touched: Callable[[], None] = lambda: None) -> None:
        self._desktop = desktop
        self._allowed = allowed
        self._reply = reply
        self._touched = touched
        """Called when an allowed key, button or wheel event arrives: the person acts (takeover)."""
        self._queue: collections.deque[Event | _ReleaseAll] = collections.deque()
        self._wake = asyncio.Event()
        self._held_keys: dict[int, float] = {}
        self._held_buttons: set[MouseButton] = set()
        self._pointer: tuple[int, int] | None = None
        self._wheel = WheelAccumulator()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.applied = 0
        self.dropped = 0

    def feed(self, message: bytes | str) -> None:
        """Queue the events of one data-channel message (called from aiortc's event callback)."""
        if isinstance(message, str) or self._closed:
            return
        events = decode(message)
        if any(isinstance(e, Key | Button | Scroll) for e in events) and self._allowed():
            self._touched()  # before queueing: agent input is held off before this event is applied
        for event in events:
            if isinstance(event, Ping):
                self._reply(pong(event, int(time.time() * 1000)))
            elif self._queue and isinstance(event, Move) and isinstance(self._queue[-1], Move):
                self._queue[-1] = event
            elif len(self._queue) >= MAX_QUEUED:
                self.dropped += 1
            else:
                self._queue.append(event)
        self._start()

    def release(self) -> None:
        """Release every held key and button once the events already queued are applied (lost control)."""
        if not self._closed:
            self._queue.append(_ReleaseAll())
            self._start()

    def _start(self) -> None:
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="stream-input")

    async def release_all(self) -> None:
        """Release every key and button this viewer holds, now."""
        keys, self._held_keys = list(self._held_keys), {}
        buttons, self._held_buttons = list(self._held_buttons), set()
        if not keys and not buttons:
            return
        try:
            session = self._desktop.session()
        except DomainError:
            return  # no desktop: nothing is held any more
        # The live view's own input, whichever task lets go (the socket's, when the viewer leaves): never held
        # off by a takeover, which could leave a key down.
        with acting_as(ActionSource.STREAM):
            for keysym in reversed(keys):
                await self._safely(self._desktop.keyboard.key_up(session, keysym))
            for name in buttons:
                await self._safely(self._desktop.mouse.button(session, None, None, name, False))

    async def close(self) -> None:
        """Drop what is queued, let the event being applied finish, release what is held."""
        self._closed = True
        self._queue.clear()
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(task, CLOSE_TIMEOUT_S)  # cancels it on timeout
        await self.release_all()

    async def _run(self) -> None:
        action_source.set(ActionSource.STREAM)  # this task's own context: all it injects is the live view's
        while not self._closed:
            if not self._queue:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=1.0)
                except TimeoutError:
                    await self._release_stale_keys()
                continue
            event = self._queue.popleft()
            if isinstance(event, _ReleaseAll):
                await self.release_all()
                continue
            if not self._allowed():
                continue
            try:
                session = self._desktop.session()
            except DomainError:
                continue
            await self._safely(self._apply(session, event))

    async def _apply(self, session: Session, event: Event) -> None:
        desktop = self._desktop
        if isinstance(event, Move):
            x, y = min(event.x, session.width - 1), min(event.y, session.height - 1)
            await desktop.mouse.move(session, x, y)
            self._pointer = (x, y)
        elif isinstance(event, Key):
            keysym = normalize_keysym(event.keysym)
            if event.down:
                self._held_keys[keysym] = time.monotonic()  # first: a press must never go unrecorded
                await desktop.keyboard.key_down(session, keysym)
            else:
                self._held_keys.pop(keysym, None)
                await desktop.keyboard.key_up(session, keysym)
        elif isinstance(event, Button):
            if event.button in WHEEL_BUTTONS:
                if event.down:
                    await self._scroll(session, *WHEEL_BUTTONS[event.button])
                return
            name = BUTTON_NAMES.get(event.button)
            if name is None:
                return
            (self._held_buttons.add if event.down else self._held_buttons.discard)(name)
            await desktop.mouse.button(session, None, None, name, event.down)
        elif isinstance(event, Scroll):
            dx, dy = self._wheel.clicks(event.dx, event.dy, time.monotonic())
            if dx or dy:
                with_control = event.control and CONTROL_L not in self._held_keys
                if with_control:
                    await desktop.keyboard.key_down(session, CONTROL_L)
                try:
                    await self._scroll(session, dx, dy)
                finally:
                    if with_control:
                        await desktop.keyboard.key_up(session, CONTROL_L)
        self.applied += 1

    async def _scroll(self, session: Session, dx: int, dy: int) -> None:
        if self._pointer is None:
            state = await self._desktop.mouse.position(session)
            self._pointer = (state.x, state.y)
        await self._desktop.mouse.scroll(session, *self._pointer, dx, dy)

    async def _release_stale_keys(self) -> None:
        now = time.monotonic()
        stale = [k for k, since in self._held_keys.items() if now - since > HELD_KEY_TIMEOUT_S]
        if not stale:
            return
        try:
            session = self._desktop.session()
        except DomainError:
            return
        for keysym in stale:
            self._held_keys.pop(keysym, None)
            logger.info("releasing key 0x%x held for %.0f s without a repeat", keysym, HELD_KEY_TIMEOUT_S)
            await self._safely(self._desktop.keyboard.key_up(session, keysym))

    @staticmethod
    async def _safely(action: Awaitable[object]) -> None:
        """Run an input action; a refused or failed one is logged, never ends the viewer's input."""
        try:
            await action
        except DomainError as exc:
            logger.debug("live view input refused: %s", exc)
