"""A WebSocket connection stops reading only once a few messages wait for the app (api/cli/ws_reading.py): through a
real uvicorn server on loopback, an app that takes each message at once never makes it stop, one that is slow
makes it stop with at most QUEUED_MESSAGES (and the one being read) held, and every message arrives, in order."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.sync.client import connect

from api.cli import ws_reading
from tests.support.uvicorn_thread import serving

PAUSES: list[int] = []
"""For each time a connection stopped reading: how many messages waited for the app then."""
SLOW = threading.Event()
"""Set while the app holds off reading."""


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    while True:
        while SLOW.is_set():
            await asyncio.sleep(0.01)
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        await websocket.send_text(str(len(message.get("bytes") or message.get("text") or "")))


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    protocol = ws_reading.protocol()
    if isinstance(protocol, str):
        pytest.skip(f"uvicorn {uvicorn.__version__} is not the pinned one: it keeps its own protocol")
    original = ws_reading.QueueBoundedReading.send_receive_event_to_app

    def counted(self: Any) -> None:
        paused = self.read_paused
        original(self)
        if self.read_paused and not paused:
            PAUSES.append(self.queue.qsize())
    monkeypatch.setattr(ws_reading.QueueBoundedReading, "send_receive_event_to_app", counted)
    PAUSES.clear()
    SLOW.clear()
    with serving(Starlette(routes=[WebSocketRoute("/ws", echo)]), ws=protocol) as port:
        yield f"ws://127.0.0.1:{port}/ws"
        SLOW.clear()


def test_an_app_that_takes_each_message_at_once_never_stops_the_reading(url: str) -> None:
    with connect(url, compression=None) as ws:
        for i in range(200):
            ws.send("x" * i)
            assert ws.recv(timeout=10) == str(i)
    assert PAUSES == []


def test_a_slow_app_stops_the_reading_with_a_few_messages_held_and_gets_them_all_in_order(url: str) -> None:
    size = 300_000  # a message takes several reads of the socket: the pause falls between messages
    with connect(url, compression=None, max_size=None) as ws:
        SLOW.set()
        sender = threading.Thread(target=lambda: [ws.send(bytes([i]) * (size + i)) for i in range(20)], daemon=True)
        sender.start()
        time.sleep(1)
        assert PAUSES and max(PAUSES) <= ws_reading.QUEUED_MESSAGES + 1, PAUSES
        SLOW.clear()
        sender.join(20)
        assert [ws.recv(timeout=20) for _ in range(20)] == [str(size + i) for i in range(20)]
