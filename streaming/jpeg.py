"""JPEG pictures of the live view's H.264 stream, for a WebSocket viewer whose browser cannot decode H.264.

The viewer's packets are the shared encoder's (nothing is encoded twice); they are decoded here, each one,
since every picture refers to the ones before, and only the newest is compressed to JPEG and sent: a viewer
that falls behind skips pictures, as an H.264 viewer does (streaming/media_socket.py). Used from one
thread at a time (the session's sender awaits each call).
"""

from __future__ import annotations

import io

import av

QUALITY = 75
"""Pillow's default: text stays readable at a fifth of the raw size."""


class JpegPictures:
    """One viewer's H.264 decoder and JPEG encoder."""

    def __init__(self, quality: int = QUALITY) -> None:
        self.quality = quality
        self._decoder = av.CodecContext.create("h264", "r")

    def add(self, access_unit: bytes, wanted: bool) -> bytes | None:
        """Decode one access unit; its picture as JPEG when `wanted` (no newer packet waits) and decodable."""
        frames = self._decoder.decode(av.Packet(access_unit))
        if not wanted or not frames:
            return None
        out = io.BytesIO()
        frames[-1].to_image().save(out, "JPEG", quality=self.quality)
        return out.getvalue()
