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

Like python-xlib itself, a connection is used by the one thread that owns it (desktop/x11/thread.py).
"""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Sequence
from typing import Any

import Xlib
from Xlib.display import Display
from Xlib.protocol import rq
from Xlib.support import lock

PINNED_XLIB = (0, 33)
FAST = tuple(Xlib.__version__) == PINNED_XLIB
"""The socket path (module doc) reads python-xlib 0.33's connection internals; other versions take the queue."""

_QUERY_POINTER = 38
_GET_PROPERTY = 20
_GET_INPUT_FOCUS = 43
_XTEST_FAKE_INPUT = 2
_REPLY, _ERROR, _GENERIC_EVENT = 1, 0, 35

Answer = bytes | int
"""A reply, whole (32 bytes and what follows), or the code of the X error the request got."""


def fake_input(d: Display, event_type: int, detail: int = 0, x: int = 0, y: int = 0) -> bytes:
    """XTEST FakeInput: a key or button press/release (`detail`), or a motion to `x`, `y` on the root."""
    return struct.pack("=BBHBBxxII8xhh8x", d.display.get_extension_major("XTEST"), _XTEST_FAKE_INPUT, 9,
                       event_type, detail, 0, 0, x, y)


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


def quiet(d: Display) -> bool:
    """Nothing for python-xlib to parse: no event queued or read ahead, and nothing arrived on the socket
    (a poll, no read). False when it cannot tell (not the pinned python-xlib)."""
    p = d.display
    if not FAST or p.event_queue or not _idle(p):
        return False
    poller = select.poll()
    poller.register(p.socket, select.POLLIN)
    return not poller.poll(0)


def _idle(p: Any) -> bool:
    return (not p.request_queue and not p.sent_requests and not p.data_send and not len(p.data_recv)
            and not p.recv_packet_len and p.socket_error is None)


def _through_socket(p: Any, requests: Sequence[bytes], answered: Sequence[bool]) -> list[Answer]:
    first = p.request_serial
    serials = [(first + i) % 65536 for i in range(len(requests))]
    p.socket.sendall(b"".join(requests))
    p.request_serial = (first + len(requests)) % 65536
    waiting = {serial: i for i, serial in enumerate(serials) if answered[i]}
    answers: dict[int, Answer] = {}
    events: list[bytes] = []
    while len(answers) < len(waiting):
        packet = _receive(p.socket, 32)
        kind = packet[0] & 0x7F
        if kind == _REPLY:
            packet += _receive(p.socket, struct.unpack_from("=I", packet, 4)[0] * 4)
        elif kind == _GENERIC_EVENT:
            events.append(packet + _receive(p.socket, struct.unpack_from("=I", packet, 4)[0] * 4))
            continue
        elif kind != _ERROR:
            events.append(packet)
            continue
        index = waiting.get(struct.unpack_from("=H", packet, 2)[0])
        if index is not None:
            answers[index] = packet if kind == _REPLY else packet[1]
        # else: the error of a request without a reply (an input event the server refused): nobody waits for it
    if events:  # python-xlib parses them, before anything it reads next, as if it had read them itself
        p.data_recv = b"".join(events)
    return [answers[i] for i in sorted(answers)]


def _receive(sock: socket.socket, count: int) -> bytes:
    if not count:
        return b""
    buffer = bytearray(count)
    view = memoryview(buffer)
    got = 0
    while got < count:
        read = sock.recv_into(view[got:])
        if not read:
            raise ConnectionResetError("the X server closed the connection")
        got += read
    return bytes(buffer)


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
