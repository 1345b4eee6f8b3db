"""X requests packed here and replies read as bytes, below python-xlib's request objects, for the paths
every action takes (the pointer's look, XTEST input): docs/architecture.md, "The X threads".

python-xlib builds each request field by field through its Struct machinery and reads each reply
through `send_and_recv` (a lock, a select, a parse per field): in process, 13 us per request and
~150 us of CPU per round trip, so a click's one round trip cost 220 us on its X thread. Here a request
is one `struct.pack`, and on a connection python-xlib is idle on (nothing queued, nothing awaiting a
reply, nothing read ahead) the batch is written to its socket at once and the replies read straight
back: the socket's next bytes are then the answers to it. Events read meanwhile go back to python-xlib,
in order, for its own parsing (a MappingNotify updates its keymap); python-xlib's request counter is
advanced past what was sent. On a connection that is not idle, or with another python-xlib than the
one this was written against (PINNED_XLIB: it reads that version's internals), the same bytes go
through python-xlib's request queue and reply machinery instead: slower, same answers.

The jobs of pointer and key actions are written as `RawJob`s, generators of exchanges with no I/O of their own: the
X thread runs one with `run_job`, and the event loop runs the same job on a connection it borrows while its thread
is idle (desktop/x11/on_loop.py). Like python-xlib itself, a connection is used by one thread at a time
(desktop/x11/thread.py).
"""

from __future__ import annotations

import select
import struct
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import Xlib
from Xlib import X
from Xlib.display import Display
from Xlib.protocol import rq
from Xlib.support import lock

from desktop.x11 import mapping

PINNED_XLIB = (0, 33)
FAST = tuple(Xlib.__version__) == PINNED_XLIB
"""The socket path (module doc) reads python-xlib 0.33's connection internals; other versions take the queue."""

_SEND_EVENT = 25
_CLIENT_MESSAGE = 33
_QUERY_POINTER = 38
_GET_PROPERTY = 20
_GET_INPUT_FOCUS = 43
_XTEST_FAKE_INPUT = 2
_REPLY, _ERROR, _GENERIC_EVENT = 1, 0, 35

JOB_ATOMS = ("WM_STATE", "_NET_ACTIVE_WINDOW")
"""The atoms raw jobs name (desktop/input/pointer.py, mouse.py): interned as a connection opens
(desktop/x11/thread.py), so that a job run on the event loop finds them in python-xlib's cache, never asking."""

T = TypeVar("T")

Answer = bytes | int
"""A reply, whole (32 bytes and what follows), or the code of the X error the request got."""


def fake_input(d: Display, event_type: int, detail: int = 0, x: int = 0, y: int = 0) -> bytes:
    """XTEST FakeInput: a key or button press/release (`detail`), or a motion to `x`, `y` on the root."""
    return struct.pack("=BBHBBxxII8xhh8x", d.display.get_extension_major("XTEST"), _XTEST_FAKE_INPUT, 9,
                       event_type, detail, 0, 0, x, y)


def client_message(destination: int, event_mask: int, window: int, message_type: int, data: Sequence[int]) -> bytes:
    """SendEvent of a 32-bit ClientMessage about `window` to `destination` (an EWMH request: the root)."""
    values = [value & 0xFFFFFFFF for value in (*data, 0, 0, 0, 0, 0)[:5]]
    event = struct.pack("=BBHII5I", _CLIENT_MESSAGE, 32, 0, window, message_type, *values)
    return struct.pack("=BBHII", _SEND_EVENT, 0, 11, destination, event_mask) + event


def query_pointer(window: int) -> bytes:
    return struct.pack("=BxHI", _QUERY_POINTER, 2, window)


def round_trip() -> bytes:
    """GetInputFocus, for its reply: once it is read, the server has handled everything sent before it."""
    return struct.pack("=BxH", _GET_INPUT_FOCUS, 1)


def get_property(window: int, atom: int, length: int) -> bytes:
    """GetProperty of any type, `length` 32-bit units from the start."""
    return struct.pack("=BBHIIIII", _GET_PROPERTY, 0, 6, window, atom, 0, 0, length)


def pointer_reply(answer: bytes) -> tuple[int, int, int]:
    """A QueryPointer reply: (child, root x, root y)."""
    child, x, y = struct.unpack_from("=Ihh", answer, 12)
    return child, x, y


def property_reply(answer: bytes) -> tuple[int, list[int]]:
    """A GetProperty reply: (its type, 0 if the window has no such property; its 32-bit values)."""
    fmt = answer[1]
    kind, _after, count = struct.unpack_from("=III", answer, 8)
    return kind, list(struct.unpack_from(f"={count}I", answer, 32)) if fmt == 32 else []


def send(d: Display, requests: Sequence[bytes]) -> None:
    """Send requests that have no reply, now."""
    exchange(d, requests, [False] * len(requests))


def exchange(d: Display, requests: Sequence[bytes], answered: Sequence[bool]) -> list[Answer]:
    """Send `requests` in one write; the answers of those `answered` marks (requests with a reply), in order."""
    if FAST and _idle(d.display):
        return _through_socket(d.display, requests, answered)
    return _through_queue(d.display, requests, answered)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One write of a raw job: its requests, and which of them have a reply to wait for."""

    requests: Sequence[bytes]
    answered: Sequence[bool]


def sending(requests: Sequence[bytes]) -> Exchange:
    """An exchange of requests without replies: written, nothing waited for."""
    return Exchange(requests, [False] * len(requests))


RawJob = Generator[Exchange, list[Answer], T]
"""A job written without I/O: it yields each `Exchange` and is sent back that exchange's answers; its return value
is the job's. The thread that owns the connection runs it with `run_job`; the event loop runs the same job over a
connection it borrows while the thread is idle (desktop/x11/on_loop.py), so the job's logic is written once."""


def run_job(d: Display, job: Callable[..., RawJob[T]], *args: Any) -> T:
    """`job(d, *args)` on this thread: each of its exchanges through `exchange`."""
    steps = job(d, *args)
    answers: list[Answer] | None = None
    while True:
        try:
            step = steps.send(answers)  # type: ignore[arg-type]  # the first send starts it: None
        except StopIteration as stop:
            return cast(T, stop.value)
        answers = exchange(d, step.requests, step.answered)


def quiet(d: Display) -> bool:
    """Nothing for python-xlib to parse: no event queued or read ahead, and nothing arrived on the socket
    (a poll, no read). False when it cannot tell (not the pinned python-xlib)."""
    p = d.display
    if not FAST or p.event_queue or not _idle(p):
        return False
    poller = select.poll()
    poller.register(p.socket, select.POLLIN)
    return not poller.poll(0)


def borrowable(d: Display) -> bool:
    """Whether raw jobs may run on this connection from outside python-xlib now: the pinned python-xlib, idle."""
    return FAST and _idle(d.display)


def _idle(p: Any) -> bool:
    return (not p.request_queue and not p.sent_requests and not p.data_send and not len(p.data_recv)
            and not p.recv_packet_len and p.socket_error is None)


def written(p: Any, requests: Sequence[bytes], answered: Sequence[bool]) -> tuple[bytes, Replies]:
    """The bytes of `requests`, counted as sent on python-xlib's connection `p`, and what reads their answers."""
    first = p.request_serial
    p.request_serial = (first + len(requests)) % 65536
    return b"".join(requests), Replies(first, answered)


class Replies:
    """The answers to one write, read from whatever pieces the socket gives: replies and errors by their serial;
    events (and anything read past the last answer) handed to python-xlib to parse next, as if it had read them."""

    __slots__ = ("_buffer", "answers", "events", "waiting")

    def __init__(self, first: int, answered: Sequence[bool]) -> None:
        self.waiting = {(first + i) % 65536: i for i, want in enumerate(answered) if want}
        self.answers: dict[int, Answer] = {}
        self.events: list[bytes] = []
        self._buffer = b""

    @property
    def done(self) -> bool:
        return len(self.answers) == len(self.waiting)

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        at = 0
        while not self.done and len(buffer) - at >= 32:
            kind = buffer[at] & 0x7F
            size = 32 + (struct.unpack_from("=I", buffer, at + 4)[0] * 4 if kind in (_REPLY, _GENERIC_EVENT) else 0)
            if len(buffer) - at < size:
                break
            packet, at = buffer[at:at + size], at + size
            if kind not in (_REPLY, _ERROR):
                self.events.append(packet)
                continue
            index = self.waiting.get(struct.unpack_from("=H", packet, 2)[0])
            if index is not None:
                self.answers[index] = packet if kind == _REPLY else packet[1]
            # else: the error of a request without a reply (an input event the server refused): nobody waits for it
        self._buffer = buffer[at:]

    def finish(self, p: Any) -> list[Answer]:
        """The answers in request order; what else was read goes back to python-xlib, before anything it reads,
        but for mapping changes, which are counted here (desktop/x11/mapping.py) and go no further."""
        kept = []
        for event in self.events:
            if event[0] & 0x7F == X.MappingNotify:
                mapping.told(p, event[4])
            else:
                kept.append(event)
        rest = b"".join((*kept, self._buffer))
        if rest:
            p.data_recv = bytes(p.data_recv) + rest
        return [self.answers[i] for i in sorted(self.answers)]


def _through_socket(p: Any, requests: Sequence[bytes], answered: Sequence[bool]) -> list[Answer]:
    data, replies = written(p, requests, answered)
    p.socket.sendall(data)
    while not replies.done:
        piece = p.socket.recv(RECEIVE_BYTES)
        if not piece:
            raise ConnectionResetError("the X server closed the connection")
        replies.feed(piece)
    return replies.finish(p)


RECEIVE_BYTES = 65536


class _Bytes(rq.ReplyRequest):
    """Packed bytes through python-xlib's queue; the reply kept as bytes, an error as its code."""

    _reply = None  # python-xlib tells requests that have a reply by this attribute; ours parses itself

    def __init__(self, display: Any, binary: bytes, answered: bool) -> None:  # no super(): nothing to pack
        self._display = display
        self._binary = binary
        self._serial = None
        self._data: bytes | None = None
        self._error = None
        self._response_lock = lock.allocate_lock()
        display.send_request(self, answered)

    def _parse_response(self, data: bytes) -> None:
        self._data = bytes(data)

    @property
    def sequence_number(self) -> int:  # python-xlib checks a reply's against the one it waits for
        assert self._data is not None
        return int(struct.unpack_from("=H", self._data, 2)[0])

    def answer(self) -> Answer:
        try:
            self.reply()
        except Exception:  # an X error (BadWindow...): python-xlib raises the error it set
            assert self._error is not None
            return int(self._error.code)
        assert self._data is not None
        return self._data


def _through_queue(p: Any, requests: Sequence[bytes], answered: Sequence[bool]) -> list[Answer]:
    queued = [_Bytes(p, binary, want) for binary, want in zip(requests, answered, strict=True)]
    p.flush()
    return [request.answer() for request, want in zip(queued, answered, strict=True) if want]
