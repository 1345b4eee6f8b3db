"""A test X client whose pixels are known: a window that paints `pattern(x, y)` and logs what it receives.

Run as `python -m tests.window_app --display :N --title T --geometry WxH+X+Y --out FILE [--ignore-delete]`.
It redraws every exposed rectangle from the pattern (so a capture can be checked pixel by pixel), takes
part in WM_DELETE_WINDOW (exits on it, or only logs it with `--ignore-delete`, as a hung app would) and
answers _NET_WM_PING. Each event is one JSON line: {"type": "MapNotify"|"ButtonPress"|"Expose"|
"DeleteWindow"|..., "x", "y", "rootX", "rootY", "button"}.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from PIL import Image
from Xlib import X, Xatom
from Xlib.protocol import event

from tests.support.paths import REPO
from tests.support.xprobe import EventLog, client_arguments, client_window

_CHUNK_ROWS = 64  # PutImage requests stay far below the server's maximum request size


class WindowApp(EventLog):
    """Runs this module as a separate X client; reads back what it logged."""

    def __init__(self, display_name: str, out: Path, title: str, geometry: str, *, seed: int = 0,
                 ignore_delete: bool = False) -> None:
        self.out, self.title, self.seed = out, title, seed
        args = [sys.executable, "-m", "tests.support.window_app", "--display", display_name, "--out", str(out),
                "--title", title, "--geometry", geometry, "--seed", str(seed)]
        if ignore_delete:
            args.append("--ignore-delete")
        self.proc = subprocess.Popen(args, cwd=REPO)

    def exited(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def pattern(width: int, height: int, seed: int = 0) -> Image.Image:
    """The picture the window shows: smooth ramps plus a checker fine enough that a 1-pixel shift shows."""
    image = Image.new("RGB", (width, height))
    pixels = bytearray(width * height * 3)
    i = 0
    for y in range(height):
        for x in range(width):
            checker = 0x40 if (x // 4 + y // 4) % 2 else 0
            pixels[i] = (x + seed) & 0xFF
            pixels[i + 1] = (y * 2 + seed) & 0xFF
            pixels[i + 2] = ((x + y) // 3 + checker + seed) & 0xFF
            i += 3
    image.frombytes(bytes(pixels))
    return image


def _log(out: TextIO, **record: object) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def main() -> None:
    parser = client_arguments("window_app")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ignore-delete", action="store_true", help="log WM_DELETE_WINDOW and keep running")
    args = parser.parse_args()
    d, window, (_, _, width, height) = client_window(
        args, X.ExposureMask | X.StructureNotifyMask | X.ButtonPressMask | X.ButtonReleaseMask | X.PropertyChangeMask,
        background_pixel=0)
    screen = d.screen()
    gc = window.create_gc()
    window.set_wm_class(args.title, "WindowApp")
    protocols, delete, ping = (d.get_atom(n) for n in ("WM_PROTOCOLS", "WM_DELETE_WINDOW", "_NET_WM_PING"))
    window.change_property(protocols, Xatom.ATOM, 32, [delete, ping])
    window.map()
    d.sync()
    picture = pattern(width, height, args.seed)
    names = {X.ButtonPress: "ButtonPress", X.ButtonRelease: "ButtonRelease", X.MapNotify: "MapNotify",
             X.UnmapNotify: "UnmapNotify"}
    with open(args.out, "a", encoding="utf-8") as out:
        while True:
            ev = d.next_event()
            if ev.type == X.Expose:
                for top in range(ev.y, ev.y + ev.height, _CHUNK_ROWS):
                    rows = min(_CHUNK_ROWS, ev.y + ev.height - top)
                    part = picture.crop((ev.x, top, ev.x + ev.width, top + rows))
                    window.put_pil_image(gc, ev.x, top, part)
                if ev.count == 0:
                    d.flush()
                    _log(out, type="Expose")
            elif ev.type == X.ClientMessage and ev.client_type == protocols:
                atom = ev.data[1][0]
                if atom == ping:  # answer as a live app does, so the window manager never thinks it hung
                    reply = event.ClientMessage(window=screen.root, client_type=protocols, data=ev.data)
                    screen.root.send_event(reply, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
                    d.flush()
                elif atom == delete:
                    _log(out, type="DeleteWindow")
                    if not args.ignore_delete:
                        sys.exit(0)
            elif ev.type in names:
                record: dict[str, object] = {"type": names[ev.type]}
                if ev.type in (X.ButtonPress, X.ButtonRelease):
                    record.update(x=ev.event_x, y=ev.event_y, rootX=ev.root_x, rootY=ev.root_y, button=ev.detail)
                _log(out, **record)


if __name__ == "__main__":
    main()
