"""What the CLI's tests share: a web server that is not a sandbox-desktop server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture
def not_a_sandbox() -> Iterator[str]:
    """Some other web server: 200 and plain text to every request."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"hello")

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
