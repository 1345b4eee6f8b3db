"""One thread that owns one X connection; every call runs there, in arrival order.

python-xlib objects are not thread-safe, so each connection lives in exactly one thread and the
event loop hands work to it (design §2). A lost connection (the X server restarted) is dropped
and reopened on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.protocol import display as xprotocol

from desktop.errors import DesktopError

# python-xlib 0.33 keeps the unparsed rest of its receive buffer in a `bytesview` that has no buffer
# protocol, and `bytes(view)` then copies it one `__getitem__` call per byte: about 0.3 s per MB of a
# large reply received in pieces. Teaching it `__bytes__` makes that copy a memcpy, for every connection.
# Done here, where every connection of the service is opened.
if not hasattr(xprotocol.bytesview, "__bytes__"):
    xprotocol.bytesview.__bytes__ = lambda self: self.view.tobytes()

T = TypeVar("T")
logger = logging.getLogger("sandbox_desktop.x")

# Errors that mean the connection itself is gone, not that one request failed.
_CONNECTION_ERRORS = (xerror.ConnectionClosedError, xerror.DisplayConnectionError, BrokenPipeError,
                      ConnectionResetError, OSError)


def open_display(name: str) -> xdisplay.Display:
    """Connect to an X display; raises DisplayConnectionError when it does not answer."""
    return xdisplay.Display(name)


class XThread:
    """A single-thread executor with its own `Xlib.display.Display`."""

    def __init__(self, display_name: str, name: str) -> None:
        self.display_name = display_name
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"x-{name}")
        self._display: xdisplay.Display | None = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(display, *args)` in the owning thread and return its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, fn, args)

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        for attempt in (1, 2):
            try:
                if self._display is None:
                    self._display = open_display(self.display_name)
                result = fn(self._display, *args)
                self._discard_events(self._display)
                return result
            except _CONNECTION_ERRORS as exc:
                self._drop()
                if attempt == 2:
                    raise DesktopError(
                        "desktop_runtime_failed",
                        f"X display {self.display_name} is not answering ({exc}); the desktop may be restarting",
                        headers={"Retry-After": "1"},
                    ) from exc
        raise AssertionError("unreachable")

    @staticmethod
    def _discard_events(display: xdisplay.Display) -> None:
        # Nothing on these connections reads events, but the server still sends some (MappingNotify
        # after every keymap change): without this they would pile up in python-xlib's queue forever.
        while display.pending_events():
            display.next_event()

    def _drop(self) -> None:
        if self._display is not None:
            with contextlib.suppress(Exception):  # the socket may already be broken
                self._display.close()
            self._display = None

    async def close(self) -> None:
        """Close the connection in its own thread and stop the thread."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._drop)
        self._executor.shutdown(wait=False)
