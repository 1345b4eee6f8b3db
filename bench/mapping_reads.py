"""Benchmark how soon real apps read a changed keyboard mapping: what a binding for a missing keysym waits before it
is typed (desktop/input/settling.py; docs/keyboard.md, "Unicode typing and the spare keycodes").

For each app (xterm, the Tk app of the tests, zenity for GTK, Chromium when installed), on an Xvfb of its own with
openbox, the app is started and given time to settle, then `--bindings` missing keysyms are bound one after another
through `Keymap`, as the keyboard binds them, and the time from each binding until it may be typed is printed, with
how many waits ran out before the app's read came (`READ_WAIT_S`). Apps not installed are skipped with the reason.
Usage: .venv/bin/python bench/mapping_reads.py [--bindings 10] [--settle-s 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from desktop.input import settling
from desktop.input.keymap import Keymap
from desktop.x11.thread import open_display
from tests.support.xvfb import free_display

TK_APP = Path(__file__).resolve().parent.parent / "tests" / "support" / "tkapp.py"


def apps(profile: str) -> dict[str, list[str]]:
    return {"xterm": ["xterm"], "tk": [sys.executable, str(TK_APP)], "gtk (zenity)": ["zenity", "--entry"],
            "chromium": ["chromium", "--no-sandbox", f"--user-data-dir={profile}", "--no-first-run",
                         "data:text/html,<input autofocus>"]}


def measure(command: list[str], bindings: int, settle_s: float) -> tuple[list[float], int]:
    """Milliseconds from each binding until it may be typed, and how many waited for the app's read until it ran out."""
    with free_display() as name:
        env = dict(os.environ, DISPLAY=name)
        wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        app = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        display = open_display(name)
        keymap = Keymap(display)
        try:
            time.sleep(settle_s)
            waits: list[float] = []
            for i in range(bindings):
                keysym = 0x4E00 + i
                bound = time.monotonic()
                keymap.bind([keysym], bound, hold=0.0)
                display.flush()
                while (wait := keymap.settling([keysym], time.monotonic())) > 0:
                    time.sleep(wait)
                waits.append((time.monotonic() - bound) * 1000)
            return waits, sum(1 for wait in waits if wait >= settling.READ_WAIT_S * 1000)
        finally:
            keymap.restore_all()
            keymap.close()
            display.close()
            app.kill()
            wm.kill()
            app.wait()
            wm.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindings", type=int, default=10)
    parser.add_argument("--settle-s", type=float, default=5.0, help="how long an app gets to start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as profile:
        for name, command in apps(profile).items():
            if shutil.which(command[0]) is None:
                print(f"{name:14} skipped: {command[0]} is not installed")
                continue
            waits, ran_out = measure(command, args.bindings, args.settle_s)
            print(f"{name:14} first {waits[0]:6.1f} ms  median {statistics.median(waits):6.1f} ms  "
                  f"max {max(waits):6.1f} ms  waits that ran out {ran_out}/{len(waits)}")


if __name__ == "__main__":
    main()
