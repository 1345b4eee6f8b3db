"""An upload that never ends: a client that goes away in the middle of a file's body (tests/api/files)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import quote, urlsplit


def abandon_upload(url: str, path: str, token: str | None, sent: int = 3_000_000, declared: int = 10_000_000) -> None:
    """PUT `sent` of the `declared` bytes of a file body to `url` (`.../fs/file`) with `path`, then close the
    connection; returns once the server had time to start writing its temporary file."""
    where = urlsplit(url)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (f"PUT {where.path}?path={quote(path)} HTTP/1.1\r\nHost: {where.netloc}\r\n{auth}"
               f"Content-Type: application/octet-stream\r\nContent-Length: {declared}\r\n\r\n").encode()
    with socket.create_connection((where.hostname, where.port), timeout=5) as sock:
        sock.sendall(request + b"x" * sent)
        time.sleep(0.2)  # let the server start writing the temporary file


def names_once_settled(folder: Path, timeout: float = 5.0) -> list[str]:
    """The names in `folder` once no temporary file of a write (`.partial`) is left in it, or after `timeout`."""
    deadline = time.monotonic() + timeout
    while any(p.name.endswith(".partial") for p in folder.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(p.name for p in folder.iterdir())
