"""The clipboard against a real Xvfb through the server: other X clients must see what we own.

Effects are checked independently: `xclip -o` reads what the API wrote, `xclip -i` owns what the API
reads, xterm pastes PRIMARY into `cat > FILE`, and a bare python-xlib client plays the parts xclip
cannot (MULTIPLE, a refused target, an owner that never answers, requestors that stall or vanish
halfway through an INCR transfer).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from Xlib import X, Xatom
from Xlib import display as xdisplay

from tests.conftest import ServerProcess, assert_problem, wait_for
from tests.support.pids import child_host_pid, restarted_child

DISPLAY_NUM = 200
UNICODE = "héllo ✓ 日本語 🙂"
TEN_MB = 10 * 1024 * 1024


def big_text(size: int, seed: str) -> str:
    """About `size` UTF-8 bytes of mixed-width text, distinct per seed, ending with a marker."""
    unit = f"{seed} {UNICODE} line\n"
    return unit * (size // len(unit.encode())) + f"<end {seed}>"


@pytest.fixture(scope="module")
def desktop(api: httpx.Client) -> Iterator[str]:
    body = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM}).json()
    assert body["state"] == "active", body
    yield body["display"]
    api.post("/v1/desktop/stop")


def current_display(api: httpx.Client) -> str:
    return str(api.get("/v1/desktop/status").json()["display"])


def xclip_out(display: str, selection: str = "clipboard", target: str | None = None) -> bytes:
    """What an independent client reads: `xclip -o`."""
    args = ["xclip", "-o", "-selection", selection, *(["-t", target] if target else [])]
    done = subprocess.run(args, env=dict(os.environ, DISPLAY=display), capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


class XclipOwner:
    """`xclip -i` owning a selection, kept in the foreground (-quiet) so the test can kill it."""

    def __init__(self, display: str, data: bytes, selection: str, tmp: Path) -> None:
        source = tmp / f"xclip-{selection}-{time.monotonic_ns()}"
        source.write_bytes(data)
        with open(source, "rb") as stdin:
            self.proc = subprocess.Popen(["xclip", "-quiet", "-i", "-selection", selection], stdin=stdin,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=dict(os.environ, DISPLAY=display))
        # Owned once another client sees its targets (our own window never offers just these).
        wait_for(lambda: self.proc.poll() is None and xclip_targets(display, selection) == [b"TARGETS", b"UTF8_STRING"],
                 f"xclip to own {selection}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def xclip_targets(display: str, selection: str) -> list[bytes]:
    done = subprocess.run(["xclip", "-o", "-selection", selection, "-t", "TARGETS"], capture_output=True,
                          env=dict(os.environ, DISPLAY=display), timeout=10)
    return done.stdout.split() if done.returncode == 0 else []


@pytest.fixture
def owners(tmp_path: Path) -> Iterator[Callable[[str, bytes, str], XclipOwner]]:
    started: list[XclipOwner] = []

    def make(display: str, data: bytes, selection: str = "clipboard") -> XclipOwner:
        owner = XclipOwner(display, data, selection, tmp_path)
        started.append(owner)
        return owner

    yield make
    for owner in started:
        owner.kill()


class Requestor:
    """A bare X client: converts selections by hand, so a test controls every step of the protocol."""

    def __init__(self, display: str) -> None:
        self.d = xdisplay.Display(display)
        self.window = self.d.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent, X.InputOnly,
                                                         X.CopyFromParent, event_mask=X.PropertyChangeMask)
        self.d.sync()

    def atom(self, name: str) -> int:
        return int(self.d.intern_atom(name))

    def next_event(self, kind: int, timeout: float = 10) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while self.d.pending_events():
                ev = self.d.next_event()
                if ev.type == kind:
                    return ev
            select.select([self.d.fileno()], [], [], max(0.0, deadline - time.monotonic()))
        raise AssertionError(f"no X event {kind} within {timeout} s")

    def convert(self, selection: str, target: str, prop: str) -> Any:
        """ConvertSelection and wait for the SelectionNotify."""
        self.window.convert_selection(self.atom(selection), self.atom(target), self.atom(prop), X.CurrentTime)
        self.d.flush()
        return self.next_event(X.SelectionNotify)

    def read(self, prop: str, delete: bool = False) -> Any:
        return self.window.get_property(self.atom(prop), X.AnyPropertyType, 0, 1 << 28, delete=delete)

    def own(self, selection: str) -> None:
        """Take the selection and never answer a request for it (a hung application)."""
        self.window.set_selection_owner(self.atom(selection), X.CurrentTime)
        self.d.sync()

    def close(self) -> None:
        self.d.close()


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def set_text(api: httpx.Client, text: str, selection: str | None = None) -> None:
    body: dict[str, Any] = {"text": text}
    if selection is not None:
        body["selection"] = selection
    assert ok(api.post("/v1/desktop/clipboard", json=body)) == {"ok": True}


def get_text(api: httpx.Client, selection: str = "clipboard") -> str:
    body = ok(api.get("/v1/desktop/clipboard", params={"selection": selection}))
    assert body["selection"] == selection
    return str(body["text"])


# -- writing: the API owns, other clients read ---------------------------------------------------


def test_set_is_read_by_xclip_for_each_selection(api: httpx.Client, desktop: str) -> None:
    set_text(api, "primary only", "primary")
    set_text(api, "clipboard only")  # the default selection is clipboard
    assert xclip_out(desktop, "clipboard") == b"clipboard only"
    assert xclip_out(desktop, "primary") == b"primary only"
    set_text(api, "in both", "both")
    assert xclip_out(desktop, "clipboard") == xclip_out(desktop, "primary") == b"in both"
    set_text(api, "null means clipboard", None)
    assert ok(api.post("/v1/desktop/clipboard", json={"text": "null selection", "selection": None})) == {"ok": True}
    assert xclip_out(desktop, "clipboard") == b"null selection"


def test_unicode_and_every_text_target(api: httpx.Client, desktop: str) -> None:
    set_text(api, UNICODE)
    assert xclip_out(desktop).decode() == UNICODE
    targets = xclip_out(desktop, target="TARGETS").split()
    for target in (b"TARGETS", b"UTF8_STRING", b"STRING", b"TEXT", b"text/plain;charset=utf-8", b"text/plain",
                   b"TIMESTAMP", b"MULTIPLE"):
        assert target in targets
    assert xclip_out(desktop, target="text/plain;charset=utf-8").decode() == UNICODE
    assert xclip_out(desktop, target="STRING") == "héllo ? ??? ?".encode("latin-1")  # Latin-1, rest replaced
    assert xclip_out(desktop, target="TEXT").decode() == UNICODE  # not Latin-1: TEXT answers UTF-8
    set_text(api, "café")
    assert xclip_out(desktop, target="TEXT") == "café".encode("latin-1")  # Latin-1 when it is exact
    assert get_text(api) == "café"


def test_empty_text_is_owned_and_empty(api: httpx.Client, desktop: str) -> None:
    set_text(api, "")
    assert b"UTF8_STRING" in xclip_out(desktop, target="TARGETS").split()  # still owned, not abandoned
    assert xclip_out(desktop) == b""
    assert get_text(api) == ""


def test_ten_megabytes_through_incr_to_several_readers(api: httpx.Client, desktop: str) -> None:
    text = big_text(TEN_MB, "api")
    set_text(api, text, "both")
    expected = text.encode()
    results: list[bytes] = []
    readers = [threading.Thread(target=lambda: results.append(xclip_out(desktop))) for _ in range(3)]
    for reader in readers:
        reader.start()
    # Other API calls go on while the transfers run.
    assert api.get("/v1/desktop/status").json()["state"] == "active"
    assert get_text(api, "primary") == text
    for reader in readers:
        reader.join(60)
    assert len(results) == 3 and all(r == expected for r in results)
    assert xclip_out(desktop, "primary") == expected  # still served after the first readers


def test_value_persists_across_reads_and_other_calls(api: httpx.Client, desktop: str) -> None:
    set_text(api, "persistent")
    for _ in range(5):
        assert xclip_out(desktop) == b"persistent"
        api.get("/v1/desktop/status")
        api.get("/v1/desktop/windows")
        assert get_text(api) == "persistent"


def test_multiple_timestamp_and_refused_targets(api: httpx.Client, desktop: str) -> None:
    set_text(api, UNICODE)
    client = Requestor(desktop)
    try:
        assert client.convert("CLIPBOARD", "image/png", "OUT").property == X.NONE
        pairs = [client.atom(n) for n in ("UTF8_STRING", "P1", "image/png", "P2", "TIMESTAMP", "P3")]
        client.window.change_property(client.atom("PAIRS"), client.atom("ATOM_PAIR"), 32, pairs)
        notify = client.convert("CLIPBOARD", "MULTIPLE", "PAIRS")
        assert notify.property == client.atom("PAIRS")
        answered = list(client.read("PAIRS").value)
        assert answered[3] == X.NONE and answered[1] == client.atom("P1") and answered[5] == client.atom("P3")
        assert bytes(client.read("P1").value).decode() == UNICODE
        stamp = client.read("P3")
        assert stamp.property_type == Xatom.INTEGER and stamp.value[0] > 0
    finally:
        client.close()


def test_stalled_and_vanished_requestors_block_nothing(api: httpx.Client, desktop: str) -> None:
    text = big_text(TEN_MB, "stall")
    set_text(api, text)
    stalled, vanished = Requestor(desktop), Requestor(desktop)
    try:
        incr = stalled.atom("INCR")
        assert stalled.read("IN") is None
        stalled.convert("CLIPBOARD", "UTF8_STRING", "IN")
        assert stalled.read("IN").property_type == incr  # and it never deletes it: the transfer stalls
        vanished.convert("CLIPBOARD", "UTF8_STRING", "IN")
        assert vanished.read("IN", delete=True).property_type == incr  # asks for the first chunk...
        vanished.next_event(X.PropertyNotify)
        vanished.close()  # ...and disappears mid-transfer
        set_text(api, "after the stall")  # answers although two transfers hang
        assert xclip_out(desktop) == b"after the stall"
        assert get_text(api) == "after the stall"
    finally:
        stalled.close()


# -- reading: another client owns, the API reads -------------------------------------------------


def test_get_reads_what_xclip_owns(api: httpx.Client, desktop: str, owners: Callable[..., XclipOwner]) -> None:
    owners(desktop, UNICODE.encode(), "clipboard")
    owners(desktop, b"from primary", "primary")
    assert get_text(api, "clipboard") == UNICODE
    assert get_text(api, "primary") == "from primary"


def test_get_reads_ten_megabytes_through_incr(api: httpx.Client, desktop: str,
                                              owners: Callable[..., XclipOwner]) -> None:
    text = big_text(TEN_MB, "xclip")
    owners(desktop, text.encode(), "clipboard")
    assert get_text(api) == text


def test_no_owner_reads_as_empty(api: httpx.Client, desktop: str, owners: Callable[..., XclipOwner]) -> None:
    owners(desktop, b"soon gone", "primary").kill()  # the server drops a dead client's selections
    wait_for(lambda: xclip_targets(desktop, "primary") == [], "PRIMARY to have no owner")
    assert get_text(api, "primary") == ""


def test_a_hung_owner_is_a_504_and_blocks_no_other_call(api: httpx.Client, desktop: str, srv: ServerProcess) -> None:
    hung = Requestor(desktop)
    hung.own("CLIPBOARD")
    responses: list[httpx.Response] = []
    try:
        with srv.client() as other:
            reader = threading.Thread(target=lambda: responses.append(other.get("/v1/desktop/clipboard")))
            reader.start()
            hung.next_event(X.SelectionRequest)  # the server's read reached the hung owner
            set_text(api, "meanwhile", "primary")
            assert xclip_out(desktop, "primary") == b"meanwhile"
            assert api.get("/v1/desktop/status").status_code == 200
            assert not responses, "the read of a hung owner should still be waiting"
            reader.join(30)
        problem = assert_problem(responses[0], 504)
        assert "CLIPBOARD" in str(problem["detail"])
    finally:
        hung.close()


# -- validation and lifecycle --------------------------------------------------------------------


def test_bad_selection_is_400_naming_selection(api: httpx.Client, desktop: str) -> None:
    cases = [api.get("/v1/desktop/clipboard", params={"selection": "both"}),
             api.get("/v1/desktop/clipboard", params={"selection": "secondary"}),
             api.post("/v1/desktop/clipboard", json={"text": "x", "selection": "CLIPBOARD"})]
    for response in cases:
        problem = assert_problem(response, 400, "desktop_invalid_action")
        errors: Any = problem["errors"]
        assert [e["field"] for e in errors] == ["selection"], problem
    assert "only meaningful when writing" in str(assert_problem(cases[0], 400)["detail"])
    assert_problem(api.post("/v1/desktop/clipboard", json={"selection": "clipboard"}), 422)


def test_paste_primary_into_xterm(api: httpx.Client, desktop: str, tmp_path: Path) -> None:
    out = tmp_path / "pasted.txt"
    env = dict(os.environ, DISPLAY=desktop, LC_ALL="C.UTF-8")
    title = f"paste-{time.monotonic_ns()}"
    term = subprocess.Popen(["xterm", "-u8", "-T", title, "-geometry", "80x10+10+10", "-e", "sh", "-c",
                             f"exec cat > {out}"], env=env, stderr=subprocess.DEVNULL)

    def xdotool(*args: str) -> str:
        return subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        wid = wait_for(lambda: xdotool("search", "--name", f"^{title}$").split("\n")[0], "the xterm window")
        xdotool("windowactivate", "--sync", wid)
        wait_for(lambda: xdotool("getwindowfocus") == wid, "the xterm to have the focus")
        set_text(api, f"pasted {UNICODE}", "primary")
        xdotool("key", "--clearmodifiers", "shift+Insert", "Return")  # xterm: shift+Insert pastes PRIMARY
        wait_for(lambda: out.exists() and out.read_text("utf-8").endswith("\n"), "the paste in the file")
        assert out.read_text("utf-8") == f"pasted {UNICODE}\n"
    finally:
        term.kill()
        term.wait()


def test_works_again_after_stop_start_and_an_x_server_crash(api: httpx.Client, desktop: str) -> None:
    set_text(api, "before stop")
    ok(api.post("/v1/desktop/stop"))
    assert_problem(api.get("/v1/desktop/clipboard"), 409, "desktop_runtime_inactive")
    display = ok(api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM}))["display"]
    assert get_text(api) == ""  # a new X server: the old value went with the old one
    set_text(api, "after restart")
    assert xclip_out(display) == b"after restart"

    xvfb = child_host_pid(api.get("/v1/desktop/status").json(), "Xvfb")
    os.kill(xvfb, signal.SIGKILL)
    wait_for(lambda: restarted_child(api.get("/v1/desktop/status").json(), "Xvfb", xvfb), "Xvfb to be restarted")
    wait_for(lambda: api.post("/v1/desktop/clipboard", json={"text": "after crash"}).status_code == 200,
             "the clipboard to answer after the crash")
    assert xclip_out(display) == b"after crash"
    assert get_text(api) == "after crash"
