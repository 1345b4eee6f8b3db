"""The PyAV writer: BGRX screen frames in, a crash-safe fragmented H.264 MP4 out.

Blocking and not thread-safe: one recording's writer is used from its one encoder thread only.
Timestamps are milliseconds on the capture clock (time base 1/1000), so the video plays at real
speed whatever the frame rate was; the fragments are flushed to the file at least every
`fragment_ms`, so a killed process leaves a file that plays up to about that long before the kill.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from av.video.frame import PictureType, VideoFrame
from av.video.reformatter import ColorRange, Colorspace

TIME_BASE = Fraction(1, 1000)
# ITU-T H.273 code points: BT.709 primaries, transfer and matrix, as sRGB screens are usually tagged.
BT709 = 1


@dataclass(frozen=True)
class EncoderSettings:
    """How recordings are encoded (measured choices: bench/recording.py, docs/recording.md)."""

    preset: str = "ultrafast"
    """x264 preset: `ultrafast` keeps a busy 1440x900 screen at 30 fps under a quarter of a core."""
    tune: str = "zerolatency"
    """No lookahead or B-frames: each frame leaves the encoder at once, so fragments stay current."""
    crf: int = 23
    """Constant quality; 23 keeps 9-point terminal text legible."""
    threads: int = 1
    """Encoder threads; more only add overhead on a 2-core box shared with the desktop."""
    keyframe_s: float = 2.0
    """At most this long between keyframes of a changing screen (seek granularity)."""
    fragment_ms: int = 500
    """Fragment length: what a crash can lose, at most (plus the time since the last frame)."""


class Mp4Writer:
    """A fragmented MP4 (`frag_keyframe+empty_moov+default_base_moof`) with one H.264 yuv420p track."""

    def __init__(self, path: Path, width: int, height: int, fps: int,
                 settings: EncoderSettings | None = None) -> None:
        self.settings = settings or EncoderSettings()
        # yuv420p needs even dimensions: an odd last row or column is left out.
        self.width = width - width % 2
        self.height = height - height % 2
        self.fps = fps
        self.frames = 0
        self.last_ms = -1
        self._last_key_ms: float = float("-inf")
        self._image: VideoFrame | None = None
        self._bgrx = VideoFrame(self.width, self.height, "bgra")
        options = {
            "movflags": "frag_keyframe+empty_moov+default_base_moof",
            "frag_duration": str(self.settings.fragment_ms * 1000),
            "flush_packets": "1",  # hand each fragment to the kernel at once, not when a buffer fills
        }
        self._container = av.open(str(path), "w", format="mp4", options=options)
        try:
            self._stream = self._container.add_stream("libx264", rate=fps)
            ctx = self._stream.codec_context
            ctx.width, ctx.height, ctx.pix_fmt = self.width, self.height, "yuv420p"
            ctx.time_base = TIME_BASE
            # Keyframes come from `keyframe_s` (time), not from a frame count that an idle screen never reaches.
            ctx.gop_size = 100_000
            ctx.thread_count = self.settings.threads
            ctx.options = {"preset": self.settings.preset, "tune": self.settings.tune, "crf": str(self.settings.crf)}
            ctx.colorspace = ctx.color_primaries = ctx.color_trc = BT709
            ctx.color_range = ColorRange.MPEG
        except BaseException:
            self._container.close()
            raise

    def write(self, data: bytes, width: int, height: int, at_ms: int) -> None:
        """Convert and encode a new screen image shown from `at_ms` on."""
        self._fill(data, width, height)
        image = self._bgrx.reformat(format="yuv420p", dst_colorspace=Colorspace.ITU709,
                                    dst_color_range=ColorRange.MPEG, threads=1)
        self._image = image
        key = at_ms - self._last_key_ms >= self.settings.keyframe_s * 1000
        self._encode(image, at_ms, key)

    def repeat(self, at_ms: int) -> bool:
        """Encode the last image again at `at_ms` (nearly free: every block is skipped); False if none yet."""
        if self._image is None:
            return False
        self._encode(self._image, at_ms, False)
        return True

    def finish(self, end_ms: int) -> None:
        """Make the last image last until `end_ms`, then drain the encoder and close the file."""
        try:
            if self._image is not None and end_ms > self.last_ms + 1:
                at = max(self.last_ms + 1, end_ms - max(1, round(1000 / self.fps)))
                self._encode(self._image, at, False, duration=end_ms - at)
            for packet in self._stream.encode(None):
                self._container.mux(packet)
        finally:
            self._container.close()

    def abort(self) -> None:
        """Close after a failure, ignoring further errors (the file keeps what was flushed)."""
        with contextlib.suppress(Exception):  # the original error is what the caller reports
            self._container.close()

    def _fill(self, data: bytes, width: int, height: int) -> None:
        """Copy a BGRX image into the reused frame, cropping to the encoder's size."""
        plane = self._bgrx.planes[0]
        row = self.width * 4
        if width == self.width and height == self.height and plane.line_size == row:
            plane.update(data)
            return
        # Odd sizes or a padded line: copy row by row (rare; ~1 ms at 1440x900).
        target = memoryview(plane)
        source = memoryview(data)
        copy = min(row, width * 4)
        for y in range(min(height, self.height)):
            start = y * plane.line_size
            target[start:start + copy] = source[y * width * 4:y * width * 4 + copy]

    def _encode(self, image: VideoFrame, at_ms: int, key: bool, duration: int = 0) -> None:
        at_ms = max(at_ms, self.last_ms + 1)  # timestamps must strictly increase
        image.pts = at_ms
        image.time_base = TIME_BASE
        image.pict_type = PictureType.I if key else PictureType.NONE
        if key:
            self._last_key_ms = at_ms
        for packet in self._stream.encode(image):
            if duration:
                packet.duration = duration
            self._container.mux(packet)
        self.last_ms = at_ms
        self.frames += 1
