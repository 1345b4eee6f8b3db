"""The action log: every input action the desktop executes, in order, with a monotonic timestamp.

`Mouse` and `Keyboard` record into it, so REST routes, batches, vendor endpoints and live-view
input are all covered; who asked comes from the `action_source` context variable. Each entry's action
is one of the frozen dataclasses below, one per `kind` of docs/action-log.md; `Entry.to_wire` is the one
place an entry becomes the wire's (sandbox_desktop_wire/action_log.py: the API, a recording's track), and
`Entry.from_wire` the way back (a recording's track read again).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, get_args

from pydantic import TypeAdapter
from Xlib import XK

from desktop.events.event_types import ControlChanged
from sandbox_desktop_wire.action_log import ActionLogEntry
from sandbox_desktop_wire.approvals import ApprovalStatus
from sandbox_desktop_wire.enums import ActionSource, MouseButton

logger = logging.getLogger("sandbox_desktop.action_log")

MAX_ENTRIES = 10_000
MAX_TEXT_CHARS = 200
UNICODE_KEYSYM_BASE = 0x01000000
_KEYSYM_CHARS = {0xFF0D: "\n", 0xFF09: "\t", 0xFF08: "\b", 0xFF1B: "\x1b", 0xFFFF: "\x7f"}

action_source: contextvars.ContextVar[ActionSource] = contextvars.ContextVar("action_source",
                                                                           default=ActionSource.REST)
action_wait: contextvars.ContextVar[float | None] = contextvars.ContextVar("action_wait", default=None)
"""Seconds the caller lets its action wait for a person (a takeover queue, an approval): the request's
`Prefer: wait=N` (RFC 7240), None for the server's default."""


@contextlib.contextmanager
def acting_as(source: ActionSource) -> Iterator[None]:
    """Actions executed inside the block are logged with `source` (batch, anthropic, stream...)."""
    token = action_source.set(source)
    try:
        yield
    finally:
        action_source.reset(token)


# -- what is logged: one class per kind; coordinates in screen pixels --------------------------------

@dataclass(frozen=True, slots=True)
class _At:
    x: int
    y: int


@dataclass(frozen=True, slots=True)
class Move(_At):
    """The pointer moved to (`x`, `y`)."""

    KIND: ClassVar[str] = "move"


@dataclass(frozen=True, slots=True)
class Click(_At):
    KIND: ClassVar[str] = "click"
    button: MouseButton
    count: int


@dataclass(frozen=True, slots=True)
class _Button:
    x: int | None
    """None (and `y` too): where the pointer was."""
    y: int | None
    button: MouseButton


@dataclass(frozen=True, slots=True)
class MouseDown(_Button):
    KIND: ClassVar[str] = "mouse_down"


@dataclass(frozen=True, slots=True)
class MouseUp(_Button):
    KIND: ClassVar[str] = "mouse_up"


@dataclass(frozen=True, slots=True)
class Drag(_At):
    """From (`x`, `y`) to (`end_x`, `end_y`) with `button` held."""

    KIND: ClassVar[str] = "drag"
    end_x: int
    end_y: int
    button: MouseButton


@dataclass(frozen=True, slots=True)
class Scroll(_At):
    """Wheel clicks at (`x`, `y`); `delta_y` > 0 scrolls down, `delta_x` > 0 right."""

    KIND: ClassVar[str] = "scroll"
    delta_x: int
    delta_y: int


@dataclass(frozen=True, slots=True)
class Type:
    KIND: ClassVar[str] = "type"
    length: int
    """Characters typed."""
    text: str
    """The first MAX_TEXT_CHARS of them."""


@dataclass(frozen=True, slots=True)
class _Keys:
    keys: str
    """The chord as keysym names (`Control_L+a`, `chord_name`); several chords separated by spaces."""


@dataclass(frozen=True, slots=True)
class Press(_Keys):
    """Each chord pressed and released in turn."""

    KIND: ClassVar[str] = "press"


@dataclass(frozen=True, slots=True)
class KeyDown(_Keys):
    KIND: ClassVar[str] = "key_down"


@dataclass(frozen=True, slots=True)
class KeyUp(_Keys):
    KIND: ClassVar[str] = "key_up"


@dataclass(frozen=True, slots=True)
class Approval:
    """A person decided on an agent's action (desktop/control/approvals.py), logged with the agent's source
    just before the actions it let run."""

    KIND: ClassVar[str] = "approval"
    approval_id: str
    status: ApprovalStatus
    decided_by: str | None
    """None: nobody decided (it expired)."""
    operation: str
    """The request held: `POST /v1/desktop/mouse/click`."""
    message: str | None


@dataclass(frozen=True, slots=True)
class Control(ControlChanged):
    """Who holds control in the live view changed (streaming/control.py): the `control.changed` event, logged."""

    KIND: ClassVar[str] = "control"


@dataclass(frozen=True, slots=True)
class Clipboard:
    """A viewer set the desktop's clipboard from their browser (`length` characters)."""

    KIND: ClassVar[str] = "clipboard"
    length: int
    viewer: str


@dataclass(frozen=True, slots=True)
class Drop(_At):
    """Files dropped at (`x`, `y`) onto the window `window_id` (its id as the window list has it)."""

    KIND: ClassVar[str] = "drop"
    paths: tuple[str, ...]
    window_id: str


LoggedAction = (Move | Click | MouseDown | MouseUp | Drag | Scroll | Type | Press | KeyDown | KeyUp | Approval
                | Control | Clipboard | Drop)
KINDS: dict[str, type[LoggedAction]] = {cls.KIND: cls for cls in get_args(LoggedAction)}
WIRE: TypeAdapter[ActionLogEntry] = TypeAdapter(ActionLogEntry)
"""Reads an entry of the wire (`WIRE.validate_json(line)`)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One action as logged: `seq` (1, 2, 3... in execution order), `t` (`time.monotonic()`, the events'
    clock), `at` (wall time, RFC 3339), who asked and what was done."""

    seq: int
    t: float
    at: str
    source: ActionSource
    action: LoggedAction

    def to_wire(self, video_ms: int | None = None) -> ActionLogEntry:
        """The entry as the wire has it (with `videoMs` in a recording's track). A kind's fields are its wire
        model's, by name and in order (tests/unit/desktop/events/test_action_log.py)."""
        action = self.action
        fields = {field.name: getattr(action, field.name) for field in dataclasses.fields(action)}
        return WIRE.validate_python({"seq": self.seq, "t": self.t, "at": self.at, "source": self.source,
                                     "video_ms": video_ms, "kind": action.KIND, **fields})

    @classmethod
    def from_wire(cls, wire: ActionLogEntry) -> Entry:
        kind = KINDS[wire.kind]
        fields = {field.name: _frozen(getattr(wire, field.name)) for field in dataclasses.fields(kind)}
        return cls(wire.seq, wire.t, wire.at, wire.source, kind(**fields))


def _frozen(value: Any) -> Any:
    """A list of the wire as the tuple a frozen dataclass holds (`Drop.paths`)."""
    return tuple(value) if isinstance(value, list) else value


Subscriber = Callable[[Entry], None]


def keysym_text(keysyms: list[int]) -> str:
    """The text a list of `text_keysyms` types (the inverse of `desktop.input.keys.char_keysym`)."""
    chars = []
    for keysym in keysyms:
        if keysym >= UNICODE_KEYSYM_BASE:
            chars.append(chr(keysym - UNICODE_KEYSYM_BASE))
        elif 0x20 <= keysym <= 0xFF:
            chars.append(chr(keysym))
        else:
            chars.append(_KEYSYM_CHARS.get(keysym, "\ufffd"))
    return "".join(chars)


def keysym_name(keysym: int) -> str:
    """`Return`, `a`, `U+20AC`: a readable name for one keysym."""
    if keysym >= UNICODE_KEYSYM_BASE:
        return f"U+{keysym - UNICODE_KEYSYM_BASE:04X}"
    return _keysym_names().get(keysym) or f"0x{keysym:x}"


@functools.cache
def _keysym_names() -> dict[int, str]:
    """Keysym to name for Latin-1 and the function/modifier keys (Return, Control_L...)."""
    XK.load_keysym_group("miscellany")  # python-xlib loads only Latin-1 by default
    # Reversed, so that the first name defined for a keysym wins.
    return {value: name[3:] for name, value in reversed(vars(XK).items())
            if name.startswith("XK_") and isinstance(value, int)}


def chord_name(keysyms: list[int]) -> str:
    return "+".join(keysym_name(k) for k in keysyms)


class ActionLog:
    """A bounded, in-memory log of executed actions; subscribers see each entry as it is recorded."""

    def __init__(self, capacity: int = MAX_ENTRIES) -> None:
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._subscribers: list[Subscriber] = []
        self._seq = 0

    def record(self, action: LoggedAction) -> Entry:
        """Append one action, stamped now and with the current source, and tell the subscribers."""
        self._seq += 1
        entry = Entry(self._seq, time.monotonic(), datetime.now(UTC).isoformat(), action_source.get(), action)
        self._entries.append(entry)
        for subscriber in list(self._subscribers):
            try:
                subscriber(entry)
            except Exception:  # a failing recording must not fail the action it logs
                logger.exception("action log subscriber failed")
        return entry

    def entries(self, since: int = 0, limit: int | None = None) -> list[Entry]:
        """Entries with `seq` > `since`, oldest first, at most `limit`."""
        found = [e for e in self._entries if e.seq > since]
        return found[:limit] if limit is not None else found

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call `subscriber` for every new entry; returns the function that unsubscribes."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber) if subscriber in self._subscribers else None
