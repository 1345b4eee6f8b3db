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
import contextlib
import io
import logging
import os
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
MAX_PROCESSES = 400
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
    out.write(watched(asyncio.get_running_loop()))
    out.write(descendants(os.getpid()))
    out.write(f"--- {len(names)} threads, {len(tasks)} tasks")
    return out.getvalue()


def watched(loop: asyncio.AbstractEventLoop) -> str:
    """The descriptors the loop waits on, what each is and what it calls, beside those the kernel's epoll set
    holds: a descriptor closed while still registered leaves the loop believing it watches the next file to get
    that number, which then never wakes its waiter."""
    selector = getattr(loop, "_selector", None)
    keys = selector.get_map() if selector is not None else {}
    lines = []
    for fd, key in sorted(keys.items()):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError as exc:
            target = f"({exc.strerror})"
        lines.append(f"  {fd} -> {target} {key.events:#x} {key.data!r}\n")
    epoll = getattr(selector, "_selector", None)
    try:
        with open(f"/proc/self/fdinfo/{epoll.fileno()}") as info:  # type: ignore[union-attr]
            kernel = sorted(int(line.split()[1]) for line in info if line.startswith("tfd:"))
    except (AttributeError, OSError, ValueError) as exc:
        kernel_text = f"unknown ({exc})"
    else:
        kernel_text = " ".join(map(str, kernel))
    return f"--- the loop's descriptors ({len(keys)}; in the kernel's epoll set: {kernel_text})\n{''.join(lines)}"


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


def descendants(root: int) -> str:
    """The server's descendant processes (its zygote, every sandbox's init, serving and call processes, the
    desktops' programs), each with its state and the kernel function it sleeps in."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            # "pid (comm) state ppid ...": the command's name may hold spaces and parentheses
            with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{entry}/stat") as stat:
                parents.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    lines: list[str] = []
    stack = [(child, 1) for child in sorted(parents.get(root, []), reverse=True)]
    while stack and len(lines) < MAX_PROCESSES:
        pid, depth = stack.pop()
        lines.append(f"{'  ' * depth}{pid} {_process(pid)}\n")
        stack.extend((child, depth + 1) for child in sorted(parents.get(pid, []), reverse=True))
    return f"--- processes under {root}\n{''.join(lines)}"


def _process(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as wchan:
            sleeping_in = wchan.read() or "-"
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "(gone)"
    return f"{state} {sleeping_in} {command}"
