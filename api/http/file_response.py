"""Streaming a file as an HTTP response, read off the event loop, stopped when the client goes away."""

from __future__ import annotations

from email.utils import formatdate

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from desktop.core.errors import RangeNotSatisfiable
from desktop.core.parsing import ascii_int
from desktop.files.filesystem import ReadHandle


class FileStreamResponse(Response):
    """Streams an open file with an exact content-length; stops reading if the client goes away."""

    media_type = "application/octet-stream"

    def __init__(self, handle: ReadHandle) -> None:
        self.handle = handle
        super().__init__(headers={"content-length": str(handle.size),
                                  "last-modified": _http_date(handle.modified_ns)})

    @classmethod
    def ranged(cls, handle: ReadHandle, header: str | None) -> FileStreamResponse:
        """The file, or the one range a `Range` header asks for (206, or 416 past its end; `byte_range`)."""
        try:
            span = byte_range(header, handle.size)
        except BaseException:
            handle.close()
            raise
        size = handle.size
        if span is not None:
            handle.narrow(*span)
        response = cls(handle)
        response.headers["accept-ranges"] = "bytes"
        if span is not None:
            response.status_code = 206
            response.headers["content-range"] = f"bytes {span[0]}-{span[1]}/{size}"
        return response

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


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range `(first, last)` (inclusive) asked for, or None for the whole file.

    Other units, several ranges and malformed values are ignored (RFC 9110 §14.2: the whole file
    is sent); a range that starts at or past the end is a 416.
    """
    if not header:
        return None
    unit, _, spec = header.partition("=")
    first, dash, last = spec.strip().partition("-")
    first, last = first.strip(), last.strip()
    if unit.strip().lower() != "bytes" or not dash or "," in spec:
        return None
    start, end = ascii_int(first), ascii_int(last)
    if not first:  # bytes=-n: the last n bytes
        if end is None:
            return None
        if end == 0 or size == 0:
            raise _unsatisfiable(size)
        return max(0, size - end), size - 1
    if start is None or (last and (end is None or end < start)):
        return None
    if start >= size:
        raise _unsatisfiable(size)
    return start, min(end, size - 1) if end is not None else size - 1


def _unsatisfiable(size: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(f"the range is outside the file's {size} bytes", size=size)


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    # The server drops writes to a closed connection silently; without this a gone client
    # would still have the whole file read for it.
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _http_date(ns: int) -> str:
    return formatdate(ns / 1e9, usegmt=True)
