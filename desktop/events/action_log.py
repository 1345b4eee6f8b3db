"""The action log: every input action the desktop executes, in order, with a monotonic timestamp.

`Mouse` and `Keyboard` record into it, so REST routes, batches, vendor endpoints and live-view
input are all covered; who asked comes from the `action_source` context variable.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from Xlib import XK

from sandbox_desktop_wire.enums import ActionSource

logger = logging.getLogger("sandbox_desktop.action_log")

MAX_ENTRIES = 10_000
MAX_TEXT_CHARS = 200
UNICODE_KEYSYM_BASE = 0x01000000
_KEYSYM_CHARS = {0xFF0D: "\n", 0xFF09: "\t", 0xFF08: "\b", 0xFF1B: "\x1b", 0xFFFF: "\x7f"}

Entry = dict[str, Any]
Subscriber = Callable[[Entry], None]

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

    def record(self, kind: str, **fields: Any) -> Entry:
        """Append one action (`t` monotonic seconds, `at` wall time) and tell the subscribers."""
        self._seq += 1
        entry: Entry = {"seq": self._seq, "t": time.monotonic(), "at": datetime.now(UTC).isoformat(),
                        "source": action_source.get(), "kind": kind, **fields}
        self._entries.append(entry)
        for subscriber in list(self._subscribers):
            try:
                subscriber(entry)
            except Exception:  # a failing recording must not fail the action it logs
                logger.exception("action log subscriber failed")
        return entry

    def entries(self, since: int = 0, limit: int | None = None) -> list[Entry]:
        """Entries with `seq` > `since`, oldest first, at most `limit`."""
        found = [e for e in self._entries if e["seq"] > since]
        return found[:limit] if limit is not None else found

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call `subscriber` for every new entry; returns the function that unsubscribes."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber) if subscriber in self._subscribers else None
