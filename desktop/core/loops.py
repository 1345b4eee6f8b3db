"""Handing work from a thread to the event loop: the one way a desktop's threads (the X watcher, the capture
loop, event producers) reach the loop, even while it is closing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any


def call_soon_from_thread(loop: asyncio.AbstractEventLoop | None, callback: Callable[..., object],
                          *args: Any) -> None:
    """Schedule `callback(*args)` on `loop` from another thread; nothing when there is no loop yet or it has
    closed (the server is gone: nobody is left to tell)."""
    if loop is None or loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):  # the loop closed in between
        loop.call_soon_threadsafe(callback, *args)
