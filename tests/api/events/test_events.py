"""`GET /v1/desktop/events`: X events from independent X clients (python-xlib here, xclip, xterm) arrive as
SSE with the right ids, titles and geometry; screen, clipboard, process and state events too."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from Xlib import X
from Xlib.display import Display

from tests.conftest import ServerProcess, assert_problem

DESKTOP = {"displayNum": 352, "width": 800, "height": 600}
Event = dict[str, Any]


class EventReader:
    """Reads `/v1/desktop/events` in a thread; `wait` returns the first event (after `after`) matching."""

    def __init__(self, srv: ServerProcess, path: str = "/v1/desktop/events", **params: str) -> None:
        self.events: list[Event] = []
        self.status: int | None = None
        self._changed = threading.Condition()
        self._client = srv.client(timeout=httpx.Timeout(30, read=60))
        self._thread = threading.Thread(target=self._read, args=(path, params), daemon=True)
        self._thread.start()
        with self._changed:
            assert self._changed.wait_for(lambda: self.status is not None, 10), "the stream never opened"

    def _read(self, path: str, params: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", path, params=params) as response:
                with self._changed:
                    self.status = response.status_code
                    self._changed.notify_all()
                data: list[str] = []
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:])
                    elif not line and data:
                        with self._changed:
                            self.events.append(json.loads("".join(data)))
                            self._changed.notify_all()
                        data = []
        except httpx.HTTPError:
            pass

    def wait(self, predicate: Callable[[Event], bool], what: str, timeout: float = 10) -> Event:
        with self._changed:
            found = self._changed.wait_for(lambda: next((e for e in self.events if predicate(e)), None), timeout)
        assert found, f"no {what} event among {[e['type'] for e in self.events]}"
        return found

    def close(self) -> None:
        self._client.close()


class XWindow:
    """A window of an X client of the test's own (not the server's)."""

    def __init__(self, display: str, title: str, geometry: tuple[int, int, int, int] = (120, 100, 300, 200),
                 override_redirect: bool = False, color: int = 0x3366CC) -> None:
        self.d = Display(display)
        x, y, w, h = geometry
        screen = self.d.screen()
        self.window = screen.root.create_window(x, y, w, h, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
                                                background_pixel=color, override_redirect=override_redirect)
        self.title(title)
        self.window.map()
        self.d.sync()

    @property
    def id(self) -> str:
        return str(self.window.id)

    def title(self, title: str) -> None:
        self.window.set_wm_name(title)
        self.window.change_property(self.d.get_atom("_NET_WM_NAME"), self.d.get_atom("UTF8_STRING"), 8,
                                    title.encode())
        self.d.sync()

    def close(self) -> None:
        self.window.destroy()
        self.d.sync()
        self.d.close()


@pytest.fixture
def reader(srv: ServerProcess) -> Iterator[EventReader]:
    stream = EventReader(srv)
    yield stream
    stream.close()


def of(kind: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e["type"] == kind and all(e.get(k) == v for k, v in fields.items())


def test_window_lifecycle_events(api: httpx.Client, display: str, reader: EventReader) -> None:
    window = XWindow(display, "events-one")
    try:
        created = reader.wait(of("window.created", windowId=window.id), "window.created")
        assert created["title"] == "events-one" and created["width"] == 300 and created["height"] == 200
        assert {"seq", "t", "at"} <= created.keys() and created["t"] > 0
        listed = {w["id"]: w for w in api.get("/v1/desktop/windows").json()["windows"]}
        assert (listed[window.id]["x"], listed[window.id]["y"]) == (created["x"], created["y"])

        window.title("events-renamed")
        renamed = reader.wait(of("window.title_changed", windowId=window.id), "window.title_changed")
        assert (renamed["title"], renamed["previousTitle"]) == ("events-renamed", "events-one")

        moved_to = api.post(f"/v1/desktop/windows/{window.id}/move", json={"x": 40, "y": 50}).json()
        moved = reader.wait(of("window.moved", windowId=window.id, x=moved_to["x"], y=moved_to["y"]), "window.moved")
        assert moved["width"] == 300

        api.post(f"/v1/desktop/windows/{window.id}/focus").raise_for_status()
        reader.wait(of("window.focused", windowId=window.id), "window.focused")
    finally:
        window.close()
    closed = reader.wait(of("window.closed", windowId=window.id), "window.closed")
    assert closed["title"] == "events-renamed" and closed["seq"] > created["seq"]


def test_screen_settled_covers_what_was_drawn(srv: ServerProcess, display: str) -> None:
    stream = EventReader(srv, types="screen.")
    try:
        time.sleep(0.3)  # the watcher creates its XDamage object when the first screen subscriber arrives
        start = len(stream.events)
        square = XWindow(display, "drawn", (500, 300, 80, 60), override_redirect=True, color=0xCC3333)
        try:
            def covers(e: Event) -> bool:
                return (e["type"] == "screen.settled" and stream.events.index(e) >= start
                        and e["x"] <= 500 and e["y"] <= 300 and e["x"] + e["width"] >= 580
                        and e["y"] + e["height"] >= 360)
            settled = stream.wait(covers, "screen.settled covering the square")
            assert settled["quietMs"] > 0
            assert any(e["type"] == "screen.changed" for e in stream.events[start:])
        finally:
            square.close()
    finally:
        stream.close()


def test_clipboard_changed_when_another_client_owns_it(display: str, reader: EventReader) -> None:
    subprocess.run(["xclip", "-selection", "clipboard", "-loops", "1"], input=b"from xclip", timeout=10,
                   env={"DISPLAY": display, "PATH": "/usr/bin:/bin", "XAUTHORITY": os.environ["XAUTHORITY"]},
                   stdout=subprocess.DEVNULL)
    changed = reader.wait(of("clipboard.changed"), "clipboard.changed")
    assert changed["selection"] == "clipboard" and changed["owner"]


def test_process_exited(api: httpx.Client, reader: EventReader) -> None:
    launched = api.post("/v1/desktop/launch", json={"app": "sh", "args": ["-c", "sleep 0.4; exit 3"]}).json()
    exited = reader.wait(of("process.exited", processId=launched["processId"]), "process.exited")
    assert exited["exitCode"] == 3 and exited["command"].endswith("sh") and exited["pid"] == launched["pid"]


def test_types_filter_replay_and_bad_types(srv: ServerProcess, api: httpx.Client, display: str) -> None:
    first = EventReader(srv)
    window = XWindow(display, "replayed")
    try:
        created = first.wait(of("window.created", windowId=window.id), "window.created")
    finally:
        window.close()
        first.close()
    replay = EventReader(srv, since=str(created["seq"] - 1), types="window.created,window.closed")
    try:
        assert replay.wait(lambda e: True, "replayed")["seq"] == created["seq"]
        replay.wait(of("window.closed", windowId=window.id), "window.closed")
        assert {e["type"] for e in replay.events} <= {"window.created", "window.closed"}
    finally:
        replay.close()
    bad = api.get("/v1/desktop/events", params={"types": "window.exploded"})
    assert assert_problem(bad, 400)["errors"][0]["field"] == "types"  # type: ignore[index]


def test_state_changes_on_stop_and_start(srv: ServerProcess, api: httpx.Client) -> None:
    stream = EventReader(srv, types="desktop.state_changed")
    try:
        api.post("/v1/desktop/stop").raise_for_status()
        stream.wait(of("desktop.state_changed", previous="stopping", state="inactive"), "inactive")
        assert api.post("/v1/desktop/start", json=DESKTOP).json()["state"] == "active"
        stream.wait(of("desktop.state_changed", previous="starting", state="active"), "active")
        assert [e["state"] for e in stream.events] == ["stopping", "inactive", "starting", "active"]
    finally:
        stream.close()


def test_the_same_events_over_a_websocket(srv: ServerProcess, api: httpx.Client) -> None:
    import websockets.sync.client as ws_client

    url = srv.url.replace("http", "ws", 1) + "/v1/desktop/events/ws?types=clipboard.changed"
    with ws_client.connect(url, additional_headers={"Authorization": f"Bearer {srv.token}"}) as socket:
        api.post("/v1/desktop/clipboard", json={"text": "over the socket"}).raise_for_status()
        message = json.loads(socket.recv(timeout=10))
        assert message["type"] == "clipboard.changed" and message["seq"] > 0 and message["t"] > 0
    with pytest.raises(Exception, match="400"):
        ws_client.connect(srv.url.replace("http", "ws", 1) + "/v1/desktop/events/ws?types=window.exploded",
                          additional_headers={"Authorization": f"Bearer {srv.token}"})
