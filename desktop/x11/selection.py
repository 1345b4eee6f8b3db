"""The X selection protocol (ICCCM §2): serving what we own and reading what others own.

Both sides live in the clipboard thread (`desktop/clipboard/owner.py`), which owns the connection and the
hidden window, feeds events to `SelectionOwner` and `SelectionReader` and calls `expire()` on time.
Neither side waits: every transfer is state that events advance, so a slow or vanished client never
holds up another. Payloads larger than one request travel in INCR chunks, both ways. What is owned is
a `Content`: a text (served as every text target) and byte formats by target name (`image/png`, the
`text/uri-list` of a drag, desktop/x11/xdnd.py); a read asks for one `ReadFormat`.
"""

from __future__ import annotations

import enum
import itertools
import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.protocol import event
from Xlib.xobject.drawable import Window

from desktop.core.errors import ClipboardFailed, Timeout

logger = logging.getLogger("sandbox_desktop.clipboard")

# Targets we serve, in the order TARGETS lists them (the richest text first).
TEXT_TARGETS = ("UTF8_STRING", "text/plain;charset=utf-8", "text/plain", "STRING", "TEXT")
PNG = "image/png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Property length to ask for when reading: "all of it", 1 GiB in 4-byte units (the server computes
# 4 * length in 32 bits, so 1 << 30 would wrap to 0 and read nothing).
ALL = 1 << 28

# Properties our reads land in; rotating them keeps a late reply to a timed-out read away from the next.
READ_PROPERTIES = 8


class XSelection(enum.StrEnum):
    """The selections the clipboard owns and reads, by their atoms' names (ICCCM §2.6.1)."""

    CLIPBOARD = "CLIPBOARD"
    PRIMARY = "PRIMARY"


@dataclass(frozen=True)
class Atoms:
    """The atoms the protocol uses, interned once per connection."""

    targets: int
    multiple: int
    timestamp: int
    incr: int
    utf8_string: int
    text: int
    text_plain_utf8: int
    text_plain: int
    atom_pair: int
    stamp: int
    """Our property whose zero-length appends fetch a server timestamp."""
    reads: tuple[int, ...]
    by_name: dict[str, int] = field(repr=False)

    @classmethod
    def intern(cls, display: Display) -> Atoms:
        names = [XSelection.CLIPBOARD, "TARGETS", "MULTIPLE", "TIMESTAMP", "INCR", "UTF8_STRING", "TEXT",
                 "text/plain;charset=utf-8", "text/plain", "ATOM_PAIR", "SANDBOX_DESKTOP_TIME", PNG,
                 *(f"SANDBOX_DESKTOP_SELECTION_{i}" for i in range(READ_PROPERTIES))]
        ids = {name: display.intern_atom(name) for name in names}
        ids.update({XSelection.PRIMARY: Xatom.PRIMARY, "STRING": Xatom.STRING})
        return cls(ids["TARGETS"], ids["MULTIPLE"], ids["TIMESTAMP"], ids["INCR"], ids["UTF8_STRING"],
                   ids["TEXT"], ids["text/plain;charset=utf-8"], ids["text/plain"], ids["ATOM_PAIR"],
                   ids["SANDBOX_DESKTOP_TIME"], tuple(ids[n] for n in names[-READ_PROPERTIES:]), ids)

    def __getitem__(self, name: str) -> int:
        return self.by_name[name]


def max_property_bytes(display: Display) -> int:
    """The largest format-8 ChangeProperty one request can carry (its header is 24 bytes)."""
    return (display.display.info.max_request_length * 4 - 24) & ~3


def resolve(future: Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    """Complete a future unless its caller gave up (cancelled) meanwhile."""
    if future.done():
        return
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except Exception:  # cancelled between the check and the set (InvalidStateError)
        pass


class ReadFormat(enum.Enum):
    """What a read of another client's selection asks for."""

    TEXT = "text"
    """UTF8_STRING, else STRING; decoded to a str ("" when refused or unowned)."""
    PNG = PNG
    """`image/png` bytes as the owner sent them (None when refused or unowned)."""


@dataclass(frozen=True)
class Content:
    """What we offer on a selection: a text (every text target), byte formats by target name, or both."""

    text: str | None
    formats: Mapping[str, bytes] = field(default_factory=dict)


class Value:
    """Content we own and the time we took ownership; each text encoding is made once, when first asked."""

    def __init__(self, content: Content, stamp: int, formats: Mapping[int, bytes]) -> None:
        self.has_text = content.text is not None
        self.text = content.text or ""
        self.formats = formats
        """The byte formats by target atom."""
        self.time = stamp
        # A lone surrogate (possible in JSON) cannot be UTF-8: it becomes U+FFFD.
        self.utf8 = self.text.encode("utf-8", "replace")
        self._latin1: bytes | None = None
        self.latin1_exact = True

    @property
    def latin1(self) -> bytes:
        """STRING is ISO 8859-1 (ICCCM): characters outside it become `?`."""
        if self._latin1 is None:
            try:
                self._latin1 = self.text.encode("latin-1")
            except UnicodeEncodeError:
                self._latin1 = self.text.encode("latin-1", "replace")
                self.latin1_exact = False
        return self._latin1


@dataclass
class _Send:
    """An INCR transfer to one requestor property: the next chunk goes when the requestor deletes."""

    requestor: Window
    prop: int
    type: int
    data: bytes
    deadline: float
    offset: int = 0


class SelectionOwner:
    """Answers SelectionRequest for the selections we own; forgets a value on SelectionClear."""

    def __init__(self, display: Display, window: Window, atoms: Atoms, transfer_timeout: float) -> None:
        self._display = display
        self._window = window
        self._atoms = atoms
        self._chunk = max_property_bytes(display)
        self._timeout = transfer_timeout
        self._owned: dict[int, Value] = {}
        self._sends: dict[tuple[int, int], _Send] = {}

    def value(self, selection: int) -> Value | None:
        return self._owned.get(selection)

    def own(self, selections: tuple[int, ...], content: Content, stamp: int) -> None:
        """Take the selections at server time `stamp` and confirm with the server that we hold them."""
        value = Value(content, stamp, {self._display.intern_atom(name): data
                                       for name, data in content.formats.items()})
        for selection in selections:
            self._window.set_selection_owner(selection, stamp)
        for selection in selections:
            owner = self._display.get_selection_owner(selection)
            if getattr(owner, "id", owner) != self._window.id:
                raise ClipboardFailed("another X client took the selection at the same moment; "
                                      "retry the write")
            self._owned[selection] = value

    def release(self) -> None:
        """Give up every selection (no effect where another client took it since)."""
        nobody = self._display.create_resource_object("window", X.NONE)
        for selection, value in self._owned.items():
            nobody.set_selection_owner(selection, value.time)
        self._owned.clear()

    def handle_clear(self, ev: Any) -> None:
        """Another client took a selection: forget our value (unless we re-took it after that)."""
        value = self._owned.get(ev.atom)
        if value is not None and (ev.time == X.CurrentTime or ev.time >= value.time):
            del self._owned[ev.atom]

    def handle_request(self, ev: Any) -> None:
        """Convert for the requestor and tell it so; `property None` in the notify means refused."""
        prop = ev.property or ev.target  # obsolete clients leave the property to us (ICCCM 2.2)
        value = self._owned.get(ev.selection)
        ok = False
        if value is not None and (ev.time == X.CurrentTime or ev.time >= value.time):
            if ev.target == self._atoms.multiple:
                ok = ev.property != X.NONE and self._convert_multiple(ev.requestor, prop, value)
            else:
                ok = self._convert(ev.requestor, ev.target, prop, value)
        notify = event.SelectionNotify(time=ev.time, requestor=ev.requestor.id, selection=ev.selection,
                                       target=ev.target, property=prop if ok else X.NONE)
        ev.requestor.send_event(notify)

    def _conversion(self, target: int, value: Value) -> tuple[int, int, Any] | None:
        """(type, format, data) of `value` as `target`, or None for a target we refuse."""
        a = self._atoms
        if target == a.targets:
            texts = [a[t] for t in TEXT_TARGETS] if value.has_text else []
            return Xatom.ATOM, 32, [a.targets, a.multiple, a.timestamp, *value.formats, *texts]
        if target == a.timestamp:
            return Xatom.INTEGER, 32, [value.time]
        if target in value.formats:
            return target, 8, value.formats[target]
        if not value.has_text:
            return None
        if target in (a.utf8_string, a.text_plain_utf8, a.text_plain):
            return target, 8, value.utf8
        if target == Xatom.STRING:
            return Xatom.STRING, 8, value.latin1
        if target == a.text:  # the owner picks the encoding: Latin-1 when it is exact, else UTF-8
            latin1 = value.latin1
            return (Xatom.STRING, 8, latin1) if value.latin1_exact else (a.utf8_string, 8, value.utf8)
        return None

    def _convert(self, requestor: Window, target: int, prop: int, value: Value) -> bool:
        converted = self._conversion(target, value)
        if converted is None:
            return False
        kind, fmt, data = converted
        stale = self._sends.get((requestor.id, prop))
        if stale is not None:  # the requestor reuses a property it abandoned mid-INCR
            self._end_send(stale)
        if fmt == 8 and len(data) > self._chunk:
            self._start_send(requestor, prop, kind, data)
        else:
            requestor.change_property(prop, kind, fmt, data)
        return True

    def _convert_multiple(self, requestor: Window, prop: int, value: Value) -> bool:
        """MULTIPLE: convert each (target, property) pair; refused pairs get property None."""
        reply = requestor.get_property(prop, X.AnyPropertyType, 0, ALL)
        if reply is None or reply.format != 32:
            return False
        pairs = list(reply.value)
        for i in range(0, len(pairs) - 1, 2):
            target, pair_prop = pairs[i], pairs[i + 1]
            if target == self._atoms.multiple or pair_prop == X.NONE or \
                    not self._convert(requestor, target, pair_prop, value):
                pairs[i + 1] = X.NONE
        requestor.change_property(prop, self._atoms.atom_pair, 32, pairs)
        return True

    def _start_send(self, requestor: Window, prop: int, kind: int, data: bytes) -> None:
        # Watch the requestor before the INCR property exists, so its first delete cannot be missed.
        requestor.change_attributes(event_mask=X.PropertyChangeMask | X.StructureNotifyMask)
        requestor.change_property(prop, self._atoms.incr, 32, [len(data)])
        self._sends[(requestor.id, prop)] = _Send(requestor, prop, kind, data, time.monotonic() + self._timeout)

    def handle_property(self, ev: Any) -> None:
        """A requestor deleted an INCR chunk: write the next one, or the empty one that ends it."""
        if ev.state != X.PropertyDelete:
            return
        send = self._sends.get((ev.window.id, ev.atom))
        if send is None:
            return
        chunk = send.data[send.offset:send.offset + self._chunk]
        send.requestor.change_property(send.prop, send.type, 8, chunk)
        send.offset += len(chunk)
        send.deadline = time.monotonic() + self._timeout
        if not chunk:
            self._end_send(send)

    def handle_destroy(self, ev: Any) -> None:
        for send in [s for s in self._sends.values() if s.requestor.id == ev.window.id]:
            self._end_send(send, unwatch=False)

    def _end_send(self, send: _Send, unwatch: bool = True) -> None:
        del self._sends[(send.requestor.id, send.prop)]
        if unwatch and not any(s.requestor.id == send.requestor.id for s in self._sends.values()):
            send.requestor.change_attributes(event_mask=X.NoEventMask)

    def expire(self, now: float) -> None:
        """Drop transfers whose requestor stopped deleting chunks (it hung or went away)."""
        for send in [s for s in self._sends.values() if s.deadline <= now]:
            logger.info("INCR transfer to window 0x%x abandoned after %d of %d bytes",
                        send.requestor.id, send.offset, len(send.data))
            self._end_send(send)

    def next_deadline(self) -> float | None:
        return min((s.deadline for s in self._sends.values()), default=None)


@dataclass
class _Read:
    """One conversion in flight for a selection and format; every concurrent get of it shares the result."""

    selection: int
    name: str
    format: ReadFormat
    prop: int
    targets: list[int]
    """The target asked for now, then the fallbacks if the owner refuses it."""
    futures: list[Future[Any]]
    deadline: float
    give_up: float
    chunks: list[bytes] | None = None
    """Set once the owner answered INCR: the chunks received so far."""
    type: int = X.NONE


class SelectionReader:
    """Reads selections owned by other clients (text: UTF8_STRING, else STRING; or PNG); INCR; a timeout per step."""

    def __init__(self, display: Display, window: Window, atoms: Atoms, timeout: float,
                 total_timeout: float = 60.0) -> None:
        self._display = display
        self._window = window
        self._atoms = atoms
        self._timeout = timeout
        self._total = total_timeout
        self._props = itertools.cycle(atoms.reads)
        self._reads: dict[tuple[int, ReadFormat], _Read] = {}

    def read(self, selection: int, name: str, future: Future[Any], fmt: ReadFormat = ReadFormat.TEXT) -> None:
        """Start converting `selection` to `fmt` (or join the conversion already in flight)."""
        if (selection, fmt) in self._reads:
            self._reads[(selection, fmt)].futures.append(future)
            return
        match fmt:
            case ReadFormat.TEXT:
                targets = [self._atoms.utf8_string, Xatom.STRING]
            case ReadFormat.PNG:
                targets = [self._atoms[PNG]]
        now = time.monotonic()
        read = _Read(selection, name, fmt, next(self._props), targets, [future], now + self._timeout,
                     now + self._total)
        self._reads[(selection, fmt)] = read
        self._window.convert_selection(selection, read.targets[0], read.prop, X.CurrentTime)

    def handle_notify(self, ev: Any) -> None:
        """The owner answered: read the data, fall back to the next target, or begin an INCR read."""
        read = next((r for r in self._reads.values() if r.selection == ev.selection and r.targets[0] == ev.target
                     and ev.property in (r.prop, X.NONE)), None)
        if read is None:
            return  # the late answer to a read that already timed out
        if ev.property == X.NONE:  # no owner, or the owner refused this target
            read.targets.pop(0)
            if read.targets:
                self._window.convert_selection(read.selection, read.targets[0], read.prop, X.CurrentTime)
            else:
                self._finish(read, None)
            return
        reply = self._window.get_property(read.prop, X.AnyPropertyType, 0, ALL, delete=True)
        if reply is not None and reply.property_type == self._atoms.incr:
            read.chunks = []  # deleting the INCR property (done above) asks for the first chunk
            read.deadline = time.monotonic() + self._timeout
            return
        self._finish(read, b"" if reply is None else bytes(reply.value), reply.property_type if reply else X.NONE)

    def handle_property(self, ev: Any) -> None:
        """An INCR chunk arrived on our window: take it (deleting asks for the next); empty ends it."""
        if ev.state != X.PropertyNewValue:
            return
        read = next((r for r in self._reads.values() if r.prop == ev.atom and r.chunks is not None), None)
        if read is None or read.chunks is None:
            return
        reply = self._window.get_property(read.prop, X.AnyPropertyType, 0, ALL, delete=True)
        if reply is None:
            return  # two appends arrived before we read: the first read took both
        data = bytes(reply.value)
        if not data:
            self._finish(read, b"".join(read.chunks), read.type)
            return
        read.chunks.append(data)
        read.type = reply.property_type
        read.deadline = time.monotonic() + self._timeout

    def _finish(self, read: _Read, data: bytes | None, kind: int = X.NONE) -> None:
        """Resolve the readers: text decoded ("" when refused), other formats as bytes (None when refused)."""
        del self._reads[(read.selection, read.format)]
        result: str | bytes | None = data
        if read.format == ReadFormat.TEXT:
            data = data or b""
            result = data.decode("latin-1") if kind == Xatom.STRING else data.decode("utf-8", "replace")
        for future in read.futures:
            resolve(future, result)

    def expire(self, now: float) -> None:
        """Fail reads whose owner stopped answering: a 504 that says which selection."""
        for read in [r for r in self._reads.values() if min(r.deadline, r.give_up) <= now]:
            del self._reads[(read.selection, read.format)]
            self._window.delete_property(read.prop)
            step = "sending its INCR chunks" if read.chunks is not None else "answering"
            error = Timeout(f"the X client owning {read.name} stopped {step} (no reply within "
                            f"{self._timeout:g} s); the application that copied may be hung")
            for future in read.futures:
                resolve(future, error=error)

    def fail_all(self, error: BaseException) -> None:
        for read in self._reads.values():
            for future in read.futures:
                resolve(future, error=error)
        self._reads.clear()

    def next_deadline(self) -> float | None:
        return min((min(r.deadline, r.give_up) for r in self._reads.values()), default=None)
