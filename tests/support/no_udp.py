"""A browser's network where UDP does not get through, and the inspector's live view in it: what
tests/ui/test_live_fallback.py and bench/live_fallback.py share.

The namespace is tests/support/browser.py's `PrivateNetwork`, with nftables dropping UDP both ways: WebRTC's ICE
cannot connect, while TCP (the page, its API calls and WebSockets) passes.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

from tests.support.browser import Browser, Page, PrivateNetwork

NO_UDP = """table inet nodgram {
  chain out {
    type filter hook output priority 0;
    meta l4proto udp drop
  }
  chain in {
    type filter hook input priority 0;
    meta l4proto udp drop
  }
}
"""
INSPECTOR_CANVAS = "document.getElementById('live-canvas')"


def drop_udp(net: PrivateNetwork) -> None:
    """From now on, UDP in and out of `net`'s namespace is dropped."""
    subprocess.run(["ip", "netns", "exec", net.name, "nft", "-f", "-"], input=NO_UDP, text=True, check=True,
                   capture_output=True, timeout=10)


@contextlib.contextmanager
def network_without_udp() -> Iterator[PrivateNetwork]:
    """A private network for a browser, its UDP dropped both ways."""
    with PrivateNetwork.create() as net:
        drop_udp(net)
        yield net


def open_inspector(browser: Browser, url: str, token: str | None) -> Page:
    """The inspector at `url` (its `/ui/`) opened with a token and nothing else, as a person opens the link
    `sandbox-desktop viewer` prints: it connects its live view by itself, in the automatic transport."""
    return browser.new_page(f"{url}#token={token or ''}")


def canvas_state(page: Page, canvas: str = INSPECTOR_CANVAS) -> dict[str, Any]:
    """The canvas's size and how many distinct colours a sample of its pixels has (1: blank)."""
    return dict(page.evaluate(
        f"(() => {{ const c = {canvas};"
        " if (!c.width || c.hidden) return {width: 0, colours: 0};"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; const seen = new Set();"
        " for (let i = 0; i < d.length; i += 4 * 997) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);"
        " return {width: c.width, height: c.height, colours: seen.size}; })()"))
