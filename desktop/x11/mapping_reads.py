"""Which X clients have read the keyboard mapping since a change: the signal that a binding made for a missing keysym
may be typed (desktop/input/keymap.py; docs/keyboard.md, "Unicode typing and the spare keycodes").

A client learns of a mapping change from a MappingNotify (or XKB's MapNotify) and reads the new mapping on its own
time: xterm, Tk, GTK and Chromium ask for it as soon as they handle the notice (1-31 ms on an idle machine:
bench/mapping_reads.py). A key that reaches an app before it has the new mapping is looked up in the old one, where
the spare keycode has no keysym: Chromium drops it. A fixed pause covers that only while the app keeps up; a busy
one (a page loading, a loaded machine) once took longer than 100 ms and lost a character.

The X server's RECORD extension shows every client's requests as the server runs them, in the order it runs them.
Recording the mapping changes (core ChangeKeyboardMapping) and the mapping reads (core GetKeyboardMapping, XKB's
GetMap) of every client, this module numbers the changes and notes the number each client had read up to: once the
app owning the keyboard focus has read past a change of ours (on any of its connections: desktop/input/settling.py),
the server has already queued it the new mapping ahead of any key we send next, and the key is safe to send.

Recording needs two connections of its own (one to control the recording, one the server streams it on) and a
thread reading the stream. The keymap opens it with its first binding and closes it when its last binding goes,
so a desktop that never types a missing keysym never pays for it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import record

from desktop.x11.reconnect import CONNECTION_LOST
from desktop.x11.thread import open_display

logger = logging.getLogger("sandbox_desktop.keyboard")

CHANGE_KEYBOARD_MAPPING = 100
GET_KEYBOARD_MAPPING = 101
XKB_GET_MAP = 8
"""XKEYBOARD's GetMap: how XKB clients (libxkbcommon-x11, Xlib with XKB) read the mapping."""
START_TIMEOUT_S = 2.0
"""How long `MappingReads.open` waits for the server to start recording."""


class MappingReads:
    """The mapping changes and reads of every client of one X server, as its RECORD extension reports them.

    `changes` counts the keyboard mapping changes the server ran; `read_at[base]` is the count a client (by its
    resource-id base) had seen when it last read the mapping; `changes_by[base]` lists, for a client whose changes
    are watched (`watch`), the count each of its changes made. Written by the recording thread, read by the keymap's
    thread: each is a plain int or a dict/list entry replaced whole, which the GIL keeps whole.
    """

    def __init__(self, control: Display, stream: Display, context: int, xkb_major: int | None) -> None:
        self._control = control
        self._stream = stream
        self._context = context
        self._xkb_major = xkb_major
        self.changes = 0
        self.read_at: dict[int, int] = {}
        self.changes_by: dict[int, list[int]] = {}
        self._started = threading.Event()
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="x-mapping-reads", daemon=True)

    @classmethod
    def open(cls, display_name: str) -> MappingReads | None:
        """Start recording on `display_name`; None (and a debug line) when the server has no RECORD extension or
        it cannot start: the keymap then falls back to a fixed pause."""
        control: Display | None = None
        stream: Display | None = None
        try:
            control = open_display(display_name)
            if not control.has_extension("RECORD"):
                control.close()
                return None
            xkb = control.query_extension("XKEYBOARD")
            xkb_major = xkb.major_opcode if xkb is not None and xkb.present else None
            ranges = {"core_requests": (CHANGE_KEYBOARD_MAPPING, GET_KEYBOARD_MAPPING), "core_replies": (0, 0),
                      "ext_requests": (xkb_major, xkb_major, XKB_GET_MAP, XKB_GET_MAP) if xkb_major else (0, 0, 0, 0),
                      "ext_replies": (0, 0, 0, 0), "delivered_events": (0, 0), "device_events": (0, 0),
                      "errors": (0, 0), "client_started": False, "client_died": False}
            context = control.record_create_context(0, [record.AllClients], [ranges])
            control.sync()  # the context exists before the other connection enables it
            stream = open_display(display_name)
            reads = cls(control, stream, context, xkb_major)
            reads._thread.start()
            if not reads._started.wait(START_TIMEOUT_S) or not reads.running:
                reads.close()
                return None
            return reads
        except (*CONNECTION_LOST, xerror.XError) as exc:
            logger.debug("no recording of mapping reads on %s: %s", display_name, exc)
            for display in (stream, control):
                if display is not None:
                    display.close()
            return None

    def watch(self, base: int) -> None:
        """Note the changes of the client whose resource-id base is `base` (the keymap's own connection)."""
        self.changes_by.setdefault(base, [])

    def read_after(self, reader: int, changer: int, change: int) -> bool | None:
        """Whether client `reader` has read the mapping since the `change`-th change (1-based) of client `changer`;
        None while the recording has not reached that change yet, or for a change it never saw (0: made before it
        started)."""
        made = self.changes_by.get(changer, [])
        if not 1 <= change <= len(made):
            return None
        return self.read_at.get(reader, -1) >= made[change - 1]

    def close(self) -> None:
        """Stop recording and close both connections (the thread ends with the stream)."""
        try:
            self._control.record_disable_context(self._context)
            self._control.record_free_context(self._context)
            self._control.sync()
        except (*CONNECTION_LOST, xerror.XError):
            pass  # the server went: the stream ends by itself
        self._ended.wait(START_TIMEOUT_S)
        self._control.close()
        if not self._thread.is_alive():
            self._stream.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._stream.record_enable_context(self._context, self._received)
        except (*CONNECTION_LOST, xerror.XError) as exc:
            logger.debug("mapping reads: the recording ended: %s", exc)
        finally:
            self._started.set()  # a waiting `open` sees the thread gone rather than waiting out its timeout
            self._ended.set()

    def _received(self, reply: Any) -> None:
        if reply.category == record.StartOfData:
            self._started.set()
        elif reply.category == record.FromClient:
            self._requests(reply.id_base, reply.data, "big" if reply.client_swapped else "little")

    def _requests(self, base: int, data: bytes, order: Literal["little", "big"]) -> None:
        """Count the changes and note the reads among the requests of one client the server reported (in that
        client's byte order)."""
        at = 0
        while at + 4 <= len(data):
            major, minor = data[at], data[at + 1]
            length = int.from_bytes(data[at + 2:at + 4], order) * 4
            if length == 0 and at + 8 <= len(data):  # BIG-REQUESTS: the length is the next 32 bits
                length = int.from_bytes(data[at + 4:at + 8], order) * 4
            if major == CHANGE_KEYBOARD_MAPPING:
                self.changes += 1
                made = self.changes_by.get(base)
                if made is not None:
                    made.append(self.changes)
            elif major == GET_KEYBOARD_MAPPING or (major == self._xkb_major and minor == XKB_GET_MAP):
                self.read_at[base] = self.changes
            at += max(length, 4)
