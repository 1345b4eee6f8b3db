"""What the example tests share: a local web page over loopback HTTP, and Chromium showing it on the test's
desktop. The `desktop` fixture itself comes from the plugin (installed with sandbox-desktop)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_sandbox_desktop import Desktop

PAGES = Path(__file__).parent / "pages"
CHROMIUM_FLAGS = [
    "--no-sandbox",  # the desktop's apps run as this user, which may be root in a container
    "--no-first-run", "--disable-gpu", "--disable-background-networking", "--disable-sync",
    "--disable-component-update", "--test-type", "--window-position=0,0", "--window-size=1000,600",
]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """`pages/` served on a free loopback port: the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(PAGES))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()


@pytest.fixture
def order_page(desktop: Desktop, site: str) -> dict[str, Any]:
    """Chromium on the test's desktop showing the order form (its profile lives in the desktop's HOME,
    which the next test's reset empties), once the page's field is there: its window.

    The desktop is a sandbox with a network of its own: this machine's loopback, where `site` listens, is out
    of its reach until the site's port is forwarded to the same port of the desktop's own loopback."""
    desktop.update(network={"forwardHostPorts": [int(site.rsplit(":", 1)[1])]})
    desktop.launch("chromium", [*CHROMIUM_FLAGS, f"{site}/order.html"], wait=True, wait_timeout_ms=60000)
    window = desktop.expect_window(title_regex="^Order form", timeout=60)
    desktop.expect_element(role="textbox", name="Customer name", timeout=60)
    return window
