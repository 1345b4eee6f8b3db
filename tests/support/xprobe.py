"""A tiny X client for tests: one window that records the input events it receives as JSON lines.

Run as `python -m tests.xprobe --display :N --title T --geometry WxH+X+Y --out FILE`; each event is
one line: {"type", "x", "y", "rootX", "rootY", "button", "state", "keysym", "time"}.
It reads the keymap when it reads each event (like toolkits that read it lazily).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from Xlib import X, Xatom, display

from tests.support.paths import REPO


class EventLog:
    """What a test X client running as a separate process logged to `out`, one JSON event per line."""

    out: Path

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every recorded event (of one type, if given), oldest first."""
        if not self.out.exists():
            return []
        # Complete lines only: the client may be writing the last one as it is read.
        found = [json.loads(line) for line in self.out.read_text().split("\n")[:-1] if line.strip()]
        return [e for e in found if kind is None or e["type"] == kind]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], count: int = 1,
                 timeout: float = 10) -> list[dict[str, Any]]:
        """The recorded events matching `predicate` once there are `count` of them (or at the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events() if predicate(e)]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)


class Probe(EventLog):
    """Runs this module as a separate X client and reads back the events it recorded."""

    def __init__(self, display_name: str, out: Path, geometry: str, *, override_redirect: bool = True,
                 title: str = "probe") -> None:
        self.out = out
        args = [sys.executable, "-m", "tests.support.xprobe", "--display", display_name, "--out", str(out),
                "--geometry", geometry, "--title", title]
        if override_redirect:
            args.append("--override-redirect")
        self.proc = subprocess.Popen(args, cwd=REPO)
        if not self.wait_for(lambda e: e["type"] == "MapNotify"):
            self.close()
            raise AssertionError(f"the probe window {title!r} never mapped")
        time.sleep(0.1)  # let the window manager place and decorate it


    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def client_arguments(title: str) -> argparse.ArgumentParser:
    """What every test X client here is run with: `--display :N --title T --geometry WxH+X+Y --out FILE`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--display", required=True)
    parser.add_argument("--title", default=title)
    parser.add_argument("--geometry", default="400x300+100+100")
    parser.add_argument("--out", required=True)
    return parser


def client_window(args: argparse.Namespace, event_mask: int,
                  **attributes: Any) -> tuple[display.Display, Any, tuple[int, int, int, int]]:
    """The client's connection to `args.display` and its top-level window at `args.geometry` (x, y, width,
    height), titled `args.title`, owned by this process (`_NET_WM_PID`) and asking to stay where it was put; not
    mapped yet."""
    size, _, pos = args.geometry.partition("+")
    width, height = (int(v) for v in size.split("x"))
    x, y = (int(v) for v in pos.split("+"))
    d = display.Display(args.display)
    screen = d.screen()
    window = screen.root.create_window(x, y, width, height, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
                                       event_mask=event_mask, **attributes)
    window.set_wm_name(args.title)
    window.change_property(d.get_atom("_NET_WM_NAME"), d.get_atom("UTF8_STRING"), 8, args.title.encode())
    window.change_property(d.get_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
    window.set_wm_normal_hints(flags=1 | 4, x=x, y=y)  # USPosition | PPosition, honoured by openbox
    return d, window, (x, y, width, height)


def main() -> None:
    parser = client_arguments("xprobe")
    parser.add_argument("--override-redirect", action="store_true")
    parser.add_argument("--color", default="0x3366cc")
    args = parser.parse_args()
    d, window, _ = client_window(
        args, X.ButtonPressMask | X.ButtonReleaseMask | X.PointerMotionMask | X.KeyPressMask | X.KeyReleaseMask
        | X.ExposureMask | X.StructureNotifyMask,
        background_pixel=int(args.color, 16), override_redirect=args.override_redirect)
    window.map()
    d.sync()
    names = {X.ButtonPress: "ButtonPress", X.ButtonRelease: "ButtonRelease", X.MotionNotify: "MotionNotify",
             X.KeyPress: "KeyPress", X.KeyRelease: "KeyRelease", X.MapNotify: "MapNotify"}
    with open(args.out, "a", encoding="utf-8") as out:
        while True:
            ev = d.next_event()
            if ev.type not in names:
                continue
            record = {"type": names[ev.type], "time": getattr(ev, "time", 0)}
            if ev.type != X.MapNotify:
                record.update(x=ev.event_x, y=ev.event_y, rootX=ev.root_x, rootY=ev.root_y, state=ev.state)
            if ev.type in (X.ButtonPress, X.ButtonRelease):
                record["button"] = ev.detail
            if ev.type in (X.KeyPress, X.KeyRelease):
                index = 1 if ev.state & X.ShiftMask else 0
                record["keycode"] = ev.detail
                record["keysym"] = d.keycode_to_keysym(ev.detail, index)
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
