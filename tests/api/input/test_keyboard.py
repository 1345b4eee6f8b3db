"""The keyboard against a real Xvfb through the server: typed text must arrive in real X clients.

Effects are checked independently: xterm running `cat > FILE` writes what it received; a tiny
python-xlib client records each key event with the keymap as it is when it reads the event (as
toolkits that read the keymap lazily do); held keys are read back with QueryKeymap.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from Xlib import XK, X
from Xlib import display as xdisplay

from desktop.input.keyboard import Keyboard
from desktop.input.keys import parse_chord
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from tests.conftest import ServerProcess, assert_problem, wait_for

DISPLAY_NUM = 190
UNICODE = 0x01000000

# A client that looks each key event up in the keymap *as it is when it reads the event*, after
# lagging behind like a busy toolkit: a binding changed too early shows up as a wrong keysym.
LAZY_CLIENT = r"""
import json, sys, time
from Xlib import X, display
d = display.Display()
screen = d.screen()
w = screen.root.create_window(20, 20, 300, 200, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
    background_pixel=screen.white_pixel, event_mask=X.KeyPressMask | X.FocusChangeMask | X.ExposureMask)
w.set_wm_name(sys.argv[2])
w.map()
d.sync()
lag = float(sys.argv[3])
with open(sys.argv[1], "a") as out:
    for _ in range(100000):
        time.sleep(lag)
        for _ in range(d.pending_events() or 1):
            e = d.next_event()
            if e.type == X.FocusIn:
                out.write(json.dumps({"focus": True}) + "\n")
            elif e.type == X.KeyPress:
                row = d.get_keyboard_mapping(e.detail, 1)[0]
                shifted = e.state & X.ShiftMask and len(row) > 1 and row[1]
                out.write(json.dumps({"keysym": row[1] if shifted else row[0], "state": e.state}) + "\n")
            out.flush()
"""


@pytest.fixture(scope="module")
def desktop(srv: ServerProcess) -> Iterator[str]:
    with srv.client() as c:
        body = c.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM}).json()
        assert body["state"] == "active", body
        yield body["display"]
        c.post("/v1/desktop/stop")


@pytest.fixture(scope="module")
def xconn(desktop: str) -> Iterator[xdisplay.Display]:
    """An independent X connection of the test: reads the keymap and the keys held down."""
    d = xdisplay.Display(desktop)
    yield d
    d.close()


@pytest.fixture(scope="module")
def pristine(xconn: xdisplay.Display) -> list[tuple[int, ...]]:
    """The keymap before any keyboard request."""
    return keymap(xconn)


@pytest.fixture
def api(srv: ServerProcess, pristine: list[tuple[int, ...]]) -> Iterator[httpx.Client]:
    with srv.client() as c:
        yield c


def keymap(d: xdisplay.Display) -> list[tuple[int, ...]]:
    info = d.display.info
    return [tuple(row) for row in d.get_keyboard_mapping(info.min_keycode, info.max_keycode - info.min_keycode + 1)]


def keys_down(d: xdisplay.Display) -> set[int]:
    return {i * 8 + b for i, byte in enumerate(d.query_keymap()) for b in range(8) if byte >> b & 1}


def keycode(d: xdisplay.Display, name: str) -> int:
    return int(d.keysym_to_keycode(XK.string_to_keysym(name)))


def xdotool(display: str, *args: str) -> str:
    done = subprocess.run(["xdotool", *args], env=dict(os.environ, DISPLAY=display), capture_output=True,
                          text=True, timeout=10)
    return done.stdout.strip()


def focus(display: str, title: str) -> str:
    """Activate the window titled `title` through EWMH and wait until it has the X focus."""
    wid = str(wait_for(lambda: xdotool(display, "search", "--name", f"^{title}$").split("\n")[0], title))
    xdotool(display, "windowactivate", "--sync", wid)

    def focused() -> bool:
        if xdotool(display, "getwindowfocus") == wid:
            return True
        # openbox may still be moving its focus away from a window that just closed.
        xdotool(display, "windowfocus", "--sync", wid)
        return False

    wait_for(focused, f"{title} to have the focus")
    return wid


class Cat:
    """An xterm running `cat > FILE`: what the keyboard typed ends up in FILE."""

    def __init__(self, display: str, path: Path, title: str) -> None:
        self.path = path
        env = dict(os.environ, DISPLAY=display, LC_ALL="C.UTF-8")
        self.proc = subprocess.Popen(["xterm", "-T", title, "-geometry", "80x24+10+10", "-e", "sh", "-c",
                                      f"exec cat > {path}"], env=env, stderr=subprocess.DEVNULL)
        focus(display, title)

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""

    def wait_text(self, expected: str) -> str:
        wait_for(lambda: len(self.text()) >= len(expected), f"{expected!r} in {self.path} (got {self.text()!r})")
        return self.text()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def cat(desktop: str, tmp_path: Path) -> Iterator[Cat]:
    term = Cat(desktop, tmp_path / "typed.txt", f"cat-{time.monotonic_ns()}")
    yield term
    term.close()


class LazyClient:
    """The recording client: each KeyPress as (keysym, state), looked up lazily."""

    def __init__(self, display: str, path: Path, lag: float) -> None:
        self.path = path
        title = f"lazy-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", LAZY_CLIENT, str(path), title, str(lag)],
                                     env=dict(os.environ, DISPLAY=display))
        focus(display, title)
        wait_for(lambda: any("focus" in r for r in self.records()), "the client to get the focus")

    def records(self) -> list[dict[str, int]]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        return [json.loads(line) for line in lines]

    def keys(self, count: int) -> list[dict[str, int]]:
        """The first `count` key presses that are not modifiers (waiting for them)."""
        def presses() -> list[dict[str, int]]:
            return [r for r in self.records() if "keysym" in r and not is_modifier(r["keysym"])]

        wait_for(lambda: len(presses()) >= count, f"{count} key events")
        return presses()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def lazy(desktop: str, tmp_path: Path) -> Iterator[LazyClient]:
    client = LazyClient(desktop, tmp_path / "events.jsonl", lag=0.1)
    yield client
    client.close()


def is_modifier(keysym: int) -> bool:
    return 0xFFE1 <= keysym <= 0xFFEE or keysym == XK.string_to_keysym("ISO_Level3_Shift")


def typed(keysym: int) -> str:
    if keysym == XK.XK_Return:
        return "\n"
    return chr(keysym - UNICODE if keysym >= UNICODE else keysym)


def fields(problem: dict[str, object]) -> list[str]:
    errors = problem["errors"]
    assert isinstance(errors, list)
    return [e["field"] for e in errors]


def ok(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True}


# -- typing ----------------------------------------------------------------------------------------


def test_type_ascii_unicode_newlines_and_tabs(api: httpx.Client, cat: Cat, xconn: xdisplay.Display) -> None:
    text = "Hello, World! ~`|\\\"'<>{}\nhéllo wörld ✓ 日本語 🙂\r\ncol1\tcol2\n"
    ok(api.post("/v1/desktop/keyboard/type", json={"text": text, "delayMs": 0}))
    assert cat.wait_text(text.replace("\r\n", "\n")) == text.replace("\r\n", "\n")
    ok(api.post("/v1/desktop/keyboard/type", json={"text": "slow ü\n"}))  # default delay, 10 ms
    assert cat.wait_text(text.replace("\r\n", "\n") + "slow ü\n").endswith("slow ü\n")
    assert keys_down(xconn) == set()


def test_type_is_exact_with_caps_lock_on_and_shift_held(api: httpx.Client, cat: Cat, desktop: str,
                                                        xconn: xdisplay.Display) -> None:
    root = xconn.screen().root
    xdotool(desktop, "key", "Caps_Lock")
    assert root.query_pointer().mask & X.LockMask
    ok(api.post("/v1/desktop/keyboard/type", json={"text": "Hello ÄÖü\n", "delayMs": 0}))
    assert cat.wait_text("Hello ÄÖü\n") == "Hello ÄÖü\n"
    assert root.query_pointer().mask & X.LockMask, "Caps Lock must be left as it was"
    xdotool(desktop, "key", "Caps_Lock")
    ok(api.post("/v1/desktop/keyboard/down", json={"key": "shift"}))
    ok(api.post("/v1/desktop/keyboard/type", json={"text": "abc\n", "delayMs": 0}))
    assert cat.wait_text("Hello ÄÖü\nabc\n") == "Hello ÄÖü\nabc\n"
    assert keys_down(xconn) == {keycode(xconn, "Shift_L")}, "the held Shift is held again afterwards"
    ok(api.post("/v1/desktop/keyboard/up", json={"key": "shift"}))
    assert keys_down(xconn) == set()


def test_lazy_client_sees_no_mangling_at_full_speed(api: httpx.Client, lazy: LazyClient) -> None:
    # 50 distinct characters missing from the US layout: more than the ~19 spare keycodes, so
    # bindings must be recycled while the client is still reading older events.
    cjk = "".join(chr(0x4E00 + 7 * i) for i in range(50))
    text = "héllo wörld ✓ 日本語 🙂\n" + cjk + "\nABC xyz ÿ 🙂🙃\n"
    ok(api.post("/v1/desktop/keyboard/type", json={"text": text, "delayMs": 0}))
    events = lazy.keys(len(text))
    assert "".join(typed(e["keysym"]) for e in events) == text


def test_concurrent_type_requests_stay_contiguous_and_in_order(srv: ServerProcess, cat: Cat) -> None:
    first = "".join(f"first {i:02d} " + "a" * 40 + "\n" for i in range(8))
    second = "".join(f"second {i:02d} " + "b" * 40 + "\n" for i in range(8))
    results: list[httpx.Response] = []

    def send(text: str, delay_ms: int) -> None:
        with srv.client() as c:
            results.append(c.post("/v1/desktop/keyboard/type", json={"text": text, "delayMs": delay_ms}))

    sender = threading.Thread(target=send, args=(first, 1))
    sender.start()
    time.sleep(0.1)  # the first request is typing (about 400 characters, 1 ms apart)
    send(second, 0)
    sender.join(30)
    assert [r.status_code for r in results] == [200, 200]
    assert cat.wait_text(first + second) == first + second


# -- keys ------------------------------------------------------------------------------------------


def test_chords_modifiers_and_aliases_reach_the_client(api: httpx.Client, lazy: LazyClient) -> None:
    presses = [
        {"key": "ctrl+c"},
        {"key": "t", "modifiers": {"ctrl": True, "shift": True}},
        {"key": "ENTER"}, {"key": "ESC"}, {"key": "pgdn"}, {"key": "Page_Up"}, {"key": "ArrowLeft"},
        {"key": "Backspace"}, {"key": "Del"}, {"key": "F5"}, {"key": "KP_0"}, {"key": "é"}, {"key": "A"},
        {"key": "ctrl+a BackSpace"},
    ]
    for body in presses:
        ok(api.post("/v1/desktop/keyboard/press", json=body))
    names = ["c", "T", "Return", "Escape", "Next", "Prior", "Left", "BackSpace", "Delete", "F5", "KP_0",
             "eacute", "A", "a", "BackSpace"]
    events = lazy.keys(len(names))
    assert [e["keysym"] for e in events] == [XK.string_to_keysym(n) for n in names]
    assert events[0]["state"] & X.ControlMask
    assert events[1]["state"] & X.ControlMask and events[1]["state"] & X.ShiftMask
    assert events[13]["state"] & X.ControlMask and not events[14]["state"] & X.ControlMask
    assert not events[2]["state"] & (X.ControlMask | X.ShiftMask)


def test_ctrl_c_ends_cat_in_xterm(api: httpx.Client, cat: Cat) -> None:
    ok(api.post("/v1/desktop/keyboard/type", json={"text": "partial line\n", "delayMs": 0}))
    cat.wait_text("partial line\n")
    ok(api.post("/v1/desktop/keyboard/press", json={"key": "ctrl+c"}))
    cat.proc.wait(10)  # SIGINT ended cat, so the shell and then xterm exited


def test_down_and_up_hold_and_release(api: httpx.Client, xconn: xdisplay.Display) -> None:
    ok(api.post("/v1/desktop/keyboard/down", json={"key": "ctrl+shift"}))
    assert keys_down(xconn) == {keycode(xconn, "Control_L"), keycode(xconn, "Shift_L")}
    ok(api.post("/v1/desktop/keyboard/up", json={"key": "CONTROL+Shift"}))
    assert keys_down(xconn) == set()
    ok(api.post("/v1/desktop/keyboard/down", json={"key": "ß"}))  # a bound spare keycode, held
    assert len(keys_down(xconn)) == 1
    ok(api.post("/v1/desktop/keyboard/up", json={"key": "ß"}))
    assert keys_down(xconn) == set()


# -- errors ----------------------------------------------------------------------------------------


def test_invalid_requests(api: httpx.Client, xconn: xdisplay.Display) -> None:
    problem = assert_problem(api.post("/v1/desktop/keyboard/press", json={"key": "ctrl+Foo"}), 400,
                             "desktop_invalid_action")
    assert str(problem["detail"]).startswith("unknown key 'Foo' in 'ctrl+Foo'")
    assert fields(problem) == ["key"]
    for path in ("press", "down", "up"):
        blank = assert_problem(api.post(f"/v1/desktop/keyboard/{path}", json={"key": "  "}), 400,
                               "desktop_invalid_action")
        assert blank["detail"] == "key must not be empty"
    empty = assert_problem(api.post("/v1/desktop/keyboard/type", json={"text": ""}), 400, "desktop_invalid_action")
    assert empty["detail"] == "text must not be empty"
    assert fields(empty) == ["text"]
    assert_problem(api.post("/v1/desktop/keyboard/type", json={"text": "x" * 100_001}), 413, "payload_too_large")
    for delay in (-1, 60_001):
        bad = assert_problem(api.post("/v1/desktop/keyboard/type", json={"text": "x", "delayMs": delay}), 400,
                             "desktop_invalid_action")
        assert fields(bad) == ["delayMs"]
    assert_problem(api.post("/v1/desktop/keyboard/type", json={"text": 5}), 422)
    assert_problem(api.post("/v1/desktop/keyboard/press", json={}), 422)
    assert keys_down(xconn) == set()


def test_no_key_left_held_when_a_chord_cannot_be_bound(api: httpx.Client, xconn: xdisplay.Display,
                                                       pristine: list[tuple[int, ...]]) -> None:
    spare = sum(1 for row in pristine if not any(row))
    held = "+".join(chr(0x0410 + i) for i in range(spare - 2))  # Cyrillic, all missing from the layout
    ok(api.post("/v1/desktop/keyboard/down", json={"key": held}))
    pinned = keys_down(xconn)
    assert len(pinned) == spare - 2
    too_many = "ctrl+shift+" + "+".join(chr(0x0390 + i) for i in range(5))  # Greek: 5 more, 2 spare left
    problem = assert_problem(api.post("/v1/desktop/keyboard/press", json={"key": too_many}), 502,
                             "desktop_input_failed")
    assert "keyboard/up" in str(problem["detail"])
    assert keys_down(xconn) == pinned, "nothing of the failed chord may stay held"
    ok(api.post("/v1/desktop/keyboard/up", json={"key": held}))
    assert keys_down(xconn) == set()


def test_keymap_is_restored_after_idle(api: httpx.Client, cat: Cat, xconn: xdisplay.Display,
                                       pristine: list[tuple[int, ...]]) -> None:
    ok(api.post("/v1/desktop/keyboard/type", json={"text": "ŵ ŷ\n", "delayMs": 0}))
    cat.wait_text("ŵ ŷ\n")
    assert keymap(xconn) != pristine, "the spare keycodes are bound right after typing"
    wait_for(lambda: keymap(xconn) == pristine, "the keymap to be restored", timeout=10)


def test_release_all_and_close_leave_nothing_behind(desktop: str, xconn: xdisplay.Display,
                                                    pristine: list[tuple[int, ...]]) -> None:
    # The API the lead reuses (batch actions, live view), in-process against the same display.
    wait_for(lambda: keymap(xconn) == pristine, "the server's bindings to be restored")

    async def scenario() -> None:
        x = XThread(desktop, "test-keyboard")
        session = Session(display=desktop, width=1, height=1, x=x, env={}, home="/tmp")
        keyboard = Keyboard()
        try:
            await keyboard.chord_down(session, parse_chord("ctrl+shift+ŵ"))
            assert len(keys_down(xconn)) == 3 and keymap(xconn) != pristine
            await keyboard.release_all(session)
            assert keys_down(xconn) == set()
            await keyboard.key_down(session, 0x01000000 + ord("ŷ"))
            code = await x.call(keyboard.keycode_of, 0x01000000 + ord("ŷ"))
            assert code is not None and keys_down(xconn) == {code}
            await keyboard.close()  # releases the key and unbinds at once, without the idle wait
            assert keys_down(xconn) == set()
            assert keymap(xconn) == pristine
        finally:
            await x.close()

    asyncio.run(scenario())


def test_type_is_exact_on_a_german_layout(api: httpx.Client, cat: Cat, desktop: str) -> None:
    # AltGr (level 3) for @ { } | ~ \ µ, Shift for Ü Z Y, z and y swapped, ü ß on their own keys.
    env = dict(os.environ, DISPLAY=desktop)
    subprocess.run(["setxkbmap", "-layout", "de"], env=env, check=True, timeout=10)
    try:
        text = "a@b{c}|~\\ üÜß µ zZyY 日€\n"
        ok(api.post("/v1/desktop/keyboard/type", json={"text": text, "delayMs": 0}))
        assert cat.wait_text(text) == text
    finally:
        subprocess.run(["setxkbmap", "-layout", "us"], env=env, check=True, timeout=10)
