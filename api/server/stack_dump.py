"""What a running server is doing: `kill -USR1 <pid>` logs the stack of every thread and every asyncio task.

A request that never answers (an X call waiting on a display, a lock never released, a sandbox helper that stopped
replying) shows nothing in the log by itself: by the time anyone looks, only the client's timeout is left. The
stacks say where each request and each X, clipboard or recording thread stands (docs/operations.md, "What is it
doing?"). The test suite signals its servers when a test fails and attaches this to the report (tests/conftest.py).

The dump runs on the event loop, as an asyncio signal handler: it can read the tasks' stacks only there. A loop that
never gets to it is itself the answer: something blocks the loop thread (then `py-spy dump --pid` shows what).
"""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNAL = signal.SIGUSR1
MARK = "stack dump"
"""The first words of the dump's log message (tests/conftest.py waits for them)."""
TASK_FRAMES = 30
"""Frames shown per task: a coroutine's chain of awaits, innermost last."""

logger = logging.getLogger("sandbox_desktop.diagnostics")


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Dump on SIGNAL; a no-op where the loop cannot take signal handlers (not the main thread, Windows)."""
    try:
        loop.add_signal_handler(SIGNAL, dump)
    except (NotImplementedError, RuntimeError, ValueError) as exc:
        logger.debug("no stack dump on %s: %s", SIGNAL.name, exc)


def dump() -> None:
    """Log every thread's stack but this one's (the loop's, here in the handler) and every task's."""
    logger.warning("%s\n%s", MARK, describe())


def describe() -> str:
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    here = threading.get_ident()
    out = io.StringIO()
    for ident, frame in sys._current_frames().items():
        if ident == here:
            continue
        out.write(f"--- thread {names.get(ident, ident)}\n")
        out.writelines(traceback.format_stack(frame))
    tasks = sorted(asyncio.all_tasks(), key=lambda task: task.get_name())
    for task in tasks:
        out.write(f"--- task {task.get_name()} ({task.get_coro()!r})\n")
        out.writelines(traceback.format_list(traceback.StackSummary.extract(awaiting(task.get_coro()))))
    out.write(f"--- {len(names)} threads, {len(tasks)} tasks")
    return out.getvalue()


def awaiting(coroutine: Any) -> Iterator[tuple[FrameType, int]]:
    """The frames of a suspended coroutine and of what it awaits, outermost first, to the innermost coroutine or
    generator (`Task.get_stack` gives only the outermost: a request's would end in the ASGI app's first frame)."""
    for _ in range(TASK_FRAMES):
        frame = getattr(coroutine, "cr_frame", None) or getattr(coroutine, "ag_frame", None) \
            or getattr(coroutine, "gi_frame", None)
        if frame is None:
            return
        yield frame, frame.f_lineno
        coroutine = getattr(coroutine, "cr_await", None) or getattr(coroutine, "ag_await", None) \
            or getattr(coroutine, "gi_yieldfrom", None)
