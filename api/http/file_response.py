"""Streaming a file as an HTTP response, read off the event loop, stopped when the client goes away."""

from __future__ import annotations

from email.utils import formatdate

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from desktop.files.filesystem import ReadHandle


class FileStreamResponse(Response):
    """Streams an open file with an exact content-length; stops reading if the client goes away."""

    media_type = "application/octet-stream"

    def __init__(self, handle: ReadHandle) -> None:
        self.handle = handle
        super().__init__(headers={"content-length": str(handle.size),
                                  "last-modified": _http_date(handle.modified_ns)})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            if scope["method"] != "HEAD":
                async with anyio.create_task_group() as group:
                    group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
                    async for chunk in self.handle.chunks():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    group.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.handle.close()


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    # The server drops writes to a closed connection silently; without this a gone client
    # would still have the whole file read for it.
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _http_date(ns: int) -> str:
    return formatdate(ns / 1e9, usegmt=True)
