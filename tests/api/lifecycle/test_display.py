"""`POST /v1/desktop/display` against the real server: the screen changes size at runtime and everything follows.

Effects are checked independently of the server's own answer: windows and processes through X and /proc,
screenshots by their decoded size, the live view by a real aiortc viewer's decoded frames, the recording by
PyAV decoding the MP4, the event by the events stream, and the X server's size by an X client of the test's own.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import httpx
import pytest
from PIL import Image
from Xlib import X
from Xlib.display import Display

from desktop.x11.randr import cvt_modeline, millimetres
from streaming.viewer import Viewer
from tests.api.events.test_events import EventReader
from tests.conftest import ServerProcess, assert_problem, run, wait_for
from tests.support.pids import child_host_pid, host_pid, pid_alive, restarted_child

PORTS = (59540, 59549)
SIZE = (1024, 768)
DESKTOP = {"displayNum": 296, "width": SIZE[0], "height": SIZE[1], "streamVideoCodec": "vp8",
           "webrtcPortRange": f"{PORTS[0]}-{PORTS[1]}"}


def resize(api: httpx.Client, width: int, height: int, **extra: Any) -> dict[str, Any]:
    response = api.post("/v1/desktop/display", json={"width": width, "height": height, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(autouse=True)
def original_size(api: httpx.Client) -> Iterator[None]:
    """Every test starts and ends at the module's size."""
    resize(api, *SIZE, dpi=96)
    yield
    resize(api, *SIZE, dpi=96)


def x_screen(display: str) -> tuple[int, int, int, int]:
    """The root window's size and the screen's physical size (mm), asked of the X server by a client of our own."""
    conn = Display(display)
    try:
        geometry = conn.screen().root.get_geometry()
        info = conn.screen().root.xrandr_get_screen_info()
        size = info.sizes[info.size_id] if info.sizes else None
        mm = (size.width_in_millimeters, size.height_in_millimeters) if size else (0, 0)
        return int(geometry.width), int(geometry.height), int(mm[0]), int(mm[1])
    finally:
        conn.close()


def resource_dpi(display: str) -> str | None:
    conn = Display(display)
    try:
        value = conn.screen().root.get_full_property(conn.intern_atom("RESOURCE_MANAGER"), X.AnyPropertyType)
        text = value.value.decode() if value is not None else ""
        return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Xft.dpi:")),
                    None)
    finally:
        conn.close()


def screenshot_size(api: httpx.Client) -> tuple[int, int]:
    shot = api.get("/v1/desktop/screenshot")
    assert shot.status_code == 200, shot.text
    image = Image.open(io.BytesIO(shot.content))
    assert (int(shot.headers["x-screen-width"]), int(shot.headers["x-screen-height"])) == image.size
    return image.size


class Cover:
    """An override-redirect window of the test's own covering the screen in one colour (RGB)."""

    def __init__(self, display: str, width: int, height: int, rgb: int) -> None:
        self.d = Display(display)
        screen = self.d.screen()
        self.window = screen.root.create_window(0, 0, width, height, 0, screen.root_depth, X.InputOutput,
                                                X.CopyFromParent, background_pixel=rgb, override_redirect=True)
        self.window.map()
        self.d.sync()

    def close(self) -> None:
        self.window.destroy()
        self.d.sync()
        self.d.close()


# -- the mode itself ------------------------------------------------------------------------------------

def test_cvt_modeline_matches_the_x_servers_cvt() -> None:
    # `cvt 1920 1080` and `cvt 1280 800` of xserver 21.1 print these timings.
    line = cvt_modeline(1920, 1080)
    assert (line.dot_clock_khz, line.h_sync_start, line.h_sync_end, line.h_total) == (173_000, 2048, 2248, 2576)
    assert (line.v_sync_start, line.v_sync_end, line.v_total) == (1083, 1088, 1120)
    line = cvt_modeline(1280, 800)
    assert (line.dot_clock_khz, line.h_sync_start, line.h_sync_end, line.h_total) == (83_500, 1352, 1480, 1680)
    assert (line.v_sync_start, line.v_sync_end, line.v_total) == (803, 809, 831)
    # `cvt 1366 768` computes on 1368 (whole 8-pixel cells): 85.25 1368 1440 1576 1784 768 771 781 798; the mode
    # keeps the asked width.
    odd = cvt_modeline(1366, 768)
    assert (odd.width, odd.height, odd.dot_clock_khz) == (1366, 768, 85_250)
    assert (odd.h_sync_start, odd.h_sync_end, odd.h_total) == (1440, 1576, 1784)
    assert (odd.v_sync_start, odd.v_sync_end, odd.v_total) == (771, 781, 798)
    assert millimetres(1920, 96) == 508 and millimetres(1920, 192) == 254


# -- apps, windows, screenshots, status -------------------------------------------------------------------

def test_a_resize_keeps_an_xterm_and_everything_reports_the_new_size(api: httpx.Client, display: str) -> None:
    launched = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "resize-term"], "wait": True})
    assert launched.status_code == 200, launched.text
    term = launched.json()
    try:
        for width, height in ((1280, 720), (800, 600), (1366, 768), (2560, 1600)):
            changed = resize(api, width, height)
            assert (changed["width"], changed["height"], changed["dpi"]) == (width, height, 96)
            assert (changed["maxWidth"], changed["maxHeight"]) == (2560, 1600) and changed["elapsedMs"] > 0
            assert x_screen(display)[:2] == (width, height)  # the X server has it when the call returns
            assert screenshot_size(api) == (width, height)
            info = api.get("/v1/desktop/display/info").json()["resolution"]
            assert (info["width"], info["height"], info["maxWidth"]) == (width, height, 2560)
            assert api.get("/v1/desktop/status").json()["resolution"]["width"] == width
            # The same window of the same process, still there (openbox keeps windows across RandR changes).
            windows = api.get("/v1/desktop/windows").json()["windows"]
            window = next(w for w in windows if w["id"] == term["windowId"])
            assert window["pid"] == term["pid"] and window["title"] == "resize-term"
            process = api.get(f"/v1/processes/{term['processId']}").json()  # its hostPid: launch answers lack it
            assert process["status"] == "running" and pid_alive(host_pid(process))
            # Pointer input is checked against the new size.
            assert api.post("/v1/desktop/mouse/move", json={"x": width - 1, "y": height - 1}).status_code == 200
            refused = api.post("/v1/desktop/mouse/move", json={"x": width, "y": 0})
            assert refused.status_code == 400, refused.text
    finally:
        api.post(f"/v1/processes/{term['processId']}/kill")


def test_a_maximised_window_follows_the_new_size(api: httpx.Client) -> None:
    term = api.post("/v1/desktop/launch", json={"app": "xterm", "args": ["-T", "max-term"], "wait": True}).json()
    try:
        assert api.post(f"/v1/desktop/windows/{term['windowId']}/maximize").status_code == 200

        def frame_width(width: int) -> bool:
            windows = api.get("/v1/desktop/windows", params={"frame": "true"}).json()["windows"]
            frame = next(w for w in windows if w["id"] == term["windowId"])["frame"]
            return bool(frame["width"] == width)

        wait_for(lambda: frame_width(SIZE[0]), "the maximised frame as wide as the screen")
        resize(api, 1600, 1000)
        wait_for(lambda: frame_width(1600), "the maximised frame following the wider screen")
        resize(api, 800, 600)
        wait_for(lambda: frame_width(800), "the maximised frame following the narrower screen")
    finally:
        api.post(f"/v1/processes/{term['processId']}/kill")


def test_dpi_sets_the_physical_size_and_xft_dpi(api: httpx.Client, display: str) -> None:
    changed = resize(api, 1920, 1080, dpi=192)
    assert changed["dpi"] == 192
    assert x_screen(display) == (1920, 1080, millimetres(1920, 192), millimetres(1080, 192))
    assert resource_dpi(display) == "192"
    assert api.get("/v1/desktop/display/info").json()["resolution"]["dpi"] == 192
    # Without dpi the dpi stays.
    assert resize(api, 1280, 720)["dpi"] == 192
    assert x_screen(display)[2] == millimetres(1280, 192)


def test_display_changed_is_published(srv: ServerProcess, api: httpx.Client) -> None:
    reader = EventReader(srv, types="display.changed")
    try:
        resize(api, 1152, 864, dpi=120)
        event = reader.wait(lambda e: e["type"] == "display.changed" and e["width"] == 1152, "display.changed")
        assert (event["height"], event["dpi"]) == (864, 120)
    finally:
        reader.close()


# -- mistakes -----------------------------------------------------------------------------------------

def test_mistakes_are_4xx_naming_the_field(api: httpx.Client) -> None:
    def field_of(response: httpx.Response, status: int) -> list[str]:
        problem = assert_problem(response, status)
        return [e["field"] for e in problem["errors"]]  # type: ignore[attr-defined]

    too_wide = api.post("/v1/desktop/display", json={"width": 2562, "height": 720})
    assert field_of(too_wide, 400) == ["width"]
    assert too_wide.json()["code"] == "desktop_invalid_action" and too_wide.json()["maxWidth"] == 2560
    assert field_of(api.post("/v1/desktop/display", json={"width": 3000, "height": 2000}), 400) == ["width", "height"]
    assert field_of(api.post("/v1/desktop/display", json={"width": 63, "height": 600}), 400) == ["width"]
    assert field_of(api.post("/v1/desktop/display", json={"width": 800, "height": 9000}), 400) == ["height"]
    assert field_of(api.post("/v1/desktop/display", json={"width": 800, "height": 600, "dpi": 0}), 400) == ["dpi"]
    assert field_of(api.post("/v1/desktop/display", json={"height": 600}), 422) == ["width"]
    assert field_of(api.post("/v1/desktop/display", json={"width": "wide", "height": 600}), 422) == ["width"]
    assert_problem(api.post("/v1/desktop/display"), 422)
    # Nothing changed.
    assert api.get("/v1/desktop/display/info").json()["resolution"]["width"] == SIZE[0]


def test_a_desktop_not_running_is_the_usual_problem(client: httpx.Client) -> None:
    assert_problem(client.post("/v1/desktop/display", json={"width": 800, "height": 600}), 409,
                   "desktop_runtime_inactive")
    missing = client.post("/v1/desktops/nope/display", json={"width": 800, "height": 600})
    assert_problem(missing, 404, "desktop_not_found")


def test_another_desktop_changes_its_own_size(api: httpx.Client, display: str) -> None:
    created = api.post("/v1/desktops", json={"width": 640, "height": 480})
    assert created.status_code == 201, created.text
    other = created.json()
    try:
        changed = api.post(f"/v1/desktops/{other['id']}/display", json={"width": 1200, "height": 900})
        assert changed.status_code == 200, changed.text
        assert x_screen(other["display"])[:2] == (1200, 900)
        info = api.get(f"/v1/desktops/{other['id']}/display/info").json()["resolution"]
        assert (info["width"], info["height"]) == (1200, 900)
        # The default desktop kept its size.
        assert x_screen(display)[:2] == SIZE
        refused = api.post(f"/v1/desktops/{other['id']}/display", json={"width": 2600, "height": 900})
        assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "width"
    finally:
        api.delete(f"/v1/desktops/{other['id']}")


def test_opengl_is_a_start_option_off_by_default(api: httpx.Client) -> None:
    """GLX is in a desktop's X server only when asked for; asking a running desktop for the other is a 409."""
    made = {opengl: api.post("/v1/desktops", json={"width": 640, "height": 480, "opengl": opengl})
            for opengl in (None, True)}
    try:
        for opengl, created in made.items():
            assert created.status_code == 201, created.text
            conn = Display(created.json()["display"])
            try:
                assert (conn.query_extension("GLX") is not None) is bool(opengl), opengl
            finally:
                conn.close()
        base = f"/v1/desktops/{made[True].json()['id']}"
        conflict = api.post(f"{base}/start", json={"opengl": False})
        assert "opengl=True" in str(assert_problem(conflict, 409, "desktop_already_active")["detail"])
        wrong = assert_problem(api.post("/v1/desktops", json={"opengl": "yes please"}), 422)
        assert wrong["errors"][0]["field"] == "opengl"  # type: ignore[index]
    finally:
        for created in made.values():
            if created.status_code == 201:
                api.delete(f"/v1/desktops/{created.json()['id']}")


def test_maximum_size_is_a_start_option(tmp_path: Path) -> None:
    from tests.conftest import launch_server

    server = launch_server(tmp_path)
    try:
        with server.client() as api:
            bad = api.post("/v1/desktop/start", json={"displayNum": 297, "width": 800, "height": 600,
                                                      "maxWidth": 640})
            problem = assert_problem(bad, 400, "desktop_invalid_action")
            assert problem["errors"][0]["field"] == "maxWidth"  # type: ignore[index]
            started = api.post("/v1/desktop/start", json={"displayNum": 297, "width": 800, "height": 600,
                                                          "maxWidth": 1000, "maxHeight": 700})
            assert started.status_code == 200, started.text
            assert started.json()["resolution"] == {"width": 800, "height": 600, "dpi": 96, "maxWidth": 1000,
                                                    "maxHeight": 700}
            display = started.json()["display"]
            assert x_screen(display)[:2] == (800, 600)
            assert resize(api, 1000, 700)["maxWidth"] == 1000
            assert_problem(api.post("/v1/desktop/display", json={"width": 1002, "height": 700}), 400)
            same = api.post("/v1/desktop/start", json={"width": 1000, "height": 700, "maxWidth": 1000})
            assert same.status_code == 200, same.text  # the size now and the maximum it runs with
            conflict = api.post("/v1/desktop/start", json={"width": 1000, "height": 700, "maxWidth": 1200})
            assert "maxWidth=1000" in str(assert_problem(conflict, 409, "desktop_already_active")["detail"])
    finally:
        server.stop()


# -- the live view and recording follow ------------------------------------------------------------------

def test_the_live_view_follows_a_resize(srv: ServerProcess, api: httpx.Client) -> None:
    assert api.post("/v1/desktop/stream/start").status_code == 200

    async def frame_of_size(viewer: Viewer, size: tuple[int, int], timeout: float = 10) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = viewer.received.last_frame
            if frame is not None and (frame.width, frame.height) == size:
                return time.monotonic()
            await asyncio.sleep(0.005)
        raise AssertionError(f"no frame of {size} in {timeout} s")

    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            await frame_of_size(viewer, SIZE)
            for size in ((1280, 720), (640, 480)):
                began = time.monotonic()
                await asyncio.to_thread(resize, api, *size)
                seen = await frame_of_size(viewer, size)
                print(f"\nlive view: first {size[0]}x{size[1]} frame {1000 * (seen - began):.0f} ms after the request")
                updates = viewer.events_named("screen/updated")
                assert updates and updates[-1]["width"] == size[0] and updates[-1]["height"] == size[1]
                assert updates[-1]["rate"] == 30
            # Input from the viewer lands within the new screen (its coordinates are the new size's).
            before = viewer.received.frames
            await viewer.wait_frames(before + 1)
        finally:
            await viewer.close()

    try:
        run(scenario)
    finally:
        api.post("/v1/desktop/stream/stop")


def test_a_recording_plays_through_a_resize(api: httpx.Client, display: str, tmp_path: Path) -> None:
    started = api.post("/v1/desktop/recording/start", json={"fps": 10})
    assert started.status_code == 200, started.text
    rec = started.json()
    red = Cover(display, *SIZE, 0xCC0000)
    try:
        time.sleep(0.8)
        resize(api, 800, 600)
        red.close()
        green = Cover(display, 800, 600, 0x00CC00)
        time.sleep(0.8)
        resize(api, 1280, 720)
        green.close()
        blue = Cover(display, 1280, 720, 0x0000CC)
        time.sleep(0.8)
        blue.close()
    finally:
        stopped = api.post("/v1/desktop/recording/stop")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "completed" and "lastError" not in stopped.json()
    video = tmp_path / "resized.mp4"
    video.write_bytes(api.get(f"/v1/desktop/recordings/{rec['id']}/download").content)
    centres: list[tuple[float, tuple[int, int, int]]] = []
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == SIZE  # the recording keeps its size
        for frame in container.decode(stream):
            assert (frame.width, frame.height) == SIZE
            image = frame.to_image()
            pixel = image.getpixel((SIZE[0] // 2, SIZE[1] // 2))
            assert isinstance(pixel, tuple)
            centres.append((float(frame.time or 0.0), (pixel[0], pixel[1], pixel[2])))
    duration = centres[-1][0]
    assert duration >= 2.0, centres  # frames right through both changes

    def dominant(rgb: tuple[int, int, int]) -> str:
        channel = max(range(3), key=lambda i: rgb[i])
        return "rgb"[channel] if rgb[channel] > 150 and sorted(rgb)[1] < 80 else "?"

    seen = [dominant(c) for _, c in centres]
    order = [c for i, c in enumerate(seen) if c != "?" and (i == 0 or c != seen[i - 1])]
    assert [c for c in order if c in "rgb"][:3] == ["r", "g", "b"], seen



def test_an_x_server_restarted_after_a_crash_comes_back_at_the_current_size(api: httpx.Client) -> None:
    resize(api, 1280, 720, dpi=120)
    xvfb = child_host_pid(api.get("/v1/desktop/status").json(), "Xvfb")
    os.kill(xvfb, signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        now = api.get("/v1/desktop/status").json()
        return now if restarted_child(now, "Xvfb", xvfb) else None

    after = wait_for(restarted, "the desktop active again on a new Xvfb", timeout=30)
    assert after["resolution"]["width"] == 1280 and after["resolution"]["dpi"] == 120
    assert x_screen(after["display"]) == (1280, 720, millimetres(1280, 120), millimetres(720, 120))
    assert wait_for(lambda: screenshot_size(api) == (1280, 720), "a 1280x720 screenshot")
