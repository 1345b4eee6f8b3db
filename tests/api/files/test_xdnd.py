"""Dropping files onto real applications with XDND: GTK 3's file chooser (zenity) and Chromium on a local page.

Nothing here plays the target: zenity selects a dropped file the way GTK does and prints it when accepted;
Chromium hands the files to the page's `drop` listener, which lists their names and reads one, and the page's
text is read back through the accessibility tree.
"""

from __future__ import annotations

import base64
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from Xlib import X, Xatom
from Xlib import display as xdisplay
from Xlib.protocol import event

from tests.conftest import assert_problem, wait_for
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 712, "width": 1280, "height": 800}
DROP = "/v1/desktop/drop"

pytestmark = pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                                reason="needs zenity and chromium (scripts/setup.sh test installs them)")

PAGE = """<!doctype html><html><head><title>Drop zone</title><style>
body { margin: 0; font: 16px sans-serif }
#zone { position: absolute; left: 0; top: 0; width: 100%; height: 300px; background: #ddf }
</style></head><body>
<div id="zone">Drop files here</div>
<p id="out" style="position:absolute;left:20px;top:350px">nothing dropped</p>
<script>
const zone = document.getElementById('zone'), out = document.getElementById('out');
zone.addEventListener('dragover', e => e.preventDefault());
zone.addEventListener('drop', async e => {
  e.preventDefault();
  const files = [...e.dataTransfer.files];
  const names = files.map(f => f.name).join(', ');
  const text = files.length ? (await files[0].text()).trim() : '';
  out.textContent = 'dropped ' + files.length + ': ' + names + ' | first says ' + text;
});
</script></body></html>"""


def window_of(api: httpx.Client, window_id: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(lambda: next((w for w in api.get("/v1/desktop/windows").json()["windows"]
                                                   if w["id"] == window_id), None), f"window {window_id}")
    return found


def output_of(api: httpx.Client, process_id: str) -> str:
    entries = api.get(f"/v1/processes/{process_id}/logs", params={"stream": "stdout"}).json()["entries"]
    return b"".join(base64.b64decode(e["data"]) if e.get("encoding") == "base64" else e["data"].encode()
                    for e in entries).decode()


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "to drop"  # a space, percent-encoded in the URIs
    folder.mkdir()
    made = []
    for name, text in (("notes ✓.txt", "hello from notes"), ("b.txt", "second file")):
        (folder / name).write_text(text + "\n")
        made.append(folder / name)
    return made


@pytest.fixture
def chooser(api: httpx.Client) -> Iterator[dict[str, Any]]:
    launched = api.post("/v1/desktop/launch", json={"app": "zenity", "wait": True, "waitTimeoutMs": 20000,
                                                   "args": ["--file-selection", "--title=Pick one"]})
    assert launched.status_code == 200, launched.text
    body: dict[str, Any] = launched.json()
    yield body
    api.post(f"/v1/processes/{body['processId']}/kill")


@pytest.fixture(scope="module")
def page(api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with desktop_page(api, tmp_path_factory.mktemp("page"), "drop.html", PAGE, position="300,100") as launched:
        yield launched


def find_text(api: httpx.Client, text: str) -> list[dict[str, Any]]:
    response = api.post("/v1/desktop/accessibility/find", json={"nameContains": text})
    assert response.status_code == 200, response.text
    elements: list[dict[str, Any]] = response.json()["elements"]
    return elements


def test_a_file_dropped_on_gtks_file_chooser_is_chosen(api: httpx.Client, chooser: dict[str, Any],
                                                       files: list[Path]) -> None:
    window = window_of(api, chooser["windowId"])
    x, y = window["x"] + window["width"] * 2 // 3, window["y"] + window["height"] // 2
    dropped = api.post(DROP, json={"paths": [str(files[0])], "x": x, "y": y})
    assert dropped.status_code == 200, dropped.text
    body = dropped.json()
    assert body["xdndVersion"] == 5 and body["action"] == "copy"
    assert body["uris"] == [files[0].as_uri()] and "%20" in body["uris"][0] and "%E2%9C%93" in body["uris"][0]
    logged = api.get("/v1/desktop/actions/log").json()["entries"][-1]
    assert logged["kind"] == "drop" and logged["paths"] == [str(files[0])] and logged["windowId"] == chooser["windowId"]
    # GTK selects the dropped file once it has read its folder: accepting the dialog then prints it. A Return
    # before that selects nothing and is harmless, so it is pressed until the file comes out (bounded).
    def accepted() -> bool:
        assert api.post("/v1/desktop/keyboard/press", json={"key": "Return"}).status_code == 200
        time.sleep(0.5)
        return output_of(api, chooser["processId"]).strip() == str(files[0])

    wait_for(accepted, "zenity to print the dropped file", 15)


def test_files_dropped_on_a_page_reach_its_drop_listener(api: httpx.Client, page: dict[str, Any],
                                                         files: list[Path]) -> None:
    window = window_of(api, page["windowId"])
    wait_for(lambda: find_text(api, "Drop files here"), "the page to load", 30)
    x, y = window["x"] + 300, window["y"] + window["height"] // 3
    dropped = api.post(DROP, json={"paths": [str(f) for f in files], "x": x, "y": y})
    assert dropped.status_code == 200, dropped.text
    assert dropped.json()["windowId"] == page["windowId"]
    wait_for(lambda: find_text(api, "dropped 2: notes ✓.txt, b.txt | first says hello from notes"),
             "the page to list the dropped files and read the first", 15)


def test_no_drop_target_and_bad_requests_name_their_field(api: httpx.Client, files: list[Path]) -> None:
    # the root window (desktop background) at the bottom-right corner takes no drops
    assert_problem(api.post(DROP, json={"paths": [str(files[0])], "x": 1279, "y": 799}), 409, "no_drop_target")
    problem = assert_problem(api.post(DROP, json={"paths": [str(files[0]), "/no/such/file"], "x": 5, "y": 5}),
                             422, "path_not_found")
    assert problem["errors"][0]["field"] == "paths[1]"  # type: ignore[index]
    for body, field in (({"paths": [str(files[0])], "x": 1280, "y": 5}, "x"),
                        ({"paths": [str(files[0])], "x": 5, "y": -1}, "y")):
        problem = assert_problem(api.post(DROP, json=body), 400, "desktop_invalid_action")
        assert problem["errors"][0]["field"] == field  # type: ignore[index]
    problem = assert_problem(api.post(DROP, json={"paths": [], "x": 5, "y": 5}), 400)
    assert problem["errors"][0]["field"] == "paths"  # type: ignore[index]
    assert_problem(api.post(DROP, json={"x": 5, "y": 5}), 422, "invalid_request")


# -- the protocol itself, against a bare python-xlib target that plays what real apps will not -------------


class Target:
    """An XDND target window at (x, y) on its own connection and thread: answers as `mode` says, records all.

    `accept` answers XdndStatus accept and, on XdndDrop, converts XdndSelection to text/uri-list then sends
    XdndFinished; `refuse` answers without accept; `fail` accepts, then reports the drop failed; `silent`
    never answers. With `proxy`, the messages go to a second, unmapped window named by XdndProxy."""

    def __init__(self, display_name: str, x: int, y: int, mode: str, proxy: bool = False) -> None:
        self.d = xdisplay.Display(display_name)
        self.mode = mode
        self.atom = {n: self.d.intern_atom(n) for n in (
            "XdndAware", "XdndProxy", "XdndEnter", "XdndPosition", "XdndStatus", "XdndDrop", "XdndFinished",
            "XdndLeave", "XdndSelection", "XdndActionCopy", "text/uri-list", "text/plain", "DROPPED")}
        root = self.d.screen().root
        self.window = root.create_window(x, y, 200, 150, 0, X.CopyFromParent, X.InputOutput, X.CopyFromParent,
                                         override_redirect=True, event_mask=X.PropertyChangeMask)
        self.receiver = self.window
        if proxy:
            self.receiver = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent, X.InputOnly, X.CopyFromParent)
            for w in (self.window, self.receiver):
                w.change_property(self.atom["XdndProxy"], Xatom.WINDOW, 32, [self.receiver.id])
        self.receiver.change_property(self.atom["XdndAware"], Xatom.ATOM, 32, [5])
        self.window.map()
        self.d.sync()
        self.messages: list[tuple[str, int, list[int]]] = []
        self.uri_list: bytes | None = None
        self.source = 0
        """The drag source's window, from the last message."""
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _send(self, source: int, message: str, data: list[int]) -> None:
        ev = event.ClientMessage(window=source, client_type=self.atom[message],
                                 data=(32, [self.window.id, *data, 0, 0, 0, 0][:5]))
        self.d.create_resource_object("window", source).send_event(ev)
        self.d.flush()

    def _run(self) -> None:
        names = {v: k for k, v in self.atom.items()}
        deadline = time.monotonic() + 30
        while not self._stop and time.monotonic() < deadline:
            if not self.d.pending_events():
                time.sleep(0.01)
                continue
            ev = self.d.next_event()
            if ev.type == X.SelectionNotify and ev.property:
                reply = self.window.get_property(ev.property, X.AnyPropertyType, 0, 1 << 20, delete=True)
                self.uri_list = bytes(reply.value)
                self._send(self.source, "XdndFinished", [1, self.atom["XdndActionCopy"]])
                continue
            if ev.type != X.ClientMessage:
                continue
            data = list(ev.data[1])
            self.messages.append((names.get(ev.client_type, "?"), ev.window.id, data))
            self.source = data[0]
            kind = names.get(ev.client_type)
            if self.mode == "silent":
                continue
            if kind == "XdndPosition":
                self._send(self.source, "XdndStatus", [1 if self.mode != "refuse" else 0, 0, 0,
                                                       self.atom["XdndActionCopy"]])
            elif kind == "XdndDrop" and self.mode == "fail":
                self._send(self.source, "XdndFinished", [0, 0])
            elif kind == "XdndDrop":
                self.window.convert_selection(self.atom["XdndSelection"], self.atom["text/uri-list"],
                                              self.atom["DROPPED"], data[2])
                self.d.flush()

    def close(self) -> None:
        self._stop = True
        self.thread.join(5)
        self.d.close()


@pytest.fixture
def target(display: str) -> Iterator[Any]:
    made: list[Target] = []

    def make(mode: str, proxy: bool = False) -> Target:
        made.append(Target(display, 1000, 600, mode, proxy))
        return made[-1]

    yield make
    for t in made:
        t.close()


@pytest.mark.parametrize("proxy", [False, True])
def test_the_messages_follow_xdnd_5(api: httpx.Client, target: Any, files: list[Path], proxy: bool) -> None:
    t = target("accept", proxy=proxy)
    dropped = api.post(DROP, json={"paths": [str(f) for f in files], "x": 1050, "y": 660})
    assert dropped.status_code == 200, dropped.text
    assert dropped.json()["windowId"] == str(t.window.id)
    kinds = [m[0] for m in t.messages]
    assert kinds == ["XdndEnter", "XdndPosition", "XdndDrop"], kinds
    assert all(window == t.window.id for _, window, _ in t.messages), "the window field is the target, proxied or not"
    enter, position, drop = (m[2] for m in t.messages)
    assert enter[1] >> 24 == 5 and not enter[1] & 1
    assert enter[2:4] == [t.atom["text/uri-list"], t.atom["text/plain"]]
    assert position[2] == (1050 << 16) | 660 and position[4] == t.atom["XdndActionCopy"]
    assert position[3] == drop[2] != 0, "the drop's timestamp is the position's, a real server time"
    assert t.uri_list == b"".join(f.as_uri().encode() + b"\r\n" for f in files)


def test_a_refusing_target_is_409_and_gets_a_leave(api: httpx.Client, target: Any, files: list[Path]) -> None:
    t = target("refuse")
    assert_problem(api.post(DROP, json={"paths": [str(files[0])], "x": 1050, "y": 660}), 409, "drop_refused")
    wait_for(lambda: t.messages[-1][0] == "XdndLeave", "the target to read the leave")  # on its own thread
    kinds = [m[0] for m in t.messages]
    assert kinds[0] == "XdndEnter" and set(kinds[1:-1]) == {"XdndPosition"}, kinds
    assert 20 <= len(kinds) - 2 <= 45, "asked again every 50 ms for 2 s, as a moving pointer would"


def test_a_failed_drop_is_409(api: httpx.Client, target: Any, files: list[Path]) -> None:
    target("fail")
    problem = assert_problem(api.post(DROP, json={"paths": [str(files[0])], "x": 1050, "y": 660}), 409,
                             "drop_refused")
    assert "failed" in str(problem["detail"])


def test_a_silent_target_times_out_and_holds_up_nothing(api: httpx.Client, target: Any, files: list[Path]) -> None:
    t = target("silent")
    answers: list[httpx.Response] = []
    drop = threading.Thread(target=lambda: answers.append(
        api.post(DROP, json={"paths": [str(files[0])], "x": 1050, "y": 660}, timeout=30)))
    started = time.monotonic()
    drop.start()
    wait_for(lambda: t.messages, "the drop to begin")
    with httpx.Client(base_url=str(api.base_url), headers=dict(api.headers)) as other:
        assert other.post("/v1/desktop/clipboard", json={"text": "meanwhile"}).status_code == 200
        assert other.get("/v1/desktop/clipboard").json()["text"] == "meanwhile"
    # well before the drop's 5 s timeout: the clipboard is not queued behind the hung target
    assert time.monotonic() - started < 4, "the clipboard answered while the drop waited"
    drop.join(30)
    problem = assert_problem(answers[0], 504, "timeout")
    assert "XdndPosition" in str(problem["detail"])
    assert 4.5 < time.monotonic() - started < 10
    wait_for(lambda: t.messages[-1][0] == "XdndLeave", "the target to read the leave")
