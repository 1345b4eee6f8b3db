"""Looking inside a recording a crash left unfinished: cut a torn last fragment, measure what plays."""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import av

logger = logging.getLogger("sandbox_desktop.recording")


@dataclass(frozen=True)
class Probe:
    """What a recording file holds, from its packets (nothing is decoded)."""

    frames: int = 0
    duration_ms: int = 0
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True)
class Tail:
    """How a file ends after `repair`."""

    size: int
    finalised: bool
    """The trailer (`mfra`) was written: the writer closed the file normally."""


def repair(path: Path) -> Tail:
    """Cut the file after its last complete fragment (a `moof` with its `mdat`).

    A process killed mid-write can leave a box whose header promises more bytes than follow;
    players cope with that unevenly, a file that simply ends after a whole fragment they all play.
    """
    with open(path, "r+b") as fh:
        size = os.fstat(fh.fileno()).st_size
        offset = kept = 0
        in_fragment = False
        last_type = b""
        while offset + 8 <= size:
            fh.seek(offset)
            box_size, box_type = struct.unpack(">I4s", fh.read(8))
            if box_size == 1:  # a 64-bit size follows the type
                header = fh.read(8)
                box_size = struct.unpack(">Q", header)[0] if len(header) == 8 else 0
            if box_size < 8 or offset + box_size > size:
                break
            offset += box_size
            last_type = box_type
            if box_type == b"moof":
                in_fragment = True
            elif box_type == b"mdat":
                in_fragment = False
            if not in_fragment:
                kept = offset
        if kept < size:
            logger.info("cutting %s from %d to %d bytes (torn last fragment)", path.name, size, kept)
            fh.truncate(kept)
            return Tail(kept, False)
        return Tail(size, last_type == b"mfra")


def probe(path: Path) -> Probe:
    """Frames and playable duration of an MP4; an empty Probe if nothing in it plays."""
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return Probe()
            stream = container.streams.video[0]
            frames, end = 0, 0.0
            # Every track counts for what plays (the sound may outlast the last frame); frames are video's.
            for packet in container.demux(stream, *container.streams.audio):
                if packet.pts is None or packet.time_base is None:
                    continue  # the demuxer's final empty packet
                frames += packet.stream is stream
                end = max(end, float((packet.pts + (packet.duration or 0)) * packet.time_base))
            return Probe(frames, round(end * 1000), stream.codec_context.width, stream.codec_context.height)
    except (av.FFmpegError, OSError) as exc:
        logger.info("%s does not play: %s", path.name, exc)
        return Probe()
