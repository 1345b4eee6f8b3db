"""A WebSocket connection reads on while the app has a few messages waiting, instead of stopping after each one.

uvicorn 0.55's sans-I/O WebSocket protocol stops reading its socket after every message it queues for the app and
starts again once the app has taken it. On a command socket (docs/websocket.md), where the app takes each message
at once, that is two changes of the event loop's epoll set (two epoll_ctl calls and their bookkeeping) for every
message. Here reading stops only once QUEUED_MESSAGES wait in the queue, and starts again when the app has taken
them all: what the server holds for a client that sends faster than the app reads (a live view's input, a batch
of pipelined commands) stays bounded, without the stop and start per message.

It reads uvicorn's internals (`read_paused`, `queue`, `send_receive_event_to_app`), so it is used only on the
uvicorn it was written against (api/cli/uvicorn_pin.py); any other keeps its own protocol.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from api.cli.uvicorn_pin import pinned

QUEUED_MESSAGES = 4
"""Messages waiting for the app before the connection stops reading (uvicorn's own: 1). Each is at most the
server's WebSocket message limit, as before."""


class QueueBoundedReading(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol, pausing its reads at QUEUED_MESSAGES waiting messages, not at one."""

    def send_receive_event_to_app(self) -> None:
        paused = self.read_paused
        self.read_paused = True  # the base class pauses only when this is False: here it decides nothing
        try:
            super().send_receive_event_to_app()
        finally:
            self.read_paused = paused
        if not paused and self.queue.qsize() >= QUEUED_MESSAGES:
            self.read_paused = True  # the base class's `receive` resumes once the app has taken them all
            self.transport.pause_reading()


def protocol() -> type[asyncio.Protocol] | str:
    """The WebSocket protocol class for uvicorn's config: `QueueBoundedReading`, or "auto" on another uvicorn."""
    return QueueBoundedReading if pinned() else "auto"
