"""Benchmark files into apps over HTTP: drops onto GTK's file chooser, filling it, PNGs on the clipboard.

Prints medians and p90s: a drop of one file on zenity's file chooser (XDND, answered once GTK has finished),
a file dialog filled end to end (zenity launched, path dropped, accepted, dialog gone: mostly the settle
waits of docs/files-into-apps.md), and a 1 MB PNG set and read through the API beside a text of the same
JSON size and `xclip -t image/png` spawns doing the same, in the same run.
Usage: .venv/bin/python bench/files_into_apps.py [--drops 30] [--dialogs 5] [--images 30]
"""

from __future__ import annotations

import argparse
import base64
import io
import random
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, summary, timed


def noise_png(width: int, height: int) -> bytes:
    rng = random.Random(7)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3)).save(out, "PNG")
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--drops", type=int, default=30)
    parser.add_argument("--dialogs", type=int, default=5)
    parser.add_argument("--images", type=int, default=30)
    args = parser.parse_args()

    with bench_desktop("files-into-apps", 716, terminals=2, images=1) as bench:
        api, env, tmp = bench.api, bench.env, bench.tmp
        bench.health_baseline(100)
        sample = tmp / "drop me.txt"
        sample.write_text("hello\n")

        def launch_chooser() -> tuple[str, dict[str, int]]:
            launched = api.post("/v1/desktop/launch", json={"app": "zenity", "args": ["--file-selection"],
                                                           "wait": True, "waitTimeoutMs": 20000}).json()
            window = next(w for w in api.get("/v1/desktop/windows").json()["windows"]
                          if w["id"] == launched["windowId"])
            return launched["processId"], window

        process_id, window = launch_chooser()
        point = {"x": window["x"] + window["width"] * 3 // 5, "y": window["y"] + window["height"] // 2}

        def drop() -> None:
            response = api.post("/v1/desktop/drop", json={"paths": [str(sample)], **point})
            assert response.status_code == 200, response.text

        summary("drop one file on GTK's file chooser", timed(drop, args.drops))
        api.post(f"/v1/processes/{process_id}/kill")

        def fill() -> None:
            launch_chooser()
            started = time.perf_counter()
            response = api.post("/v1/desktop/file-dialog", json={"path": str(sample)})
            assert response.status_code == 200, response.text
            fills.append(time.perf_counter() - started)

        fills: list[float] = []
        for _ in range(args.dialogs):
            fill()
        summary("file dialog filled, until it closed", fills)

        png = noise_png(600, 600)  # about 1 MB: INCR both ways
        encoded = base64.b64encode(png).decode()
        print(f"\nPNG of {len(png)} bytes")
        png_file = tmp / "image.png"
        png_file.write_bytes(png)

        def api_set() -> None:
            assert api.post("/v1/desktop/clipboard", json={"image": encoded}).status_code == 200

        def xclip_read() -> None:
            out = subprocess.run(["xclip", "-o", "-selection", "clipboard", "-t", "image/png"], env=env,
                                 capture_output=True, check=True, timeout=30).stdout
            assert out == png

        summary("set a 1 MB PNG (API)", timed(api_set, args.images))
        same_size = "x" * len(encoded)
        summary("set a text as long as its base64 (API, baseline)",
                timed(lambda: api.post("/v1/desktop/clipboard", json={"text": same_size}), args.images))
        api_set()
        summary("read it back (xclip -o -t image/png spawn)", timed(xclip_read, args.images))
        subprocess.run(["xclip", "-i", "-selection", "clipboard", "-t", "image/png", str(png_file)], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=30)

        def api_get() -> None:
            response = api.get("/v1/desktop/clipboard", params={"format": "image"})
            assert response.content == png

        def xclip_set() -> None:
            subprocess.run(["xclip", "-i", "-selection", "clipboard", "-t", "image/png", str(png_file)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=30)

        summary("read a 1 MB PNG xclip owns (API)", timed(api_get, args.images))
        summary("own a 1 MB PNG (xclip -i -t image/png spawn)", timed(xclip_set, args.images))


if __name__ == "__main__":
    main()
