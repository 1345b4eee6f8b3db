"""How both clients send a `Call` and read what comes back: httpx's options, the error a non-2xx status
raises, a download's size, and the event stream's Server-Sent Events."""

from __future__ import annotations

import json
from typing import Any

import httpx

from sandbox_desktop_wire.events import DesktopEvent

from ._base import Call
from .errors import error_for

DEFAULT_TIMEOUT = 30.0
DOWNLOAD_CHUNK = 1 << 20
EVENTS_READ_TIMEOUT = 45.0
"""The server sends a keep-alive every 15 s: a stream silent for this long is broken."""


def client_options(url: str, token: str | None, timeout: float) -> dict[str, Any]:
    """Keyword arguments for `httpx.Client`/`httpx.AsyncClient`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return {"base_url": url.rstrip("/"), "headers": headers, "timeout": timeout}


def request_options(call: Call[Any], timeout: float | None) -> dict[str, Any]:
    """Keyword arguments for `client.request(...)` / `client.build_request(...)`."""
    options: dict[str, Any] = {"params": call.params or None, "json": call.json}
    if call.content is not None:
        options["content"] = call.content
    if call.extra_timeout and timeout is not None:
        options["timeout"] = timeout + call.extra_timeout
    return options


def check(response: httpx.Response) -> None:
    """Raise `ApiError` for a non-2xx response (its body read)."""
    if not response.is_success:
        raise error_for(response)


def content_length(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length")
    return int(value) if value and value.isascii() and value.isdigit() else None


def events_timeout(timeout: float | None) -> httpx.Timeout:
    return httpx.Timeout(timeout, read=max(timeout or 0, EVENTS_READ_TIMEOUT))


class SseDecoder:
    """Server-Sent Events, one line at a time: `feed` returns the event a blank line completes."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> DesktopEvent | None:
        if line.startswith("data:"):
            self._data.append(line[5:].removeprefix(" "))
        elif not line and self._data:
            text, self._data = "\n".join(self._data), []
            return DesktopEvent.model_validate_json(text) if '"seq"' in text else _missed(text)
        return None  # `id:`, `event:` (both repeated in the JSON) and `:` comments


def _missed(text: str) -> DesktopEvent:
    """`events.missed` has no `seq` of its own: it stands between two events."""
    return DesktopEvent.model_validate({"seq": 0, "t": 0.0, "at": "", **json.loads(text)})

