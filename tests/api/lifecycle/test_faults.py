"""Fault injection against a real server: children killed under a live viewer, a dependency removed while
the desktop runs, and an X client that hangs holding the pointer and keyboard grabbed.

Killing Xvfb or openbox alone is in test_desktop_lifecycle.py; faults during recording (SIGKILL of
the recorder or the server, a full disk) are in test_recording.py. Displays 410-419 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from Xlib import X
from Xlib import display as xdisplay

from api.server.process_scope import server_process_env
from desktop.input.mouse import pointer_grabbed
from desktop.lifecycle.options import StartOptions
from desktop.lifecycle.runtime import Desktop
from streaming.viewer import Viewer
from tests.api.lifecycle.test_desktop_lifecycle import x_answers
from tests.conftest import ServerProcess, assert_problem, launch_server, managed_probe, poll, run, wait_for
from tests.support.pids import child_host_pid, host_pid, pid_alive, process_state, restarted_child
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 410, "width": 640, "height": 480, "streamVideoCodec": "h264",
           "webrtcPortRange": "59470-59479"}
PROMPT_S = 10.0
"""Every request during a fault must answer within this (a bound against hangs, not a speed target)."""
BLUE = (0x33, 0x66, 0xCC)  # tests/support/xprobe.py's window colour
INSTALL_COMMAND = "sandbox-desktop install desktop --yes"

# Grabs the pointer and the keyboard on the root window (argv[1]: "async", or "sync", which also freezes
# them), writes both grab statuses to argv[2], then idles; the test SIGSTOPs it while it holds them.
GRABBER = r"""
import sys, time
from Xlib import X, display
d = display.Display()
root = d.screen().root
mode = X.GrabModeSync if sys.argv[1] == "sync" else X.GrabModeAsync
mask = X.ButtonPressMask | X.ButtonReleaseMask | X.PointerMotionMask
pointer = root.grab_pointer(False, mask, mode, mode, X.NONE, X.NONE, X.CurrentTime)
keyboard = root.grab_keyboard(False, mode, mode, X.CurrentTime)
with open(sys.argv[2], "w") as out:
    out.write(f"{pointer} {keyboard}")
for _ in range(3600):
    time.sleep(1)
"""


def status(api: httpx.Client) -> dict[str, Any]:
    response = api.get("/v1/desktop/status", timeout=PROMPT_S)
    assert response.status_code == 200, response.text
    return dict(response.json())


def restarted(api: httpx.Client, name: str, old_host_pid: int) -> dict[str, Any] | None:
    """The status once the desktop is active again with a new, running `name`; else None."""
    body = status(api)
    return body if restarted_child(body, name, old_host_pid) else None


def pixel(viewer: Viewer, x: int, y: int) -> tuple[int, int, int] | None:
    """The colour at (x, y) of the viewer's latest decoded frame."""
    frame = viewer.received.last_frame
    return tuple(frame.to_image().getpixel((x, y))) if frame is not None else None


def is_blue(colour: tuple[int, int, int] | None) -> bool:
    return colour is not None and all(abs(a - b) < 40 for a, b in zip(colour, BLUE, strict=True))


async def async_get(api: httpx.Client, path: str) -> httpx.Response:
    """A GET off the event loop (the viewer's aiortc stack runs on it)."""
    return await asyncio.to_thread(api.get, path, timeout=PROMPT_S)


# -- (a) children killed under a live viewer -------------------------------------------------------

def test_viewer_keeps_streaming_the_new_display_after_xvfb_is_killed(srv: ServerProcess, api: httpx.Client,
                                                                     display: str, streaming: None,
                                                                     tmp_path: Path) -> None:
    old = Probe(display, tmp_path / "old.jsonl", "200x150+40+40")  # override-redirect: exactly there
    new: Probe | None = None

    async def scenario() -> None:
        nonlocal new
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            await poll(lambda: is_blue(pixel(viewer, 140, 115)), "the first window in the video")
            xvfb = child_host_pid((await async_get(api, "/v1/desktop/status")).json(), "Xvfb")
            os.kill(xvfb, signal.SIGKILL)
            # The supervisor restarts Xvfb and openbox on the same display by itself...
            await poll(lambda: restarted(api, "Xvfb", xvfb), "the desktop to come back", timeout=20)
            # ...and the video shows the new display (the old window died with its X server)...
            await poll(lambda: not is_blue(pixel(viewer, 140, 115)), "the new, empty display in the video",
                       timeout=15)
            new = await asyncio.to_thread(Probe, display, tmp_path / "new.jsonl", "200x150+400+300")
            await poll(lambda: is_blue(pixel(viewer, 500, 375)), "a window of the new display in the video",
                       timeout=15)
            # ...and the viewer's input reaches it: it kept control through the restart.
            viewer.move(450, 330)
            viewer.button(1, True)
            viewer.button(1, False)
            probe = new
            await poll(lambda: probe.events("ButtonPress"), "the viewer's click on the new display")
            assert not viewer.disconnected.is_set(), viewer.received.events[-1:]
            stream = (await async_get(api, "/v1/desktop/stream/status")).json()
            assert stream["active"] and stream["viewers"] == 1 and stream["controller"] == viewer.session_id
        finally:
            await viewer.close()
    try:
        run(scenario)
    finally:
        old.close()
        if new is not None:
            new.close()


def test_viewer_keeps_streaming_and_driving_after_openbox_is_killed(srv: ServerProcess, api: httpx.Client,
                                                                    display: str, streaming: None,
                                                                    tmp_path: Path) -> None:
    with managed_probe(api, display, tmp_path / "events.jsonl", "fault-wm", "300x200+100+100") as (probe, _):
        async def scenario() -> None:
            viewer = Viewer(srv.url, srv.token)
            try:
                await viewer.connect()
                wm = child_host_pid((await async_get(api, "/v1/desktop/status")).json(), "openbox")
                os.kill(wm, signal.SIGKILL)
                await poll(lambda: restarted(api, "openbox", wm), "openbox to come back", timeout=20)
                # The video never stopped: the keep-alive alone sends a picture a second.
                await viewer.wait_frames(viewer.received.frames + 3, timeout=15)
                # The window survived the window manager; the new openbox manages it, and input reaches it.
                rect = await poll(lambda: next((w for w in api.get("/v1/desktop/windows").json()["windows"]
                                                if w["title"] == "fault-wm"), None), "the window re-managed")
                viewer.move(rect["x"] + 30, rect["y"] + 30)
                viewer.button(1, True)
                viewer.button(1, False)
                await poll(lambda: probe.events("ButtonPress"), "the viewer's click after the restart")
                assert not viewer.disconnected.is_set(), viewer.received.events[-1:]
            finally:
                await viewer.close()
        run(scenario)


# -- (b) a dependency removed while the desktop runs ---------------------------------------------

def test_removed_xvfb_is_a_503_with_the_install_command_and_start_recovers(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("Xvfb", "xkbcomp", "openbox", "xdg-open"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or "/bin/false")
    server = launch_server(tmp_path, env={"PATH": str(bin_dir)})
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={
                "displayNum": 411, "width": 640, "height": 480, "streamVideoCodec": "h264",
                "webrtcPortRange": "59480-59489"})
            assert started.json()["state"] == "active", started.text
            assert api.post("/v1/desktop/stream/start").json()["active"]
            recording = api.post("/v1/desktop/recording/start", json={}).json()
            display = started.json()["display"]

            async def scenario() -> None:
                viewer = Viewer(server.url, server.token)
                try:
                    await viewer.connect()
                    (bin_dir / "Xvfb").unlink()
                    os.kill(child_host_pid(started.json(), "Xvfb"), signal.SIGKILL)
                    await asyncio.to_thread(_install_required_without_pretending, api)
                    # The viewer is told why, instead of watching the last picture of a dead display forever.
                    await asyncio.wait_for(viewer.disconnected.wait(), 20)
                    message = next(p["message"] for e, p in viewer.received.events if e == "system/disconnect")
                    assert "Xvfb" in message, message
                    await poll(lambda: viewer._pc is not None and viewer._pc.connectionState in ("closed", "failed"),
                               "the peer connection to close", timeout=20)
                finally:
                    await viewer.close()
            run(scenario)
            assert api.get("/v1/desktop/stream/status").json() == {"active": False}
            # The recording ends where the screen did, closed normally, instead of running on a dead display.
            ended = wait_for(lambda: (r := api.get(f"/v1/desktop/recordings/{recording['id']}").json())["status"]
                             != "recording" and r, "the recording to end with the desktop")
            assert ended["status"] == "completed", ended
            for method, path, body in (("POST", "/v1/desktop/start", {"displayNum": 411}),
                                       ("GET", "/v1/desktop/screenshot", None),
                                       ("GET", "/v1/desktop/windows", None),
                                       ("GET", "/v1/desktop/display/info", None),
                                       ("POST", "/v1/desktop/mouse/click", {"x": 10, "y": 10}),
                                       ("POST", "/v1/desktop/keyboard/type", {"text": "x"})):
                problem = assert_problem(api.request(method, path, json=body, timeout=PROMPT_S), 503,
                                         "desktop_dependencies_missing")
                assert problem["missingDependencies"] == ["Xvfb"], (path, problem)
                assert problem["installCommand"] == INSTALL_COMMAND
                assert INSTALL_COMMAND in str(problem["detail"])
            # Put it back: the failure says what went wrong, and a start brings the desktop back.
            (bin_dir / "Xvfb").symlink_to(shutil.which("Xvfb") or "/bin/false")
            failed = wait_for(lambda: (s := status(api))["state"] == "failed" and s, "state failed")
            assert failed["lastError"]["code"] == "desktop_runtime_failed"
            assert "Xvfb" in failed["lastError"]["message"] and "not found on PATH" in failed["lastError"]["message"]
            back = api.post("/v1/desktop/start", json={"displayNum": 411}, timeout=30)
            assert back.status_code == 200 and back.json()["state"] == "active", back.text
            assert back.json()["display"] == display and x_answers(display)
            assert pid_alive(child_host_pid(back.json(), "Xvfb"))
            shot = api.get("/v1/desktop/screenshot", timeout=PROMPT_S)
            assert shot.status_code == 200 and shot.content.startswith(b"\x89PNG")
    finally:
        server.stop()


def _install_required_without_pretending(api: httpx.Client) -> None:
    """Status reaches `install_required`, and once Xvfb is down it never claims `active` on the way."""
    seen: list[str] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        body = status(api)
        if seen or body["state"] != "active":  # from the moment the supervisor noticed
            seen.append(body["state"])
        if body["state"] == "install_required":
            break
        time.sleep(0.02)
    assert seen and seen[-1] == "install_required", seen
    assert "active" not in seen, f"status said active while Xvfb could not be restarted: {seen}"
    assert body["missingDependencies"] == ["Xvfb"]
    assert body["installCommand"] == INSTALL_COMMAND
    assert body["lastError"]["code"] == "desktop_dependencies_missing"
    assert "Xvfb" in body["lastError"]["message"] and INSTALL_COMMAND in body["lastError"]["message"]


# -- (c) a hung X client holding the pointer and keyboard grabbed ------------------------------

@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_hung_client_holding_grabs_hangs_nothing_and_can_be_killed(api: httpx.Client, display: str,
                                                                     tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "grabbed"
    with contextlib.closing(xdisplay.Display(display)) as x, \
            managed_probe(api, display, tmp_path / "events.jsonl", f"grab-{mode}", "300x200+120+120") as (probe, rect):
        inside = {"x": rect["x"] + 40, "y": rect["y"] + 40}
        assert api.post("/v1/desktop/mouse/click", json=inside).status_code == 200
        wait_for(lambda: probe.events("ButtonPress"), "a click before the grab")
        assert not pointer_grabbed(x)
        started = api.post("/v1/processes", json={"command": sys.executable,
                                                  "args": ["-c", GRABBER, mode, str(marker)]})
        assert started.status_code == 200, started.text
        grabber = started.json()
        try:
            wait_for(marker.exists, "the grabs")
            assert marker.read_text() == "0 0"  # GrabSuccess, twice
            os.kill(host_pid(grabber), signal.SIGSTOP)
            wait_for(lambda: process_state(host_pid(grabber)) == "T", "the grabber to stop")
            presses = len(probe.events("ButtonPress"))
            # Everything answers (no hang behind the grab)...
            assert status(api)["state"] == "active"
            shot = api.get("/v1/desktop/screenshot", timeout=PROMPT_S)
            assert shot.status_code == 200 and shot.content.startswith(b"\x89PNG")
            windows = api.get("/v1/desktop/windows", timeout=PROMPT_S).json()["windows"]
            assert any(w["title"] == f"grab-{mode}" for w in windows)
            for path, body in (("mouse/click", inside), ("mouse/move", {"x": 20, "y": 20}),
                               ("keyboard/type", {"text": "lost"}), ("keyboard/press", {"key": "Return"})):
                response = api.post(f"/v1/desktop/{path}", json=body, timeout=PROMPT_S)
                assert response.status_code == 200, (path, response.text)
            # ...but the input went to the grabber, not to the window under the pointer; the grab is reported.
            time.sleep(0.3)
            assert len(probe.events("ButtonPress")) == presses
            assert pointer_grabbed(x)
            assert status(api)["pointerGrabbed"] is True
            # The process API ends the hung client, which releases its grabs.
            killed = api.post(f"/v1/processes/{grabber['id']}/kill", params={"waitMs": 5000}, timeout=PROMPT_S)
            assert killed.json()["status"] == "exited" and killed.json()["exitSignal"] == 9, killed.text
        finally:
            if pid_alive(host_pid(grabber)):
                os.kill(host_pid(grabber), signal.SIGKILL)
        wait_for(lambda: not pointer_grabbed(x), "the grab to be released")
        # That probe grabbed and let go again; a round trip makes sure the X server has seen it let go before
        # the server's own probe asks (the two connections' requests are not ordered otherwise).
        x.sync()
        assert "pointerGrabbed" not in status(api)
        before = len(probe.events("ButtonPress"))
        assert api.post("/v1/desktop/mouse/click", json=inside, timeout=PROMPT_S).status_code == 200
        wait_for(lambda: len(probe.events("ButtonPress")) > before, "a click reaching the window again")
        assert api.post("/v1/desktop/keyboard/type", json={"text": "ok"}, timeout=PROMPT_S).status_code == 200
        wait_for(lambda: [e["keysym"] for e in probe.events("KeyPress")][-2:] == [ord("o"), ord("k")],
                 "keys reaching the window again")


def test_the_grab_probe_is_invisible_to_the_window_under_the_pointer(api: httpx.Client, display: str) -> None:
    """Status probes for a grab with one of its own: the window under the pointer must see no crossing."""
    with contextlib.closing(xdisplay.Display(display)) as x:
        screen = x.screen()
        window = screen.root.create_window(
            450, 50, 150, 100, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
            background_pixel=screen.white_pixel, override_redirect=True,
            event_mask=X.EnterWindowMask | X.LeaveWindowMask | X.StructureNotifyMask)
        window.map()
        x.sync()
        assert api.post("/v1/desktop/mouse/move", json={"x": 500, "y": 100}).status_code == 200
        wait_for(lambda: _events(x, X.EnterNotify), "the pointer to enter the window")
        for _ in range(5):
            status(api)  # each one probes
            assert not pointer_grabbed(x)
        time.sleep(0.2)
        assert _events(x, X.EnterNotify, X.LeaveNotify) == []


def _events(x: xdisplay.Display, *types: int) -> list[Any]:
    """The queued events of these types (the rest are dropped)."""
    x.sync()
    found = []
    while x.pending_events():
        event = x.next_event()
        if event.type in types:
            found.append(event)
    return found


def test_status_snapshot_reports_a_pointer_grab(tmp_path: Path) -> None:
    """The desktop's own status knows when another client holds the pointer (in process: the runtime)."""
    marker = tmp_path / "grabbed"

    async def scenario() -> None:
        desktop = Desktop(state_dir=tmp_path / "state")
        try:
            await desktop.start(StartOptions(display_num=412, width=320, height=240))
            assert not (await desktop.snapshot()).pointer_grabbed
            grabber = await asyncio.create_subprocess_exec(
                sys.executable, "-c", GRABBER, "async", str(marker), env=server_process_env(desktop))
            try:
                await poll(marker.exists, "the grabs")
                snapshot = await desktop.snapshot()
                assert snapshot.state == "active" and snapshot.pointer_grabbed
            finally:
                grabber.kill()
                await grabber.wait()
            for _ in range(200):  # the server releases the grab once it sees the connection close
                if not (await desktop.snapshot()).pointer_grabbed:
                    break
                await asyncio.sleep(0.05)
            assert not (await desktop.snapshot()).pointer_grabbed
        finally:
            await desktop.shutdown()
    run(scenario)
