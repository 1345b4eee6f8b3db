"""Each HTTP response's head and body in one socket write.

uvicorn's httptools cycle writes a response's status line and headers as soon as the app starts the response, then
its body: two `send` calls, two TCP segments, and a second wake-up of the client for every response. Here the head
waits for the first write after it, and goes out with it; if none comes within the event loop's turn (a stream whose
first event is not ready, a file being read), it goes alone on the next turn, so no client waits for headers longer
than it did. A `100 Continue` is written at once, as before; the bytes on the wire are the same. On a bare ASGI app
this took 35-45 us of server CPU off each request (docs/benchmarks.md, "Peers").

It reads uvicorn's internals (the cycle's `transport` and `send`), so it is installed only on the uvicorn it was
written against (api/cli/uvicorn_pin.py); any other keeps two writes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http import httptools_impl

from api.cli.uvicorn_pin import pinned


class HeadHolding:
    """A connection's transport as one response cycle sees it: while `holding`, a write is the head, kept until
    the next write or the loop's next turn; every other call passes through."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.holding = False
        self.head: bytes | None = None

    def write(self, data: bytes) -> None:
        if self.holding:
            self.head = data
            asyncio.get_running_loop().call_soon(self.flush)
        elif self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head + data)
        else:
            self.transport.write(data)

    def flush(self) -> None:
        if self.head is not None:
            head, self.head = self.head, None
            if not self.transport.is_closing():
                self.transport.write(head)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class OneWriteCycle(httptools_impl.RequestResponseCycle):
    """uvicorn's request-response cycle, writing through `HeadHolding`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transport = HeadHolding(self.transport)  # type: ignore[assignment]

    async def send(self, message: Any) -> None:
        if message["type"] != "http.response.start":
            await super().send(message)
            return
        transport: HeadHolding = self.transport  # type: ignore[assignment]
        transport.holding = True
        try:
            await super().send(message)
        finally:
            transport.holding = False


def install() -> bool:
    """Make uvicorn's httptools protocol answer through `OneWriteCycle`; False on another uvicorn (left as it is)."""
    if not pinned():
        return False
    httptools_impl.RequestResponseCycle = OneWriteCycle  # type: ignore[misc]
    return True
