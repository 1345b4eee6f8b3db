"""A response's head and body go out in one write (api/cli/response_writes.py): through a real uvicorn server on
loopback whose connections' writes are recorded, for a plain response, a stream whose first event comes late, and a
`100 Continue`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http import httptools_impl

from api.cli import response_writes
from tests.support.uvicorn_thread import serving

WRITES: list[bytes] = []


class Recording:
    """A connection's real transport, with every write a response cycle makes recorded."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.inner = transport

    def write(self, data: bytes) -> None:
        WRITES.append(bytes(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def plain(request: Request) -> Response:
    await request.body()
    return Response(b'{"ok":true}', media_type="application/json")


async def stream(request: Request) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.5)  # the first event comes late: the head must not wait for it
        yield b"data: 1\n\n"
    return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(httptools_impl, "RequestResponseCycle", httptools_impl.RequestResponseCycle)  # put back after
    if not response_writes.install():
        pytest.skip(f"uvicorn {uvicorn.__version__} is not the pinned one: responses keep two writes")
    original = response_writes.OneWriteCycle.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **{**kwargs, "transport": Recording(kwargs["transport"])})
    monkeypatch.setattr(response_writes.OneWriteCycle, "__init__", recording)
    app = Starlette(routes=[Route("/plain", plain, methods=["GET", "POST"]), Route("/stream", stream)])
    with serving(app, http="httptools") as number:
        WRITES.clear()
        yield number


def received(sock: socket.socket, until: bytes) -> list[bytes]:
    """The chunks the client reads until `until` has arrived."""
    chunks: list[bytes] = []
    while until not in b"".join(chunks):
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection; got {chunks}"
        chunks.append(chunk)
    return chunks


def test_a_response_is_one_write(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /plain HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b"".join(received(sock, b'{"ok":true}'))
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 11\r\n" in answer
    assert len(WRITES) == 1 and WRITES[0] == answer


def test_a_stream_gets_its_head_before_its_late_first_event(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = received(sock, b"\r\n\r\n")
        assert b"data:" not in b"".join(first), "the head came with the event, not before it"
        received(sock, b"data: 1")
    assert WRITES[0].startswith(b"HTTP/1.1 200 OK\r\n") and b"data:" not in WRITES[0]


def test_100_continue_is_written_before_the_body_is_sent(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /plain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert b"".join(received(sock, b"\r\n\r\n")).startswith(b"HTTP/1.1 100 Continue\r\n")
        sock.sendall(b"{}")
        answer = b"".join(received(sock, b'{"ok":true}'))
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert WRITES[-1] == answer, "the head and the body went in one write"
