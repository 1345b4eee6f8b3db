"""Scaling and encoding of screenshots, tuned for latency rather than the smallest file.

PNG is written here rather than by Pillow: Pillow picks a filter per row by trying all five, which
costs ~14 ms on a 1440x900 frame before deflate even runs. Screen content (flat UI, text) deflates as
well or better unfiltered, so rows are stored with filter 0 and deflated by ISA-L (the `isal` package)
at level 1. Measured (CPU time, the 1440x900 scene of bench/scene.py; docs/benchmarks.md, HTTP floor):
ISA-L 2.7 ms and 225 KB, zlib level 1 13.3 ms and 214 KB, zlib-ng level 1 4.5 ms and 258 KB, Pillow at
`compress_level=1` 33 ms and 234 KB. Without `isal` the same writer falls back to zlib.

What does not deflate is not deflated: photographs, gradients and noise save under 10 % and deflate
3-4x slower per byte than screen content (an 800x600 fine gradient: 5 ms to save 6 %). Samples of the
rows tell (`_incompressible`: together they save under STORE_BELOW_SAVING); such a picture goes slice
by slice, stored blocks (a copy) where deflating saves too little, every PROBE_EVERY-th slice deflated
again to see whether it pays there (that gradient: ~1.6 ms instead of 5.3, 6.5 % larger). Screen content
deflates as before, in one stream (a picture only partly photographic too)."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from types import ModuleType

from PIL import Image

from sandbox_desktop_wire.enums import ScreenshotFormat

_deflate: ModuleType
try:
    from isal import isal_zlib as _deflate
except ImportError:  # a platform without its wheel: the same stream from zlib, ~7x slower
    _deflate = zlib

MEDIA_TYPES = {ScreenshotFormat.PNG: "image/png", ScreenshotFormat.JPEG: "image/jpeg",
               ScreenshotFormat.WEBP: "image/webp"}

PNG_ZLIB_LEVEL = 1
"""Level 1 of ISA-L (0-3) or zlib: ISA-L's 2 is 0.5% smaller for 5% more time, its 3 4x slower;
zlib's higher levels cost 5-30% more time for 1-3% smaller screenshots."""
WEBP_METHOD = 0
"""libwebp effort 0-6; 0 is the fastest (22 ms vs 70 ms at 4 for 1440x900) for ~15% more bytes."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_crc32: Callable[..., int] = _deflate.crc32  # ISA-L's is ~10x faster than zlib's


def scaled_size(width: int, height: int, scale: float) -> tuple[int, int]:
    """The image size for a `scale` of a `width`x`height` capture, rounded half up, at least 1x1."""
    return max(1, int(width * scale + 0.5)), max(1, int(height * scale + 0.5))


def scale_image(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """Shrink by area averaging; integer factors take Image.reduce's fast path first."""
    if image.size == size:
        return image
    factor = image.width // size[0]
    if factor > 1 and image.size == (size[0] * factor, size[1] * factor):
        return image.reduce(factor)  # an exact integer shrink needs no resampling pass after it
    # BOX is exact area averaging (no aliasing on text); reducing_gap=1.0 makes Pillow apply
    # Image.reduce for the integer part of the factor, which is 3-4x cheaper than a plain resize.
    return image.resize(size, Image.Resampling.BOX, reducing_gap=1.0)


def png_bytes(image: Image.Image) -> bytes:
    """An 8-bit RGB PNG: one IDAT of unfiltered rows, deflated at level 1 where that pays (module doc)."""
    width, height = image.size
    # The raw encoder pads each row to `stride` with a zero byte at its end; shifted by one byte,
    # that padding is exactly the filter-type-0 byte PNG wants at the start of every row.
    rows = memoryview(image.tobytes("raw", "RGB", width * 3 + 1, 1))[:-1]
    idat = _zlib_stream(rows)
    crc = _crc32(b"IDAT")
    for piece in idat:
        crc = _crc32(piece, crc)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    length = sum(len(piece) for piece in idat)
    # One copy of the image data: the pieces are joined once, into the file.
    return b"".join((_PNG_SIGNATURE, _chunk(b"IHDR", header), struct.pack(">I", length), b"IDAT", *idat,
                     struct.pack(">I", crc), _chunk(b"IEND", b"")))


SAMPLES = 4
SAMPLE_BYTES = 16384
"""Before deflating, up to four 16 KiB samples spread over the rows are deflated alone (~20 us on screen content)."""
CLEARLY_DEFLATES = 0.5
"""A sample that deflates to half its size or less ends the sampling: the picture is (partly) screen content."""
STORE_BELOW_SAVING = 0.2
"""Rows that deflate to more than 80 % of their size are not worth deflating: 3.5 ms a megabyte to save
at most a fifth of it (unfiltered photographs and gradients rarely save more)."""
SLICE_BYTES = 65535
"""The rows of a picture that does not deflate go slice by slice (the most a stored block holds)."""
PROBE_EVERY = 8
"""While slices are stored, every 8th (512 KiB) is deflated again, to see whether deflating pays there."""


def _zlib_stream(rows: memoryview) -> list[bytes | memoryview]:
    """The zlib stream of b"\\0" + `rows` (PNG's first filter byte, then the rows), as pieces to join."""
    if not _incompressible(rows):  # screen content: one deflate stream
        deflate = _deflate.compressobj(PNG_ZLIB_LEVEL)
        return [deflate.compress(b"\0"), deflate.compress(rows), deflate.flush()]
    pieces: list[bytes | memoryview] = [b"\x78\x01", *_stored(b"\0")]  # the zlib header; the first filter byte
    deflate = None
    stored = 1  # slices stored since deflating last paid: the samples stand for a first probe
    for start in range(0, len(rows), SLICE_BYTES):
        piece = rows[start:start + SLICE_BYTES]
        if deflate is None and stored % PROBE_EVERY:
            pieces += _stored(piece)
            stored += 1
            continue
        if deflate is None:  # a new compressor knows nothing before `start`, so it never refers back past it
            deflate = _deflate.compressobj(PNG_ZLIB_LEVEL, _deflate.DEFLATED, -15)
        # A sync flush ends each slice byte-aligned and not final, so a stored block may follow.
        out = deflate.compress(piece) + deflate.flush(_deflate.Z_SYNC_FLUSH)
        if len(out) < len(piece) * (1 - STORE_BELOW_SAVING):
            pieces.append(out)
            stored = 0
        else:  # not worth it: this slice stored, the next ones too
            pieces += _stored(piece)
            deflate, stored = None, 1
    pieces += (b"\x01\x00\x00\xff\xff", struct.pack(">I", _deflate.adler32(rows, _deflate.adler32(b"\0"))))
    return pieces


def _stored(data: bytes | memoryview) -> tuple[bytes, bytes | memoryview]:
    """`data` (at most 65535 bytes) as a stored, non-final deflate block: its header, then itself."""
    return struct.pack("<BHH", 0, len(data), len(data) ^ 0xFFFF), data


def _incompressible(rows: memoryview) -> bool:
    """Whether samples of `rows` save less than STORE_BELOW_SAVING deflated (a photograph, a gradient, noise)."""
    if len(rows) < SAMPLES * SAMPLE_BYTES * 4:
        return False
    step = len(rows) // SAMPLES
    sizes = 0
    for i in range(SAMPLES):
        size = len(_deflate.compress(rows[i * step + step // 2:][:SAMPLE_BYTES], PNG_ZLIB_LEVEL, -15))
        if size < SAMPLE_BYTES * CLEARLY_DEFLATES:  # screen content: no need to look further
            return False
        sizes += size
    return sizes > SAMPLES * SAMPLE_BYTES * (1 - STORE_BELOW_SAVING)


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", _crc32(data, _crc32(tag)))


def encode(image: Image.Image, fmt: ScreenshotFormat, quality: int) -> bytes:
    """`image` (RGB) as png, jpeg (libjpeg-turbo) or webp; `quality` applies to jpeg and webp."""
    out = io.BytesIO()
    match fmt:
        case ScreenshotFormat.PNG:
            return png_bytes(image)
        case ScreenshotFormat.JPEG:
            image.save(out, "JPEG", quality=quality)
        case ScreenshotFormat.WEBP:
            image.save(out, "WEBP", quality=quality, method=WEBP_METHOD)
        case _:
            raise ValueError(f"unknown image format {fmt!r}; expected png, jpeg or webp")
    return out.getvalue()
