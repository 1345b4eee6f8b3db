"""A desktop's events, put together: the bus, the X watcher feeding it, and the process registry's exits.

`Desktop` owns one `DesktopEvents` for its whole life: the bus outlives stops and starts (a subscriber
sees `desktop.state_changed` across them); the watcher runs only while the desktop is active.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from desktop.core.loops import call_soon_from_thread
from desktop.events.bus import EventBus
from desktop.events.event_types import (
    DesktopStateChanged,
    EventData,
    ProcessExited,
    WindowClosed,
    WindowCreated,
    WindowFocused,
    WindowMoved,
    WindowState,
    WindowTitleChanged,
)
from desktop.events.xwatch import WatchThread
from desktop.processes import ManagedProcess, ProcessManager
from sandbox_desktop_wire.enums import DesktopRuntimeState, ProcessOwner


class DesktopEvents:
    """`bus` to subscribe to; `windows` (the X watcher) for the window model the events describe."""

    def __init__(self, processes: ProcessManager, home: Callable[[], Path]) -> None:
        self.bus = EventBus()
        self.windows = XWatch(self.bus)
        self._home = home
        # The registry is the server's, shared by every desktop: each desktop publishes the exits of its own apps.
        self._unlisten: Callable[[], None] | None = processes.listen(self._exited, self.bus.end_streams)

    def start(self, display: str) -> None:
        """The desktop became active on `display`."""
        self.windows.start(display)

    async def close(self) -> None:
        """The desktop stops: the watcher ends; subscribers stay (the bus is the Desktop's)."""
        await self.windows.close()

    def shutdown(self) -> None:
        """The Desktop goes away: event streams end, exits are no longer listened to."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        self.bus.end_streams()

    def state_changed(self, previous: DesktopRuntimeState, state: DesktopRuntimeState) -> None:
        self.bus.publish(DesktopStateChanged(previous, state))

    def _exited(self, process: ManagedProcess) -> None:
        # The desktop's apps are started in its HOME (desktop/apps/launch.py), which no other desktop shares; user
        # processes of /v1/processes are the server's, followed through their own log streams.
        if process.owner is ProcessOwner.DESKTOP and process.cwd == str(self._home()):
            self.bus.publish(ProcessExited(process.id, process.pid, process.command, tuple(process.args),
                                           process.exit_code, process.exit_signal))


class XWatch:
    """The loop side: starts the thread with the desktop, restarts it if its connection breaks, and keeps
    the window model the published events describe."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self.windows: dict[int, WindowState] = {}
        self.active: int | None = None
        self._thread: WatchThread | None = None
        self._display: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._restarts = 0
        self._screen = False
        self._armed = asyncio.Event()
        """Set while the watcher reports damage (desktop/events/xwatch.py `screen_armed`)."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, display: str) -> None:
        """Watch `display` (the desktop became active)."""
        self._loop = asyncio.get_running_loop()
        self.bus.bind()
        self._display = display
        self._start_thread()
        self.bus.on_screen_interest(self._set_screen)

    def _start_thread(self) -> None:
        assert self._display is not None
        thread = WatchThread(self._display, self._from_thread, self._exited_threadsafe, self._armed_threadsafe)
        self._thread = thread
        thread.set_screen(self._screen)
        thread.start()

    def _set_screen(self, on: bool) -> None:
        self._screen = on
        if not on:
            self._armed.clear()  # at once: an observer that comes before the thread says so must wait for it
        if self._thread is not None:
            self._thread.set_screen(on)

    def _from_thread(self, event: EventData, t: float) -> None:
        call_soon_from_thread(self._loop, self._apply, threading.current_thread(), event, t)

    def _armed_threadsafe(self, armed: bool) -> None:
        call_soon_from_thread(self._loop, self._set_armed, threading.current_thread(), armed)

    def _set_armed(self, thread: threading.Thread, armed: bool) -> None:
        if thread is self._thread:
            (self._armed.set if armed else self._armed.clear)()

    async def screen_armed(self, timeout_s: float) -> bool:
        """Wait until drawing is reported as screen events (someone subscribed to them), at most `timeout_s`;
        whether it is. Drawing before that is not seen: an observer of an action starts the action after this."""
        if not self.running:
            return False
        try:
            async with asyncio.timeout(timeout_s):
                await self._armed.wait()
        except TimeoutError:
            return False
        return True

    def _exited_threadsafe(self, thread: WatchThread) -> None:
        call_soon_from_thread(self._loop, self._exited, thread)

    def _apply(self, thread: threading.Thread, event: EventData, t: float) -> None:
        if thread is not self._thread:
            return  # a stopped watcher's last words
        self._restarts = 0
        match event:
            case WindowCreated(window=window) | WindowMoved(window=window) | WindowTitleChanged(window=window):
                self.windows[window.id] = window
            case WindowClosed(window_id=window_id):
                self.windows.pop(window_id, None)
            case WindowFocused(window_id=window_id):
                self.active = window_id
        self.bus.publish(event, t=t)

    async def close(self) -> None:
        """Stop watching (the desktop stops): every window it knew is gone with the X server."""
        self.bus.remove_screen_hook(self._set_screen)
        thread, self._thread, self._display = self._thread, None, None
        if thread is not None:
            thread.stop()
            await asyncio.to_thread(thread.join, 2.0)
        self._forget_all()

    def _forget_all(self) -> None:
        self._armed.clear()
        for wid, state in sorted(self.windows.items()):
            self.bus.publish(WindowClosed(wid, state.title))
        self.windows.clear()
        self.active = None

    def _exited(self, thread: WatchThread) -> None:
        """A watcher whose connection broke (the X server restarted) starts again, with a backoff."""
        if thread is not self._thread or self._loop is None:
            return  # stopped by `close`
        self._restarts += 1
        self._thread = None
        self._forget_all()
        delay = min(0.1 * 2 ** min(self._restarts, 5), 2.0)
        self._loop.call_later(delay, self._restart)

    def _restart(self) -> None:
        if self._display is not None and self._thread is None:
            self._start_thread()
