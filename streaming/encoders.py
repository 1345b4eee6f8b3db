"""Video encoders tuned for desktops (docs/streaming.md): libx264 ultrafast/zerolatency, libvpx realtime.

aiortc's own encoders use x264's `medium` preset, cap the bitrate at 1.5-3 Mbps, re-create the
encoder on every REMB change and use a 3000-frame VP8 GOP; these are opened once per stream and
keyframes come when asked (a viewer joins, a PLI, the periodic safety keyframe). One thread on
a 2-core machine: libvpx row threads stall badly when the second core is busy (notes §5.1).
"""

from __future__ import annotations

import fractions
import os
from dataclasses import dataclass

import av
from av.video.frame import PictureType, VideoFrame

from sandbox_desktop_wire.enums import VideoCodec

CODECS = (VideoCodec.H264, VideoCodec.VP8)
"""Codecs aiortc can packetize, in our order of preference."""
MIME_TYPES = {VideoCodec.H264: "video/H264", VideoCodec.VP8: "video/VP8"}
TIME_BASE = fractions.Fraction(1, 90_000)
"""The RTP video clock: packets carry their pts in it, so aiortc converts nothing."""
REFERENCE_PIXELS = 1440 * 900
REFERENCE_BITRATE = 4_000_000
"""Bitrate cap at 1440x900, scaled with the pixel count: enough for crisp text when everything moves."""
MIN_BITRATE, MAX_BITRATE = 1_000_000, 10_000_000


def default_bitrate(width: int, height: int) -> int:
    """The bitrate cap for a screen size, in bits per second."""
    return int(min(MAX_BITRATE, max(MIN_BITRATE, REFERENCE_BITRATE * width * height / REFERENCE_PIXELS)))


def encoder_threads() -> int:
    """One thread unless there are spare cores (the desktop's apps need the rest)."""
    cpus = os.cpu_count() or 1
    return 1 if cpus <= 2 else 2


@dataclass(frozen=True)
class EncoderSettings:
    """What one stream is encoded with."""

    codec: VideoCodec
    """One of CODECS."""
    width: int
    height: int
    fps: int
    bitrate: int
    """Ceiling in bits per second: x264 uses it as its VBV rate (quality-driven below it), VP8 as its CBR."""

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {self.codec!r}")
        if self.width % 2 or self.height % 2:
            raise ValueError(f"width and height must be even for 4:2:0 video, got {self.width}x{self.height}")


class VideoEncoder:
    """One PyAV encoder; `encode(yuv420p frame, keyframe)` returns its packets (pts in TIME_BASE)."""

    def __init__(self, settings: EncoderSettings) -> None:
        self.settings = settings
        self._context = _open(settings)

    def encode(self, frame: VideoFrame, keyframe: bool) -> list[av.Packet]:
        """Encode one frame (its `pts` in TIME_BASE); a keyframe when asked."""
        frame.time_base = TIME_BASE
        frame.pict_type = PictureType.I if keyframe else PictureType.NONE
        return list(self._context.encode(frame))

    def close(self) -> None:
        """Drop the encoder without flushing (nothing waits for delayed frames: there are none)."""
        self._context = None  # type: ignore[assignment]


def _open(s: EncoderSettings) -> av.VideoCodecContext:
    kbps = s.bitrate // 1000
    threads = encoder_threads()
    if s.codec is VideoCodec.H264:
        context = av.CodecContext.create("libx264", "w")
        # Quality-driven (crf) below a VBV ceiling: a static screen costs a few kbps, a busy one
        # stays under the cap with a buffer of ~0.5 s. Keyframes only on request (scenecut off).
        params = (f"keyint=infinite:scenecut=0:crf=23:vbv-maxrate={kbps}:vbv-bufsize={kbps // 2}"
                  f":threads={threads}:sliced-threads={int(threads > 1)}:repeat-headers=1")
        context.options = {"preset": "ultrafast", "tune": "zerolatency", "profile": "baseline",
                           "x264-params": params}
    else:
        context = av.CodecContext.create("libvpx", "w")
        context.bit_rate = s.bitrate
        context.gop_size = 1 << 30  # keyframes only on request
        context.qmin, context.qmax = 4, 56
        context.options = {
            "deadline": "realtime", "cpu-used": "12" if s.width * s.height <= REFERENCE_PIXELS else "16",
            "lag-in-frames": "0", "error-resilient": "1", "static-thresh": "100", "undershoot-pct": "95",
            # minrate = maxrate = bitrate makes FFmpeg's libvpx wrapper use CBR; bufsize is ~0.5 s.
            "minrate": str(s.bitrate), "maxrate": str(s.bitrate), "bufsize": str(s.bitrate // 2),
        }
    context.width, context.height = s.width, s.height
    context.pix_fmt = "yuv420p"
    context.time_base = TIME_BASE
    context.framerate = fractions.Fraction(s.fps, 1)
    context.thread_count = threads
    context.open()
    return context
