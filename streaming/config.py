"""What a desktop's live view was started with (streaming/manager.py starts it, every viewer reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_desktop_wire.enums import VideoCodec


@dataclass(frozen=True)
class StreamConfig:
    """What the stream was started with: the desktop's stream options and screen."""

    codec: VideoCodec
    fps: int
    ports: tuple[int, int]
    display: str
    width: int
    height: int
