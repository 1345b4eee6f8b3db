"""Screenshots: a fresh XShm grab per request, cropped, cursor-marked, scaled and encoded off the loop.

A few worker threads each own their own mss connection (and, once the cursor is asked for, a
python-xlib one), opened lazily for the session's display. A grab that fails drops the thread's
connections and retries once on new ones, which is how an X server restart is absorbed
(desktop/x11/reconnect.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import mss
from PIL import Image

from desktop.core.errors import InvalidAction, ScreenshotFailed
from desktop.screen.cursor import Cursor, CursorReader, composite, draw_marker
from desktop.screen.encode import MEDIA_TYPES, encode, scale_image, scaled_size
from desktop.screen.marks import MarkBox, draw_marks
from desktop.x11.reconnect import ReconnectOnce
from desktop.x11.session import Session
from sandbox_desktop_wire.enums import ScreenshotFormat

logger = logging.getLogger("sandbox_desktop.screen")

WORKERS = 2
"""Capture threads per display: one per core of the target machine; more only queue on the CPU."""
IMAGE_BLOCK_SIZE = 1 << 20  # 1 MB; Pillow's default is 16 MB
IMAGE_BLOCKS = 32
"""Freed Pillow image blocks kept for reuse (at most 32 MB): two workers' frames at 1440x900 fit."""
IDLE_RELEASE_S = 30.0
"""After this long without a screenshot, the kept image memory goes back to the OS."""


@dataclass(frozen=True)
class Region:
    """A rectangle in screen pixels."""

    x: int
    y: int
    width: int
    height: int

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height


@dataclass(frozen=True)
class ShotOptions:
    """What to capture and how to encode it; `region=None` is the whole screen."""

    format: ScreenshotFormat = ScreenshotFormat.PNG
    quality: int = 85
    scale: float = 1.0
    show_cursor: bool = False
    region: Region | None = None
    marks: tuple[MarkBox, ...] = ()
    """Set-of-marks boxes to draw (desktop/screen/marks.py)."""
    size: tuple[int, int] | None = None
    """The image's exact size instead of `scale`'s: a model's own resize, which may stretch an axis or enlarge
    (desktop/vendors/model_space.py)."""


@dataclass(frozen=True)
class Screenshot:
    """Encoded image bytes plus the coordinate frame they were taken in."""

    data: bytes
    media_type: str
    screen_width: int
    screen_height: int
    region: Region
    """The captured rectangle in screen pixels (the whole screen without a region)."""
    width: int
    height: int
    """Image size in pixels: `region` scaled by `scale`, rounded half up."""
    scale: float
    cursor: tuple[int, int] | None = None
    """Pointer position in screen pixels, when the cursor was asked for."""
    capture_seconds: float = 0.0
    """Time spent grabbing pixels (and the pointer) from the X server."""
    encode_seconds: float = 0.0
    """Time spent compositing, scaling and encoding."""


ShotObserver = Callable[[ShotOptions, Screenshot], None]
"""Told of every screenshot taken (metrics subscribe here); must be quick and must not raise."""


def check_region(region: Region, width: int, height: int) -> None:
    """Refuse a region that does not fit a `width`x`height` screen, naming the offending fields."""
    errors = []
    for start, size, limit in (("x", "width", width), ("y", "height", height)):
        origin, extent = getattr(region, start), getattr(region, size)
        if origin < 0 or origin >= limit:
            message = f"{start} must be between 0 and {limit - 1} on the {width}x{height} screen"
            errors.append({"location": "query", "field": start, "type": "out_of_range", "message": message})
        elif extent <= 0:
            errors.append({"location": "query", "field": size, "type": "out_of_range",
                           "message": f"{size} must be greater than 0"})
        elif origin + extent > limit:
            message = f"{start}+{size} = {origin + extent} exceeds the screen {size} {limit}"
            errors.append({"location": "query", "field": size, "type": "out_of_range", "message": message})
    if errors:
        raise InvalidAction(
            f"region {region.width}x{region.height} at ({region.x},{region.y}) exceeds the {width}x{height} "
            f"screen; keep x+width <= {width} and y+height <= {height}",
            errors=errors,
        )


def image_coordinate(offset: int, extent: int, size: int) -> int:
    """The image pixel holding the centre of the screen pixel `offset` into a capture `extent` wide."""
    return (2 * offset + 1) * size // (2 * extent)


class _Connections:
    """One worker thread's X connections: mss for pixels, python-xlib for the pointer (lazily)."""

    def __init__(self, display_name: str) -> None:
        self.display_name = display_name
        self._mss = mss.MSS(display=display_name)
        self._pointer: CursorReader | None = None

    def grab(self, region: Region) -> Image.Image:
        """The region's pixels now, as an RGB image (XShmGetImage, one copy out of shared memory)."""
        monitor = {"left": region.x, "top": region.y, "width": region.width, "height": region.height}
        shot = self._mss.grab(monitor)
        return Image.frombuffer("RGB", (region.width, region.height), shot.raw, "raw", "BGRX", 0, 1)

    def cursor(self) -> Cursor:
        if self._pointer is None:
            self._pointer = CursorReader(self.display_name)
        return self._pointer.read()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a connection the server dropped raises
            self._mss.close()
        if self._pointer is not None:
            self._pointer.close()


class _Pool:
    """Worker threads for one display; each opens its own connections on first use."""

    def __init__(self, display_name: str, workers: int, screen: tuple[int, int]) -> None:
        self.display_name = display_name
        self.screen = screen
        """The screen size the connections were opened at."""
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="screen")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[_Connections] = set()
        # Any failure means no picture; mss reports a lost connection as an AssertionError (a null xcb reply),
        # python-xlib as ConnectionClosedError, so the net is wide.
        self._reconnect = ReconnectOnce((Exception,), self._failed, drop=self._drop, retrying=self._reconnecting)

    async def shoot(self, options: ShotOptions, region: Region, screen: tuple[int, int]) -> Screenshot:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._shoot, options, region, screen)

    def _shoot(self, options: ShotOptions, region: Region, screen: tuple[int, int]) -> Screenshot:
        began = time.perf_counter()
        image, cursor = self._reconnect.run(self._grab, region, options.show_cursor)
        captured = time.perf_counter()
        return render(image, options, region, cursor, screen, began, captured)

    def _grab(self, region: Region, with_cursor: bool) -> tuple[Image.Image, Cursor | None]:
        conns = self._connections()
        image = conns.grab(region)
        return image, conns.cursor() if with_cursor else None

    def _reconnecting(self, exc: BaseException) -> None:
        logger.info("screen grab failed on %s (%s); reconnecting", self.display_name, exc)

    def _failed(self, exc: BaseException) -> ScreenshotFailed:
        return ScreenshotFailed(
            f"could not grab the screen of display {self.display_name} "
            f"({type(exc).__name__}: {exc}); the desktop may be restarting, retry shortly",
            retry_after=1,
        )

    def _connections(self) -> _Connections:
        conns: _Connections | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = _Connections(self.display_name)
            self._local.conns = conns
            with self._lock:
                self._open.add(conns)
        return conns

    def _drop(self) -> None:
        conns: _Connections | None = getattr(self._local, "conns", None)
        if conns is not None:
            self._local.conns = None
            with self._lock:
                self._open.discard(conns)
            conns.close()

    def close(self) -> None:
        """Wait for grabs in flight, then close every connection (their threads are gone by then)."""
        self._executor.shutdown(wait=True)
        with self._lock:
            remaining, self._open = self._open, set()
        for conns in remaining:
            conns.close()


def keep_image_blocks() -> None:
    """Let Pillow reuse freed image memory instead of returning it to the OS after every frame.

    By default each frame's buffers are fresh pages: ~3000 page faults and ~6 ms of CPU per 1440x900
    screenshot (measured in the server: PNG 26 -> 14 ms, JPEG at scale 0.5 13 -> 7 ms). Small uniform
    blocks keep the cache bounded and stop a small cached block being grown (faulted) for a big frame.
    PILLOW_BLOCK_SIZE and PILLOW_BLOCKS_MAX in the environment win.
    """
    if "PILLOW_BLOCKS_MAX" in os.environ or "PILLOW_BLOCK_SIZE" in os.environ:
        return
    Image.core.set_block_size(IMAGE_BLOCK_SIZE)
    Image.core.set_blocks_max(max(IMAGE_BLOCKS, Image.core.get_blocks_max()))


def release_image_memory() -> None:
    """Drop Pillow's kept blocks and hand the allocator's free pages back to the OS (glibc only)."""
    Image.core.clear_cache()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Screen:
    """Screenshots of the running desktop; constructed once by the Desktop."""

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._pool: _Pool | None = None
        self.observers: list[ShotObserver] = []
        self._busy = 0
        self._release: asyncio.TimerHandle | None = None
        keep_image_blocks()

    async def capture(self, session: Session, options: ShotOptions) -> Screenshot:
        """A fresh grab of the screen (or `options.region`) of `session`, encoded as asked."""
        region = options.region or Region(0, 0, session.width, session.height)
        check_region(region, session.width, session.height)
        pool = self._pool
        # A new size gets new connections too: an mss instance keeps the size it was opened at and fails to
        # grab once the screen changed (docs/display.md).
        if pool is None or (pool.display_name, pool.screen) != (session.display, (session.width, session.height)):
            old, pool = pool, _Pool(session.display, self._workers, (session.width, session.height))
            self._pool = pool
            if old is not None:
                await asyncio.to_thread(old.close)
        self._busy += 1
        if self._release is not None:
            self._release.cancel()
        try:
            shot = await pool.shoot(options, region, (session.width, session.height))
        finally:
            self._busy -= 1
            if not self._busy:
                # Kept blocks and glibc's per-thread arenas hold ~30 MB after a burst: an idle desktop gives
                # them back, an agent taking a screenshot every few seconds keeps the speed.
                loop = asyncio.get_running_loop()
                self._release = loop.call_later(IDLE_RELEASE_S, loop.run_in_executor, None, release_image_memory)
        for observe in self.observers:
            observe(options, shot)
        return shot

    async def close(self) -> None:
        """Stop the worker threads and close their connections; the next capture reopens them."""
        if self._release is not None:
            self._release.cancel()
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.close)


def render(image: Image.Image, options: ShotOptions, region: Region, cursor: Cursor | None,
           screen: tuple[int, int], began: float, captured: float) -> Screenshot:
    """The cursor, scale, marks and encoding of a captured `region` (`began`/`captured`: `perf_counter`
    times of the capture): the one way a screen's or a window's capture becomes a screenshot."""
    # Nothing is drawn for a pointer outside the region, not even the part of its image inside.
    shown = cursor if cursor is not None and region.contains(cursor.x, cursor.y) else None
    if shown is not None:
        composite(image, shown, region.x, region.y)
    size = options.size or scaled_size(region.width, region.height, options.scale)
    image = scale_image(image, size)
    if options.marks:
        draw_marks(image, options.marks, (region.x, region.y), (region.width, region.height))
    if shown is not None:
        draw_marker(image, image_coordinate(shown.x - region.x, region.width, size[0]),
                    image_coordinate(shown.y - region.y, region.height, size[1]))
    data = encode(image, options.format, options.quality)
    return Screenshot(
        data=data, media_type=MEDIA_TYPES[options.format],
        screen_width=screen[0], screen_height=screen[1], region=region, width=size[0], height=size[1],
        scale=options.scale, cursor=(cursor.x, cursor.y) if cursor is not None else None,
        capture_seconds=captured - began, encode_seconds=time.perf_counter() - captured,
    )
