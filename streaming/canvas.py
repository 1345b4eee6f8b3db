"""The picture handed to the encoder: the latest screen image with the pointer drawn in, as yuv420p.

One preallocated BGRX frame is refilled for every picture (a fresh 5 MB frame per picture costs
2-14 ms more, docs/streaming.md); swscale then converts it to yuv420p. Odd screen sizes are
cropped by one column or row, since 4:2:0 video needs even dimensions.
"""

from __future__ import annotations

from av.video.frame import VideoFrame
from PIL import Image

from desktop.screen.cursor import Cursor
from desktop.screen.frames import Frame

BYTES_PER_PIXEL = 4


def video_size(width: int, height: int) -> tuple[int, int]:
    """The encoded size of a screen: even dimensions, at most one pixel smaller."""
    return width & ~1, height & ~1


class Canvas:
    """Renders frames of one screen size; use from one thread."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self._bgrx = VideoFrame(width, height, "bgr0")
        self._plane = self._bgrx.planes[0]
        self._stride = self._plane.line_size
        self._pixels = memoryview(self._plane)

    def render(self, frame: Frame, pointer: Cursor | None) -> VideoFrame:
        """A new yuv420p frame of `frame` (cropped to this canvas) with the pointer composited."""
        self._fill(frame)
        if pointer is not None and pointer.sprite is not None:
            self._draw(pointer)
        return self._bgrx.reformat(format="yuv420p")

    def _fill(self, frame: Frame) -> None:
        row = self.width * BYTES_PER_PIXEL
        source_row = frame.width * BYTES_PER_PIXEL
        if self._stride == row == source_row and frame.height == self.height:
            self._plane.update(frame.data)
            return
        data = memoryview(frame.data)
        for y in range(min(self.height, frame.height)):  # padded lines or a cropped column
            start = y * source_row
            self._pixels[y * self._stride:y * self._stride + min(row, source_row)] = data[start:start + row]

    def _draw(self, pointer: Cursor) -> None:
        sprite = pointer.sprite
        assert sprite is not None
        left, top = pointer.x - sprite.xhot, pointer.y - sprite.yhot
        x0, y0 = max(0, left), max(0, top)
        x1 = min(self.width, left + sprite.image.width)
        y1 = min(self.height, top + sprite.image.height)
        if x0 >= x1 or y0 >= y1:
            return
        width, height = x1 - x0, y1 - y0
        span = width * BYTES_PER_PIXEL
        offsets = [(y0 + r) * self._stride + x0 * BYTES_PER_PIXEL for r in range(height)]
        under = b"".join(self._pixels[o:o + span] for o in offsets)
        region = Image.frombytes("RGB", (width, height), under, "raw", "BGRX")
        shape = sprite.image.crop((x0 - left, y0 - top, x0 - left + width, y0 - top + height))
        region.paste(shape, (0, 0), shape)
        blended = region.tobytes("raw", "BGRX")
        for r, offset in enumerate(offsets):
            self._pixels[offset:offset + span] = blended[r * span:(r + 1) * span]
