"""One shared capture loop that feeds recording and streaming: latest frame wins.

A dedicated thread owns an mss connection (XShm grabs) and a python-xlib connection watching
XDamage on the root window. It ticks at the highest rate any subscriber asked for, grabs only
when something was drawn since the last grab (an idle screen costs a damage-event check per
tick), and publishes the newest frame; subscribers that fall behind skip frames, nothing queues.
Capture runs only while someone subscribes (docs/architecture.md), and for LINGER_S after the last one left,
grabbing nothing: the next subscriber (an agent's next settle, a test's next recording) finds the thread and its
connections open instead of paying ~15 ms to open them again. The screen may change size at runtime
(docs/display.md): the watcher hears RandR's ScreenChangeNotify and the grabber is re-opened at the new
size, so the next frame has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import mss
from mss.exception import ScreenShotError
from Xlib import X
from Xlib.display import Display
from Xlib.ext import damage, randr
from Xlib.xobject.drawable import Window

from desktop.core.errors import DesktopFailed
from desktop.core.loops import call_soon_from_thread
from desktop.x11.thread import open_display

logger = logging.getLogger("sandbox_desktop.frames")

MAX_FPS = 60
# After this many ticks without damage, grab anyway: a safety net for drawing XDamage misses.
REFRESH_TICKS = 300
LINGER_S = 5.0
"""How long a desktop's capture thread waits, idle, for a new subscriber after the last one left."""
IDLE_TICK_S = 1.0
"""While nobody subscribes, the thread wakes this often to drain its X events (a new subscriber wakes it at once)."""


@dataclass(frozen=True)
class Frame:
    """One captured screen image (BGRX, 4 bytes per pixel, `width * 4` bytes per row)."""

    seq: int
    """Increases by one per new image; equal sequence numbers mean identical pixels."""
    captured_at: float
    """`time.monotonic()` when the grab was taken: the capture clock for timestamps."""
    width: int
    height: int
    data: bytes


class Subscription:
    """A consumer of frames at up to `fps`; `await next()` returns the newest frame not yet seen.

    `fps` may be changed at any time (a streamer lowering its rate under CPU pressure): the capture
    thread reads the highest subscriber rate on every tick.
    """

    def __init__(self, source: FrameSource, fps: int) -> None:
        self.fps = fps
        self._source = source
        self._seen = 0
        self._wake = asyncio.Event()
        self.closed = False

    async def next(self, timeout: float | None = None) -> Frame | None:
        """The newest frame newer than the last one returned; None on timeout or when closed."""
        while not self.closed:
            frame = self._source.latest
            if frame is not None and frame.seq > self._seen:
                self._seen = frame.seq
                return frame
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return None
        return None

    def latest(self) -> Frame | None:
        """The newest frame, seen or not (for a consumer that repeats the last image)."""
        return self._source.latest

    def notify(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        """Stop receiving; the capture thread stops when its last subscriber leaves."""
        if not self.closed:
            self.closed = True
            self._wake.set()
            await self._source.unsubscribe(self)


class _Grabber:
    """XShm grabs of the whole screen at its current size.

    An mss instance keeps the size it was opened at (its shared-memory image too): after a resize it
    grabs the old area, and past a screen that shrank the grab fails. So a size change re-opens it.
    """

    def __init__(self, display_name: str, root: Window) -> None:
        self.display_name = display_name
        self._root = root
        self._mss: mss.base.MSSBase | None = None
        self.width = self.height = 0
        self.refresh()

    def refresh(self) -> bool:
        """Follow the screen's size (asked of the server); True if it changed."""
        geometry = self._root.get_geometry()
        size = (int(geometry.width), int(geometry.height))
        if self._mss is not None and size == (self.width, self.height):
            return False
        self.close()
        self._mss = mss.MSS(display=self.display_name)
        self.width, self.height = size
        return True

    def grab(self) -> bytes:
        assert self._mss is not None
        try:
            return bytes(self._mss.grab(self._area()).raw)
        except ScreenShotError:  # the screen shrank between the size check and the grab
            if not self.refresh():
                raise
            return bytes(self._mss.grab(self._area()).raw)

    def _area(self) -> dict[str, int]:
        return {"left": 0, "top": 0, "width": self.width, "height": self.height}

    def close(self) -> None:
        if self._mss is not None:
            with contextlib.suppress(Exception):  # the server may be gone
                self._mss.close()
            self._mss = None


class _CaptureThread(threading.Thread):
    """Grabs the screen at the subscribers' rate, only when damage says it changed."""

    def __init__(self, display_name: str, publish: Callable[[Frame], None], fps: Callable[[], int],
                 on_exit: Callable[[_CaptureThread], None], first_seq: int) -> None:
        super().__init__(name=f"frames-{display_name}", daemon=True)
        self.display_name = display_name
        self._publish = publish
        self._fps = fps
        self._on_exit = on_exit
        self._stopping = threading.Event()
        self._wake = threading.Event()
        """Set to end a sleep early: to stop, or because a subscriber came after a time without any."""
        self._grab_now = False
        """A subscriber came after a time without any: grab at the next tick, drawn or not."""
        self.seq = first_seq
        self.error: Exception | None = None

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def wake(self) -> None:
        """A subscriber came after a time without any: grab at once."""
        self._grab_now = True
        self._wake.set()

    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # any failure: the source restarts capture while anyone subscribes
            logger.warning("capture on %s stopped: %s", self.display_name, exc)
            self.error = exc
        finally:
            self._on_exit(self)

    def _loop(self) -> None:
        watcher = open_display(self.display_name)
        grabber: _Grabber | None = None
        try:
            if not watcher.has_extension("DAMAGE"):
                raise DesktopFailed("the X server has no DAMAGE extension")
            watcher.damage_query_version()  # the protocol requires it before any other DAMAGE request
            root = watcher.screen().root
            root.damage_create(damage.DamageReportNonEmpty)
            root.xrandr_select_input(randr.RRScreenChangeNotifyMask)
            grabber = _Grabber(self.display_name, root)
            watcher.sync()
            idle_ticks = REFRESH_TICKS  # grab at once
            next_tick = time.monotonic()
            while not self._stopping.is_set():
                damaged, resized = self._drain(watcher)
                if resized and grabber.refresh():
                    damaged = True
                fps = self._fps()
                if fps == 0:  # nobody subscribes (a linger): grab nothing; the next subscriber wakes us
                    self._wake.wait(IDLE_TICK_S)
                    self._wake.clear()
                    next_tick = time.monotonic()
                    continue
                if damaged or idle_ticks >= REFRESH_TICKS or self._grab_now:
                    self._grab_now = False
                    captured_at = time.monotonic()
                    raw = grabber.grab()
                    self.seq += 1
                    idle_ticks = 0
                    self._publish(Frame(self.seq, captured_at, grabber.width, grabber.height, raw))
                else:
                    idle_ticks += 1
                next_tick += 1.0 / min(MAX_FPS, fps)
                now = time.monotonic()
                if next_tick < now:  # fell behind: skip ticks rather than catch up in a burst
                    next_tick = now
                self._wake.wait(next_tick - now)
                self._wake.clear()
        finally:
            if grabber is not None:
                grabber.close()
            with contextlib.suppress(Exception):
                watcher.close()

    @staticmethod
    def _drain(watcher: Display) -> tuple[bool, bool]:
        """Drain the watcher's events: (anything drawn since the last call, the screen changed size)."""
        damaged = resized = False
        while watcher.pending_events():
            event = watcher.next_event()
            if event.type == watcher.extension_event.DamageNotify:
                damaged = True
                # Re-arm: NonEmpty damage reports once until the region is emptied again.
                watcher.damage_subtract(event.damage, X.NONE, X.NONE)
            elif event.type == watcher.extension_event.ScreenChangeNotify:
                resized = True
        if damaged:
            watcher.flush()
        return damaged, resized


class FrameSource:
    """The desktop's one capture loop; `subscribe(display, fps)` starts it, the last close stops it.

    If capture stops (the X server restarted), it is started again while anyone still subscribes;
    sequence numbers keep increasing across restarts.
    """

    def __init__(self, *, linger_s: float = 0.0) -> None:
        self.latest: Frame | None = None
        self.restarts = 0
        self._linger_s = linger_s
        """How long the thread outlives its last subscriber (a desktop's source: LINGER_S)."""
        self._linger: asyncio.TimerHandle | None = None
        self._subscribers: list[Subscription] = []
        self._thread: _CaptureThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0

    @property
    def fps(self) -> int:
        """The rate the loop ticks at: the highest any subscriber asked for."""
        return max((s.fps for s in self._subscribers), default=0)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def subscribe(self, display_name: str, fps: int) -> Subscription:
        """Receive frames of `display_name` at up to `fps` (1-60)."""
        if not 1 <= fps <= MAX_FPS:
            raise ValueError(f"fps must be between 1 and {MAX_FPS}, got {fps}")
        self._loop = asyncio.get_running_loop()
        subscription = Subscription(self, fps)
        self._subscribers.append(subscription)
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        thread = self._thread
        if thread is None or not thread.is_alive() or thread.display_name != display_name:
            if thread is not None:
                thread.stop()
            self.latest = None
            self._start_thread(display_name)
        elif len(self._subscribers) == 1:
            thread.wake()  # it lingered without subscribers: its next tick grabs
        return subscription

    def _start_thread(self, display_name: str) -> None:
        self._thread = _CaptureThread(display_name, self._publish_threadsafe, lambda: self.fps,
                                      self._exited_threadsafe, self._seq)
        self._thread.start()

    def _exited_threadsafe(self, thread: _CaptureThread) -> None:
        call_soon_from_thread(self._loop, self._exited, thread)

    def _exited(self, thread: _CaptureThread) -> None:
        self._seq = max(self._seq, thread.seq)
        if thread is not self._thread or thread.error is None or not self._subscribers:
            return
        self.restarts += 1
        delay = min(0.1 * 2 ** min(self.restarts, 5), 2.0)
        assert self._loop is not None
        self._loop.call_later(delay, self._restart, thread)

    def _restart(self, failed: _CaptureThread) -> None:
        if self._thread is failed and self._subscribers:
            self._start_thread(failed.display_name)

    def failure(self) -> Exception | None:
        """Why the capture thread stopped, if it did (the X server went away, say)."""
        thread = self._thread
        return thread.error if thread is not None and not thread.is_alive() else None

    def _publish_threadsafe(self, frame: Frame) -> None:
        call_soon_from_thread(self._loop, self._publish, frame)

    def _publish(self, frame: Frame) -> None:
        self._seq = max(self._seq, frame.seq)
        self.restarts = 0
        self.latest = frame
        for subscription in self._subscribers:
            subscription.notify()

    async def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)
        if self._subscribers:
            return
        if self._linger_s > 0 and self.running:
            self.latest = None  # the screen goes on changing unwatched: a later subscriber waits for a new grab
            if self._linger is None:
                self._linger = asyncio.get_running_loop().call_later(self._linger_s, self._stop_unwatched)
        else:
            await self._stop_thread()

    def _stop_unwatched(self) -> None:
        """LINGER_S after the last subscriber left with no other since: let the thread end."""
        self._linger = None
        thread = self._thread
        if not self._subscribers and thread is not None:
            self._thread = None
            thread.stop()  # it ends within a tick; `_exited` keeps its sequence number

    async def _stop_thread(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()
            await asyncio.to_thread(thread.join, 2.0)
            self._seq = max(self._seq, thread.seq)
        self.latest = None

    async def close(self) -> None:
        """Stop capturing and wake every subscriber with a closed subscription."""
        for subscription in list(self._subscribers):
            subscription.closed = True
            subscription.notify()
        self._subscribers.clear()
        await self._stop_thread()
