"""Many desktops from the clients: `client.desktops.create(...)` returns a handle that has every method
of the client, bound to that desktop (docs/desktops.md, docs/client.md).

    with Client() as client:
        with client.desktops.create(tags={"agent": "a1"}, ttl_seconds=3600) as desktop:
            desktop.launch("xterm", wait=True)
            desktop.screenshot().save("screen.png")
        # leaving the `with` deleted the desktop

A handle shares its client's connection pool: close the client, not the handle.

The classes are defined beside the clients that make them (client.py, async_client.py), which keeps the
package free of import circles; they are named here too for code that imports them from this module.
"""

from __future__ import annotations

from .async_client import AsyncDesktopClient, AsyncDesktops
from .client import DesktopClient, Desktops

__all__ = ["AsyncDesktopClient", "AsyncDesktops", "DesktopClient", "Desktops"]
