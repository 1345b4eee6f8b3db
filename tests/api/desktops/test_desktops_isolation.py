"""Many desktops at once, each driven by its own client: nothing crosses between them, and trouble in one
(a long drag, a crashed X server) does not hold up another. Checked with independent X clients on each
display (xdotool, xprop) and the API's own answers; no timing thresholds (bench/desktops.py measures)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from streaming.viewer import Viewer
from tests.conftest import ServerProcess, launch_server, wait_for
from tests.support.pids import child_host_pid

SMALL = {"width": 640, "height": 480}
COUNT = 8
WATCHED_FRAMES = 3


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = launch_server(tmp_path_factory.mktemp("isolation"), "--max-desktops", str(COUNT + 2))
    yield server
    server.stop()


def x_windows(display: str) -> set[str]:
    """Window names on `display`, read by an independent X client (xdotool)."""
    found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "."], capture_output=True, text=True,
                           env={**os.environ, "DISPLAY": display}, timeout=10)
    names = set()
    for wid in found.stdout.split():
        name = subprocess.run(["xdotool", "getwindowname", wid], capture_output=True, text=True,
                              env={**os.environ, "DISPLAY": display}, timeout=10).stdout.strip()
        names.add(name)
    return names


def drive(srv: ServerProcess, index: int) -> dict[str, Any]:
    """One agent's turn on its own desktop, with its own client; agent 0's desktop is recorded meanwhile and
    agent 1's is watched by a live-view viewer."""
    with srv.client() as api:
        created = api.post("/v1/desktops", json={**SMALL, "tags": {"agent": f"a{index}"}})
        assert created.status_code == 201, created.text
        desktop = created.json()
        base = f"/v1/desktops/{desktop['id']}"
        if index == 0:
            assert api.post(f"{base}/recording/start", json={"fps": 10}).status_code == 200
        if index == 1:
            assert api.post(f"{base}/stream/start").status_code == 200
            watched = watch(f"{srv.url}{base}/stream/signaling", srv.token)
        title = f"agent-{index}-term"
        launched = api.post(f"{base}/launch", json={"app": "xterm", "args": ["-T", title], "wait": True})
        assert launched.status_code == 200, launched.text
        assert api.post(f"{base}/mouse/click", json={"x": 200, "y": 200}).status_code == 200
        assert api.post(f"{base}/keyboard/type", json={"text": f"echo {index}\n"}).status_code == 200
        assert api.post(f"{base}/clipboard", json={"text": f"clip-{index}"}).status_code == 200
        shot = api.get(f"{base}/screenshot")
        assert shot.status_code == 200 and shot.headers["x-screen-width"] == "640"
        if index == 0:
            assert api.post(f"{base}/recording/stop").json()["status"] == "completed"
        if index == 1:
            deadline = time.monotonic() + 60
            while not watched.done() and time.monotonic() < deadline:  # something new for the viewer to see
                assert api.post(f"{base}/keyboard/type", json={"text": "."}).status_code == 200
                time.sleep(0.2)
            frames = watched.result(timeout=10)
            assert frames >= WATCHED_FRAMES, f"the viewer of agent 1's desktop got {frames} frames"
        return {**desktop, "title": title, "index": index}


def watch(url: str, token: str | None) -> concurrent.futures.Future[int]:
    """A live-view viewer on its own thread and event loop until it decoded WATCHED_FRAMES frames (or 30 s
    passed): the frames it decoded."""
    future: concurrent.futures.Future[int] = concurrent.futures.Future()

    async def session() -> int:
        viewer = Viewer(url, token, request_control=False)
        try:
            await viewer.connect()
            deadline = time.monotonic() + 30
            while viewer.received.frames < WATCHED_FRAMES and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return viewer.received.frames
        finally:
            await viewer.close()

    def run() -> None:
        try:
            future.set_result(asyncio.run(session()))
        except BaseException as exc:  # reported to the agent's thread through the future
            future.set_exception(exc)

    threading.Thread(target=run, name="watcher", daemon=True).start()
    return future


def test_eight_agents_at_once_never_cross(srv: ServerProcess, tmp_path: Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(COUNT) as pool:
        desktops = list(pool.map(lambda i: drive(srv, i), range(COUNT)))
    displays = {d["display"] for d in desktops}
    assert len(displays) == COUNT, "every desktop has a display of its own"
    with srv.client() as api:
        for desktop in desktops:
            base = f"/v1/desktops/{desktop['id']}"
            assert api.get(f"{base}/clipboard").json()["text"] == f"clip-{desktop['index']}"
            titles = {w["title"] for w in api.get(f"{base}/windows").json()["windows"]}
            assert titles == {desktop["title"]}, titles
            others = {d["title"] for d in desktops if d is not desktop}
            assert desktop["title"] in x_windows(desktop["display"])
            assert not others & x_windows(desktop["display"]), "another agent's window is on this display"
            recordings = api.get(f"{base}/recordings").json()["recordings"]
            assert len(recordings) == (desktop["index"] == 0), "only agent 0's desktop was recorded"
            homes = api.get(f"{base}/status").json()["stateDir"]
            assert desktop["id"] in homes
        states = {Path(api.get(f"/v1/desktops/{d['id']}/status").json()["stateDir"]) for d in desktops}
        assert len(states) == COUNT
        for desktop in desktops:
            assert api.delete(f"/v1/desktops/{desktop['id']}").status_code == 204


def test_a_recording_belongs_to_its_desktop(srv: ServerProcess) -> None:
    with srv.client() as api:
        one, two = (api.post("/v1/desktops", json=SMALL).json() for _ in range(2))
        try:
            rec = api.post(f"/v1/desktops/{one['id']}/recording/start", json={"fps": 5})
            assert rec.status_code == 200, rec.text
            api.post(f"/v1/desktops/{two['id']}/launch", json={"app": "xterm", "wait": True})
            stopped = api.post(f"/v1/desktops/{one['id']}/recording/stop").json()
            assert stopped["status"] == "completed"
            assert [r["id"] for r in api.get(f"/v1/desktops/{one['id']}/recordings").json()["recordings"]] == [
                rec.json()["id"]]
            assert api.get(f"/v1/desktops/{two['id']}/recordings").json()["recordings"] == []
            assert api.get("/v1/desktop/recordings").json()["recordings"] == []
            video = api.get(f"/v1/desktops/{one['id']}/recordings/{rec.json()['id']}/download")
            assert video.status_code == 200 and video.content[4:8] == b"ftyp"
            log = api.get(f"/v1/desktops/{two['id']}/actions/log").json()["entries"]
            assert all(e.get("source") != "stream" for e in log)
        finally:
            for desktop in (one, two):
                api.delete(f"/v1/desktops/{desktop['id']}")


def test_trouble_in_one_desktop_does_not_hold_up_another(srv: ServerProcess) -> None:
    with srv.client(timeout=60) as api:
        busy, calm = (api.post("/v1/desktops", json=SMALL).json() for _ in range(2))
        try:
            done = threading.Event()

            def long_drag() -> None:
                api.post(f"/v1/desktops/{busy['id']}/mouse/drag",
                         json={"startX": 10, "startY": 10, "endX": 600, "endY": 400, "durationMs": 4000})
                done.set()

            dragging = threading.Thread(target=long_drag)
            dragging.start()
            with srv.client() as other:
                for _ in range(5):
                    assert other.post(f"/v1/desktops/{calm['id']}/mouse/click", json={"x": 5, "y": 5}).is_success
                    assert other.get(f"/v1/desktops/{calm['id']}/screenshot").is_success
                    assert other.get(f"/v1/desktops/{busy['id']}/status").json()["state"] == "active"
                assert not done.is_set(), "the other desktop answered while the drag was still running"
            dragging.join(30)
            os.kill(child_host_pid(api.get(f"/v1/desktops/{busy['id']}/status").json(), "Xvfb"), signal.SIGKILL)
            with srv.client() as other:
                for _ in range(5):
                    assert other.post(f"/v1/desktops/{calm['id']}/mouse/click", json={"x": 6, "y": 6}).is_success
                    assert other.get(f"/v1/desktops/{calm['id']}/status").json()["restartCount"] == 0
            wait_for(lambda: api.get(f"/v1/desktops/{busy['id']}/status").json().get("restartCount") == 1
                     and api.post(f"/v1/desktops/{busy['id']}/mouse/click", json={"x": 1, "y": 1}).is_success,
                     "the crashed desktop to come back")
        finally:
            for desktop in (busy, calm):
                api.delete(f"/v1/desktops/{desktop['id']}")


def test_two_servers_on_one_machine_never_share_a_display_or_a_directory(tmp_path: Path) -> None:
    servers = [launch_server(tmp_path) for _ in range(2)]
    try:
        def create(server: ServerProcess) -> dict[str, Any]:
            with server.client() as api:
                answer = api.post("/v1/desktops", json=SMALL)
                assert answer.status_code == 201, answer.text
                return {**answer.json(), "stateDir": api.get(f"/v1/desktops/{answer.json()['id']}/status").json()[
                    "stateDir"]}

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            made = list(pool.map(create, [s for s in servers for _ in range(3)]))
        assert len({d["display"] for d in made}) == 6
        assert len({d["stateDir"] for d in made}) == 6
    finally:
        for server in servers:
            server.stop()


def test_a_closed_client_connection_does_not_leave_a_desktop_half_made(srv: ServerProcess) -> None:
    """Creating is answered only once the desktop is active; a client that gives up still finds it listed."""
    with pytest.raises(httpx.TimeoutException), httpx.Client(base_url=srv.url, timeout=0.001,
                                                              headers={"Authorization": f"Bearer {srv.token}"}) as c:
        c.post("/v1/desktops", json={**SMALL, "tags": {"gave": "up"}})
    with srv.client() as api:
        made = wait_for(lambda: api.get("/v1/desktops", params={"tag": "gave=up"}).json()["desktops"],
                        "the desktop whose creation the client gave up on")
        assert all(d["state"] == "active" for d in made)
        for desktop in made:
            api.delete(f"/v1/desktops/{desktop['id']}")
