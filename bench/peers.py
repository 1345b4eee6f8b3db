"""Benchmark our server against its peers, call by call, with each call's effect checked from outside.

Peers:
- the reference server (`sandbox-agent server --no-token`, started as bench/http_floor.py starts it): the no-op;
- cua's computer server (`cua-computer-server` 0.3.46 from PyPI, installed by this bench into a venv of its own
  under ~/.cache/sandbox-desktop/bench-peers, on a Python >= 3.12, which it requires), on an Xvfb display of
  its own with openbox, as ours runs: every call over its `POST /cmd` and, for move, click and key, its `/ws`;
- OSWorld's guest server: skipped, with the reason printed (PyPI's `desktop-env` does not ship it).

Both desktops are 1280x800 with the same xterm of bench/scene.py on them. One httpx client (one kept-alive
connection per server; ours checks its token, the others ignore it) times each call in alternating blocks so
load from elsewhere falls on all alike, and after each timed call an independent X client (python-xlib on that
display, and a probe window recording the clicks and keys it receives: tests/support/xprobe.py) checks what the
call did: the pointer is where a move sent it, a click or a key (`a`, into the probe given the focus) arrived at
the probe, the position and size answered are
the X server's, the window list holds the xterm, the screenshot is a PNG of the screen's size. The checks are
not timed. Prints the medians, the ours/peer ratios and each server's CPU per call, and its X server's (from /proc).
Usage: .venv/bin/python bench/peers.py [--requests 400] [--rounds 8] [--shots 60] [--time-limit 60]
       [--calls "WS move" "WS click"]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect
from Xlib import X
from Xlib import display as xdisplay

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop, cpu_seconds, wait_for_http
from bench.http_floor import reference_server
from bench.scene import close_scene, open_scene
from tests.conftest import free_port
from tests.support.xprobe import Probe

PEERS_DIR = Path.home() / ".cache" / "sandbox-desktop" / "bench-peers"
CUA_VERSION = "0.3.46"
CUA_PINS = ("fastapi<0.145",)
"""cua-computer-server 0.3.46 passes `websocket_max_size` to `FastAPI()`, which FastAPI 0.145 and later refuse."""
OSWORLD_SKIPPED = ("OSWorld's guest server: skipped, PyPI's `desktop-env` (1.0.2) ships the agents and the "
                   "environment's host side, not the guest server (desktop_env/server/ is not in its wheel)")
WIDTH, HEIGHT = 1280, 800
PROBE = (1000, 500, 200, 200)
"""x, y, width, height of the probe window each click lands in, on both desktops."""
MOVES = ((300, 300), (340, 320))
"""Two points off the probe; the moves alternate between them, so each one moves the pointer."""

Verify = Callable[[], None]
Call = Callable[[], Verify]
"""Makes one call and returns its check, which runs after the clock stopped."""


def cua_python() -> Path | str:
    """The venv's python with cua's server installed (installed on first use), or why it cannot be."""
    venv = PEERS_DIR / f"cua-{CUA_VERSION}"
    python = venv / "bin" / "python"
    if (venv / "installed").exists():
        return python
    candidates = [shutil.which(f"python3.{minor}") for minor in (13, 12)]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.1[23]*/bin/python"), reverse=True)]
    base = next((c for c in candidates if c and runs_312_or_313(c)), None)
    if base is None:
        return "cua-computer-server 0.3.46 needs Python 3.12 or 3.13, and neither is on PATH or in ~/.pyenv"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    print(f"installing cua-computer-server {CUA_VERSION} into {venv} ...", flush=True)
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", f"cua-computer-server=={CUA_VERSION}",
                                *CUA_PINS], capture_output=True, text=True)
    if installed.returncode != 0:
        return f"pip could not install cua-computer-server {CUA_VERSION}: {installed.stderr.strip()[-400:]}"
    (venv / "installed").touch()
    return python


def runs_312_or_313(python: str) -> bool:
    """Whether `python` runs and is 3.12 or 3.13 (a pyenv shim may exist and fail)."""
    asked = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2] in ((3, 12), (3, 13)))"],
                           capture_output=True, text=True)
    return asked.stdout.strip() == "True"


def free_display() -> int:
    return next(n for n in range(260, 400) if not Path(f"/tmp/.X11-unix/X{n}").exists()
                and not Path(f"/tmp/.X{n}-lock").exists())


@contextlib.contextmanager
def bare_desktop() -> Iterator[str]:
    """An Xvfb display with openbox on it, as our desktops run; yields its name."""
    name = f":{free_display()}"
    xvfb = subprocess.Popen(["Xvfb", name, "-screen", "0", f"{WIDTH}x{HEIGHT}x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wm = None
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{name[1:]}").exists():
            if xvfb.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"Xvfb {name} did not start")
            time.sleep(0.05)
        wm = subprocess.Popen(["openbox"], env=dict(os.environ, DISPLAY=name), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.5)
        yield name
    finally:
        for proc in (wm, xvfb):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


@contextlib.contextmanager
def cua_server(python: Path, display: str, log: Path) -> Iterator[tuple[str, int]]:
    """cua's computer server on `display`; yields its URL and pid. Without $CONTAINER_NAME, which would make it
    ask its cloud for credentials on every call."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CONTAINER_NAME"}
    env["DISPLAY"] = display
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(python), "-m", "computer_server", "--port", str(port), "--log-level", "warning"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/status", proc, "cua's server", timeout=60, log=log)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


class XCheck:
    """An X client of our own on a display: what the X server itself says; and what the bench sent there (the
    clicks so far, where the last move went), to check against it."""

    def __init__(self, name: str) -> None:
        self.d = xdisplay.Display(name)
        self.root = self.d.screen().root
        self.probe: Probe | None = None
        self.xterm = 0
        self.clicks = 0
        self.moves = 0
        self.keys = 0

    def next_move(self) -> tuple[int, int]:
        self.moves += 1
        return MOVES[self.moves % 2]

    def pointer(self) -> tuple[int, int]:
        reply = self.root.query_pointer()
        return reply.root_x, reply.root_y

    def size(self) -> tuple[int, int]:
        geometry = self.root.get_geometry()
        return geometry.width, geometry.height

    def focus_probe(self) -> None:
        """Give the probe window the keyboard focus: the key rows press their keys into it."""
        for child in self.root.query_tree().children:
            if child.get_wm_name() == "probe":
                child.set_input_focus(X.RevertToParent, X.CurrentTime)
                self.d.sync()
                return
        raise SystemExit(f"no probe window on {self.d.get_display_name()}")

    def window_titled(self, title: str, timeout: float = 20) -> int:
        clients = self.d.get_atom("_NET_CLIENT_LIST")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self.root.get_full_property(clients, 0)
            for wid in listed.value if listed else ():
                if title in (self.d.create_resource_object("window", wid).get_wm_name() or ""):
                    return int(wid)
            time.sleep(0.1)
        raise SystemExit(f"no window titled {title!r} appeared on {self.d.get_display_name()}")


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"check failed: {what}")


def png_size(data: bytes) -> tuple[int, int]:
    expect(data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG")
    return struct.unpack(">II", data[16:24])


@dataclass
class Side:
    """One server as the bench drives it: its calls by the name of the table's row."""

    name: str
    pid: int
    calls: dict[str, Call]
    x_pid: int = 0
    """Its desktop's X server, whose CPU per call is reported beside the server's (0: it has none)."""


def ours(http: httpx.Client, url: str, x: XCheck, ws: Any) -> Side:
    def get(path: str) -> httpx.Response:
        response = http.get(url + path)
        expect(response.status_code == 200, f"GET {path} -> {response.status_code} {response.text[:200]}")
        return response

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = http.post(url + path, json=body)
        expect(response.status_code == 200, f"POST {path} -> {response.status_code} {response.text[:200]}")
        return response.json()

    def message(op: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        ws.send(json.dumps({"id": 1, "op": op, **({"body": body} if body is not None else {})}))
        answer = json.loads(ws.recv())
        expect(answer["status"] == 200, f"{op} -> {answer}")
        return answer

    return Side("ours", 0, {
        "no-op": lambda: (get("/v1/health"), no_check)[1],
        "screenshot": lambda: screenshot_check(get("/v1/desktop/screenshot").content, x),
        "move": lambda: move_check(lambda at: post("/v1/desktop/mouse/move", at), x),
        "click": lambda: click_check(lambda at: post("/v1/desktop/mouse/click", at), x),
        "cursor position": lambda: position_check(get("/v1/desktop/mouse/position").json(), x),
        "screen size": lambda: size_check(get("/v1/desktop/display/info").json()["resolution"], x),
        "window list": lambda: windows_check([int(w["id"]) for w in get("/v1/desktop/windows").json()["windows"]], x),
        "WS no-op": lambda: (message("server.health"), no_check)[1],
        "WS move": lambda: move_check(lambda at: message("mouse.move", at), x),
        "WS click": lambda: click_check(lambda at: message("mouse.click", at), x),
        "key": lambda: key_check(lambda key: post("/v1/desktop/keyboard/press", {"key": key}), x),
        "WS key": lambda: key_check(lambda key: message("keyboard.press", {"key": key}), x),
    })


def cua(http: httpx.Client, url: str, x: XCheck, ws: Any) -> Side:
    def command(name: str, **params: Any) -> dict[str, Any]:
        response = http.post(url + "/cmd", json={"command": name, "params": params})
        expect(response.status_code == 200, f"/cmd {name} -> {response.status_code} {response.text[:200]}")
        answer = json.loads(response.text.removeprefix("data: "))  # one server-sent event
        expect(answer.get("success") is True, f"/cmd {name} -> {str(answer)[:200]}")
        return answer

    def message(name: str, **params: Any) -> dict[str, Any]:
        ws.send(json.dumps({"command": name, "params": params}))
        answer = json.loads(ws.recv())
        expect(answer.get("success") is True, f"/ws {name} -> {answer}")
        return answer

    return Side("cua", 0, {
        "no-op": lambda: (command("version"), no_check)[1],
        "screenshot": lambda: screenshot_check(base64.b64decode(command("screenshot")["image_data"]), x),
        "move": lambda: move_check(lambda at: command("move_cursor", **at), x),
        "click": lambda: click_check(lambda at: command("left_click", **at), x),
        "cursor position": lambda: position_check(command("get_cursor_position")["position"], x),
        "screen size": lambda: size_check(command("get_screen_size")["size"], x),
        "window list": lambda: windows_check(command("get_application_windows", app="scene-term")["windows"], x),
        "WS no-op": lambda: (message("version"), no_check)[1],
        "WS move": lambda: move_check(lambda at: message("move_cursor", **at), x),
        "WS click": lambda: click_check(lambda at: message("left_click", **at), x),
        "key": lambda: key_check(lambda key: command("press_key", key=key), x),
        "WS key": lambda: key_check(lambda key: message("press_key", key=key), x),
    })


def reference(http: httpx.Client, url: str) -> Side:
    def noop() -> Verify:
        response = http.get(url + "/v1/health")
        expect(response.status_code == 200, f"reference GET /v1/health -> {response.status_code}")
        return no_check
    return Side("reference", 0, {"no-op": noop})


def no_check() -> None:
    """A no-op has no effect to check beyond its 200."""


def screenshot_check(png: bytes, x: XCheck) -> Verify:
    return lambda: expect(png_size(png) == x.size(), "the screenshot has the screen's size")


def move_check(send: Callable[[dict[str, int]], object], x: XCheck) -> Verify:
    at = x.next_move()
    send({"x": at[0], "y": at[1]})
    return lambda: expect(x.pointer() == at, f"the pointer moved to {at}")


def click_check(send: Callable[[dict[str, int]], object], x: XCheck) -> Verify:
    left, top, width, height = PROBE
    send({"x": left + width // 2, "y": top + height // 2})
    x.clicks += 1
    sent, probe = x.clicks, x.probe
    assert probe is not None

    def check() -> None:
        pressed = probe.wait_for(lambda e: e["type"] == "ButtonPress" and e["button"] == 1, sent, timeout=5)
        expect(len(pressed) == sent, f"the probe received click {sent} (it has {len(pressed)})")
    return check


def key_check(send: Callable[[str], object], x: XCheck) -> Verify:
    if not x.keys:
        x.focus_probe()
    send("a")
    x.keys += 1
    sent, probe = x.keys, x.probe
    assert probe is not None

    def check() -> None:
        pressed = probe.wait_for(lambda e: e["type"] == "KeyPress" and e["keysym"] == ord("a"), sent, timeout=5)
        expect(len(pressed) == sent, f"the probe received key {sent} (it has {len(pressed)})")
    return check


def position_check(answer: dict[str, int], x: XCheck) -> Verify:
    return lambda: expect((answer["x"], answer["y"]) == x.pointer(), "the position is the X server's")


def size_check(answer: dict[str, int], x: XCheck) -> Verify:
    return lambda: expect((answer["width"], answer["height"]) == x.size(), "the size is the X server's")


def windows_check(ids: list[int], x: XCheck) -> Verify:
    return lambda: expect(x.xterm in ids, "the window list holds the xterm")


Measured = tuple[float, float, float]
"""Median seconds, the server's and its X server's CPU seconds per call."""


def measure(sides: list[Side], row: str, count: int, rounds: int, limit: float) -> dict[str, Measured]:
    """Median seconds, server and X server CPU seconds per call of `row` on each side that has it, in alternating
    blocks, for at most `count` calls each and `limit` seconds in all."""
    having = [side for side in sides if row in side.calls]
    for side in having:
        for _ in range(10):  # warm-up, checked too
            side.calls[row]()()
    samples: dict[str, list[float]] = {side.name: [] for side in having}
    cpu = dict.fromkeys(samples, 0.0)
    x_cpu = dict.fromkeys(samples, 0.0)
    block, deadline = max(1, count // rounds), time.monotonic() + limit
    for _ in range(rounds):
        if time.monotonic() > deadline:
            break
        for side in having:
            before = cpu_seconds(side.pid) if side.pid else float("nan")
            x_before = cpu_seconds(side.x_pid) if side.x_pid else float("nan")
            for _ in range(block):
                start = time.perf_counter()
                check = side.calls[row]()
                samples[side.name].append(time.perf_counter() - start)
                check()  # untimed, but its X requests count in the X server's CPU: alike on both desktops
            cpu[side.name] += (cpu_seconds(side.pid) if side.pid else float("nan")) - before
            x_cpu[side.name] += (cpu_seconds(side.x_pid) if side.x_pid else float("nan")) - x_before
    return {name: (statistics.median(s), cpu[name] / len(s), x_cpu[name] / len(s)) for name, s in samples.items()}


def report(results: dict[str, dict[str, Measured]]) -> None:
    print(f"\n{'call':<16} {'ours ms':>8} {'cua ms':>8} {'ours/cua':>9} {'ref ms':>8} {'ours/ref':>9}   "
          f"CPU per call, server (us): ours / cua / ref; X server: ours / cua")
    for row, found in results.items():
        mine = found["ours"][0]
        cells = [f"{row:<16}", f"{mine * 1e3:8.3f}"]
        for peer in ("cua", "reference"):
            if peer in found:
                cells += [f"{found[peer][0] * 1e3:8.3f}", f"{mine / found[peer][0]:8.2f}x"]
            else:
                cells += [f"{'-':>8}", f"{'-':>9}"]
        cpu = " / ".join(f"{found[s][1] * 1e6:.0f}" if s in found else "-" for s in ("ours", "cua", "reference"))
        x_cpu = " / ".join(f"{found[s][2] * 1e6:.0f}" if s in found else "-" for s in ("ours", "cua"))
        print(" ".join(cells) + f"   {cpu}; {x_cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="timed calls per figure and server (default 400)")
    parser.add_argument("--rounds", type=int, default=8, help="alternating blocks (default 8)")
    parser.add_argument("--shots", type=int, default=60, help="timed screenshots per server (default 60)")
    parser.add_argument("--time-limit", type=float, default=60, help="seconds at most per figure (default 60)")
    parser.add_argument("--display-num", type=int, default=259, help="our desktop's display number")
    parser.add_argument("--calls", nargs="+", metavar="CALL", help="only these rows (\"WS move\", \"click\", ...)")
    args = parser.parse_args()

    python = cua_python()
    if isinstance(python, str):
        raise SystemExit(f"cua's server: {python}")
    if shutil.which("xrandr") is None:  # pywinctl, which cua's server imports, exits without it
        raise SystemExit("cua's server needs xrandr: apt-get install x11-xserver-utils")
    print(OSWORLD_SKIPPED)
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, tmp, True)
        bench = stack.enter_context(bench_desktop("peers", args.display_num, width=WIDTH, height=HEIGHT,
                                                  terminals=1, images=0))
        reference_url = stack.enter_context(reference_server())
        cua_display = stack.enter_context(bare_desktop())
        scene = open_scene(cua_display, terminals=1, images=0)
        stack.callback(close_scene, scene)
        cua_url, cua_pid = stack.enter_context(cua_server(python, cua_display, tmp / "cua.log"))
        geometry = "{2}x{3}+{0}+{1}".format(*PROBE)
        displays = (bench.display, cua_display)
        probes = [Probe(name, tmp / f"probe-{i}.jsonl", geometry) for i, name in enumerate(displays)]
        checks = [XCheck(bench.display), XCheck(cua_display)]
        for check, probe in zip(checks, probes, strict=True):
            stack.callback(probe.close)
            check.probe, check.xterm = probe, check.window_titled("scene-term-0")
        http = stack.enter_context(httpx.Client(headers=bench.api.headers, timeout=30))
        ws_headers = {"Authorization": bench.api.headers["authorization"]}
        our_ws = stack.enter_context(connect(bench.server.url.replace("http", "ws", 1) + "/v1/desktop/ws",
                                             additional_headers=ws_headers, compression=None))
        cua_ws = stack.enter_context(connect(cua_url.replace("http", "ws", 1) + "/ws", compression=None))
        sides = [ours(http, bench.server.url, checks[0], our_ws), cua(http, cua_url, checks[1], cua_ws),
                 reference(http, reference_url)]
        for side, pid in zip(sides, (bench.server.proc.pid, cua_pid, reference_pid(reference_url)), strict=True):
            side.pid = pid
        sides[0].x_pid, sides[1].x_pid = xvfb_pid(bench.display), xvfb_pid(cua_display)
        print(f"ours: display {bench.display}, cua {CUA_VERSION}: display {cua_display}, {WIDTH}x{HEIGHT} each, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
        results = {}
        unknown = set(args.calls or ()) - set(sides[0].calls)
        if unknown:
            raise SystemExit(f"no such calls: {sorted(unknown)}; the rows are {list(sides[0].calls)}")
        for row in args.calls or sides[0].calls:
            count = args.shots if row == "screenshot" else args.requests
            results[row] = measure(sides, row, count, args.rounds, args.time_limit)
            print(f"{row:<16} " + "  ".join(f"{name} {median * 1e3:.3f} ms" for name, (median, _, _) in
                                             results[row].items()), flush=True)
        report(results)
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


def xvfb_pid(display: str) -> int:
    """The pid of the Xvfb serving `display` (ours is the server's child, cua's the bench's), 0 if none is found."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if Path(argv[0].decode()).name == "Xvfb" and display.encode() in argv:
                return int(entry.name)
    return 0


def reference_pid(url: str) -> int:
    """The reference server's pid, found by its listening port (bench/http_floor.py does not hand it out)."""
    port = url.rsplit(":", 1)[1]
    with contextlib.suppress(OSError, IndexError, ValueError):
        found = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
        return int(found.split("pid=", 1)[1].split(",", 1)[0])
    return 0  # its CPU goes unreported


if __name__ == "__main__":
    main()
