"""Benchmark WebP encoders on a realistic 1440x900 screen: the server's (Pillow at method 0, desktop/screen/encode.py)
against libwebp's advanced API called directly with the options that trade bytes for time, to show where the
time of a full-screen WebP goes and what each option buys (docs/screenshots.md, "How it is fast").

Grabs the screen of `bench/scene.py` on an Xvfb of its own, then encodes it `--count` times with each encoder in
alternating blocks and prints the median wall time, the CPU time (all threads) and the size. libwebp is the one
Pillow's wheel bundles (pillow.libs/), else the system's; the bench stops with a message when neither loads or
its ABI is not the one the structures below were written for (encoder ABI 2.x, libwebp >= 1.2).
Usage: .venv/bin/python bench/webp.py [--count 30] [--quality 80]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import io
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mss
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.scene import close_scene, open_scene
from desktop.screen.encode import WEBP_METHOD
from tests.support.xvfb import free_xvfb

ENCODER_ABI = 0x0210
"""WEBP_ENCODER_ABI_VERSION of libwebp 1.2-1.6: the Init calls refuse a library whose major ABI differs."""

_CONFIG_FIELDS = [
    "lossless", "quality", "method", "image_hint", "target_size", "target_PSNR", "segments", "sns_strength",
    "filter_strength", "filter_sharpness", "filter_type", "autofilter", "alpha_compression", "alpha_filtering",
    "alpha_quality", "pass", "show_compressed", "preprocessing", "partitions", "partition_limit",
    "emulate_jpeg_size", "thread_level", "low_memory", "near_lossless", "exact", "use_delta_palette",
    "use_sharp_yuv", "qmin", "qmax"]
"""WebPConfig's fields in order (libwebp's encode.h)."""


class WebPConfig(ctypes.Structure):
    _fields_ = [(name, ctypes.c_float if name in ("quality", "target_PSNR") else ctypes.c_int)
                for name in _CONFIG_FIELDS]


class WebPPicture(ctypes.Structure):
    _fields_ = [("use_argb", ctypes.c_int), ("colorspace", ctypes.c_int), ("width", ctypes.c_int),
                ("height", ctypes.c_int), ("y", ctypes.c_void_p), ("u", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("y_stride", ctypes.c_int), ("uv_stride", ctypes.c_int), ("a", ctypes.c_void_p),
                ("a_stride", ctypes.c_int), ("pad1", ctypes.c_uint32 * 2), ("argb", ctypes.c_void_p),
                ("argb_stride", ctypes.c_int), ("pad2", ctypes.c_uint32 * 3), ("writer", ctypes.c_void_p),
                ("custom_ptr", ctypes.c_void_p), ("extra_info_type", ctypes.c_int), ("extra_info", ctypes.c_void_p),
                ("stats", ctypes.c_void_p), ("error_code", ctypes.c_int), ("progress_hook", ctypes.c_void_p),
                ("user_data", ctypes.c_void_p), ("pad3", ctypes.c_uint32 * 3), ("pad4", ctypes.c_void_p),
                ("pad5", ctypes.c_void_p), ("pad6", ctypes.c_uint32 * 8), ("memory_", ctypes.c_void_p),
                ("memory_argb_", ctypes.c_void_p), ("pad7", ctypes.c_void_p * 2)]


class WebPMemoryWriter(ctypes.Structure):
    _fields_ = [("mem", ctypes.POINTER(ctypes.c_uint8)), ("size", ctypes.c_size_t), ("max_size", ctypes.c_size_t),
                ("pad", ctypes.c_uint32)]


def load_libwebp() -> ctypes.CDLL:
    import PIL
    bundled = sorted(glob.glob(os.path.join(os.path.dirname(PIL.__file__), os.pardir, "pillow.libs", "libwebp-*.so*")))
    candidates = [*bundled, *filter(None, [ctypes.util.find_library("webp")])]
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise SystemExit("no libwebp to load (neither Pillow's bundled one nor the system's)")


def direct_encoder(lib: ctypes.CDLL, image: Image.Image, quality: float, **options: int | float) -> Callable[[], bytes]:
    """An encode of `image` through libwebp's advanced API with `options` set on the config."""
    raw = image.tobytes()
    width, height = image.size

    def encode() -> bytes:
        config = WebPConfig()
        if not lib.WebPConfigInitInternal(ctypes.byref(config), 0, ctypes.c_float(quality), ENCODER_ABI):
            raise SystemExit("this libwebp's encoder ABI is not the one this bench was written for")
        config.method = WEBP_METHOD
        for name, value in options.items():
            setattr(config, name, value)
        if not lib.WebPValidateConfig(ctypes.byref(config)):
            raise SystemExit(f"libwebp refused the options {options}")
        picture = WebPPicture()
        if not lib.WebPPictureInitInternal(ctypes.byref(picture), ENCODER_ABI):
            raise SystemExit("this libwebp's picture ABI is not the one this bench was written for")
        picture.width, picture.height = width, height
        writer = WebPMemoryWriter()
        lib.WebPMemoryWriterInit(ctypes.byref(writer))
        picture.writer = ctypes.cast(lib.WebPMemoryWrite, ctypes.c_void_p)
        picture.custom_ptr = ctypes.cast(ctypes.byref(writer), ctypes.c_void_p)
        try:
            if not (lib.WebPPictureImportRGB(ctypes.byref(picture), raw, width * 3)
                    and lib.WebPEncode(ctypes.byref(config), ctypes.byref(picture))):
                raise SystemExit(f"libwebp failed (error {picture.error_code})")
            return ctypes.string_at(writer.mem, writer.size)
        finally:
            lib.WebPMemoryWriterClear(ctypes.byref(writer))
            lib.WebPPictureFree(ctypes.byref(picture))
    return encode


def pillow_encoder(image: Image.Image, quality: int) -> Callable[[], bytes]:
    def encode() -> bytes:
        out = io.BytesIO()
        image.save(out, "WEBP", quality=quality, method=WEBP_METHOD)
        return out.getvalue()
    return encode


def grab_scene() -> Image.Image:
    with free_xvfb("1440x900x24") as (display, _):
        os.environ["DISPLAY"] = display
        procs = open_scene(display)
        try:
            time.sleep(4)  # the terminals print their listings, the image windows map
            with mss.MSS(display=display) as screen:
                shot = screen.grab(screen.monitors[1])
                return Image.frombytes("RGB", shot.size, shot.rgb)
        finally:
            close_scene(procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=30, help="encodes of each (default 30)")
    parser.add_argument("--quality", type=int, default=80)
    args = parser.parse_args()
    image = grab_scene()
    lib = load_libwebp()
    version = lib.WebPGetEncoderVersion()
    print(f"screen {image.size[0]}x{image.size[1]} (bench/scene.py), libwebp "
          f"{version >> 16}.{version >> 8 & 0xFF}.{version & 0xFF}, method {WEBP_METHOD}, quality {args.quality}")
    q = float(args.quality)
    encoders = {
        "Pillow (the server's)": pillow_encoder(image, args.quality),
        "libwebp direct": direct_encoder(lib, image, q),
        "  + 2 threads": direct_encoder(lib, image, q, thread_level=1),
        "  + no loop filter": direct_encoder(lib, image, q, filter_strength=0),
        "  + 1 segment, no SNS": direct_encoder(lib, image, q, segments=1, sns_strength=0),
        "  + all of the above": direct_encoder(lib, image, q, thread_level=1, filter_strength=0, segments=1,
                                               sns_strength=0),
        "  quality 50": direct_encoder(lib, image, 50.0),
        "  lossless, effort 0": direct_encoder(lib, image, 0.0, lossless=1),
    }
    walls: dict[str, list[float]] = {name: [] for name in encoders}
    cpus: dict[str, list[float]] = {name: [] for name in encoders}
    sizes = {name: len(encode()) for name, encode in encoders.items()}  # also a warm-up
    block = max(1, args.count // 5)
    for _ in range(5):
        for name, encode in encoders.items():
            for _ in range(block):
                wall, cpu = time.perf_counter(), time.process_time()
                encode()
                walls[name].append(time.perf_counter() - wall)
                cpus[name].append(time.process_time() - cpu)
    base = statistics.median(walls["Pillow (the server's)"])
    for name in encoders:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(f"{name:<24} median {wall * 1000:6.1f} ms ({wall / base:.2f}x)  CPU {cpu * 1000:6.1f} ms  "
              f"{sizes[name]:>8,} B")


if __name__ == "__main__":
    main()
