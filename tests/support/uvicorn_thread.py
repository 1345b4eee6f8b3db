"""A bare uvicorn server on a free loopback port, in a thread of the test's process, for tests of what the server
installs into uvicorn (api/cli/response_writes.py, api/cli/ws_reading.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


@contextlib.contextmanager
def serving(app: Any, **config: Any) -> Iterator[int]:
    """`app` served by uvicorn (asyncio loop, no lifespan, `config` on top) until the block ends; its port."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio",
                                           lifespan="off", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
