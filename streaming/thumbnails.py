"""A desktop's thumbnail: its screen, small and as JPEG, a few times a second, for the wall (docs/inspector.md).

One source per desktop, shared by every wall that shows it: it subscribes to the desktop's capture loop
(desktop/screen/frames.py: damage-driven, so a still screen is not grabbed again) at `FPS`, scales each new frame
down to `WIDTH` pixels wide and encodes it to JPEG once, then hands the same bytes to every subscriber. It runs
from the first subscriber to the last: nobody watching, nothing is grabbed or encoded. A desktop that is not
running yet (or stopped) is waited for, and followed when it starts again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image

from desktop.screen.encode import encode, scale_image
from desktop.screen.frames import Frame, FrameSource
from sandbox_desktop_wire.enums import ScreenshotFormat

logger = logging.getLogger("sandbox_desktop.thumbnails")

FPS = 2
"""A wall shows many desktops at once: twice a second says what each does at a fraction of the live view's cost."""
WIDTH = 320
"""Pixels wide: a tile of the wall (a screen narrower than this is not enlarged)."""
QUALITY = 70
"""JPEG quality: a 320 px picture of a desktop is 8-20 KB."""
RETRY_S = 1.0
"""How often a source whose desktop does not run looks again."""
MAX_TICKS = 1 << 40
"""The loop's bound (years at FPS): it ends when its last subscriber leaves."""


@dataclass(frozen=True)
class Thumbnail:
    seq: int
    """The capture's sequence number: equal numbers, equal pixels."""
    width: int
    height: int
    jpeg: bytes


Listener = Callable[[Thumbnail], None]


def thumbnail(frame: Frame, width: int = WIDTH, quality: int = QUALITY) -> Thumbnail:
    """`frame` scaled to `width` pixels wide (never enlarged) as JPEG."""
    image = Image.frombuffer("RGB", (frame.width, frame.height), frame.data, "raw", "BGRX", 0, 1)
    if frame.width > width:
        image = scale_image(image, (width, max(1, round(frame.height * width / frame.width))))
    return Thumbnail(frame.seq, image.width, image.height, encode(image, ScreenshotFormat.JPEG, quality))


class ThumbnailSource:
    """One desktop's thumbnails for every wall watching it; `subscribe` starts it, the last `unsubscribe` stops it."""

    def __init__(self, frames: FrameSource, display: Callable[[], str | None], fps: int = FPS,
                 width: int = WIDTH) -> None:
        self._frames = frames
        self._display = display
        self.fps = fps
        self.width = width
        self.latest: Thumbnail | None = None
        self.encodes = 0
        """Pictures encoded since the server started: one per new frame, however many walls watch."""
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def subscribers(self) -> int:
        return len(self._listeners)

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` with every new thumbnail (at once with the newest, if there is one)."""
        self._listeners.append(listener)
        if self.latest is not None:
            listener(self.latest)
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="thumbnails")

    async def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
        if self._listeners or self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self.latest = None  # the screen goes on changing unwatched: the next wall waits for a new picture

    async def _run(self) -> None:
        for _ in range(MAX_TICKS):
            display = self._display()
            if display is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                await self._follow(display)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the desktop failed under us: look again in a while
                logger.warning("thumbnails of %s: %s", display, exc)
            await asyncio.sleep(RETRY_S)

    async def _follow(self, display: str) -> None:
        """Thumbnails of `display` until its capture ends (the desktop stopped) or nobody watches."""
        subscription = self._frames.subscribe(display, self.fps)
        try:
            for _ in range(MAX_TICKS):
                frame = await subscription.next(timeout=RETRY_S)
                if subscription.closed or self._display() != display:
                    return
                if frame is None:
                    continue
                started = time.monotonic()
                picture = await asyncio.to_thread(thumbnail, frame, self.width)
                self.encodes += 1
                self.latest = picture
                for listener in list(self._listeners):
                    listener(picture)
                # The capture loop may tick faster for another subscriber (a live view): keep to our rate.
                await asyncio.sleep(max(0.0, 1.0 / self.fps - (time.monotonic() - started)))
        finally:
            with contextlib.suppress(Exception):
                await subscription.close()
