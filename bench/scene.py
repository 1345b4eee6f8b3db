"""A realistic benchmark screen: terminals full of text and windows with images, not an empty desktop."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import httpx


def open_scene(display: str, terminals: int = 6, images: int = 2) -> list[subprocess.Popen[bytes]]:
    """Open `terminals` xterms printing long listings and `images` ImageMagick image windows."""
    env = dict(os.environ, DISPLAY=display)
    procs = []
    for i in range(terminals):
        geometry = f"90x28+{30 + 60 * i}+{20 + 45 * i}"
        script = "ls -la --color=always /usr/bin /usr/lib | head -400; exec sleep 3600"
        procs.append(subprocess.Popen(["xterm", "-T", f"scene-term-{i}", "-geometry", geometry,
                                       "-fa", "DejaVu Sans Mono", "-fs", "9", "-e", "sh", "-c", script],
                                      env=env, stderr=subprocess.DEVNULL))
    if shutil.which("display"):
        for i, image in enumerate(["logo:", "rose:", "wizard:", "granite:"][:images]):
            procs.append(subprocess.Popen(["display", "-title", f"scene-image-{i}", "-geometry",
                                           f"+{700 + 80 * i}+{200 + 120 * i}", image],
                                          env=env, stderr=subprocess.DEVNULL))
    return procs


def wait_for_windows(api: httpx.Client, count: int, timeout: float = 20) -> int:
    """Wait until the server lists at least `count` windows; returns how many it lists."""
    deadline = time.monotonic() + timeout
    listed = 0
    while time.monotonic() < deadline:
        listed = len(api.get("/v1/desktop/windows").json()["windows"])
        if listed >= count:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # let the terminals finish drawing
    return listed


def close_scene(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait()
