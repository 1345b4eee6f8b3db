"""The live view's WebSocket transport (streaming/media_socket.py) against a real server and a real Xvfb.

A Python client on the server's own port decodes the H.264 messages with PyAV (or reads the JPEG ones with
Pillow); what it sees and does is checked independently: a window a separate X connection paints shows in a
decoded picture, input arrives in a separate X client (tests/support/xprobe.py) and moves the pointer as
an X query reads it, and the encoder count is the server's own status.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image
from websockets.asyncio.client import connect
from Xlib import X
from Xlib import display as xdisplay

from streaming.media_socket import KEYFRAME, MEDIA_HEADER, MediaKind, VideoFormat, media_message
from streaming.socket_viewer import SocketViewer
from streaming.viewer import Viewer, signaling_url
from tests.conftest import ServerProcess, poll, run
from tests.support.xprobe import Probe

PORTS = (59530, 59545)
DESKTOP = {"displayNum": 616, "width": 800, "height": 600, "streamVideoCodec": "h264",
           "webrtcPortRange": f"{PORTS[0]}-{PORTS[1]}"}
PATCH = (600, 420, 120, 90)  # x, y, width, height of the painted window
PROBE = (60, 60, 300, 200)


@pytest.fixture
def probe(display: str, tmp_path: Path) -> Iterator[Probe]:
    x, y, w, h = PROBE
    p = Probe(display, tmp_path / "events.jsonl", f"{w}x{h}+{x}+{y}")
    yield p
    p.close()


def scoped_token(api: httpx.Client, role: str) -> str:
    issued = api.post("/v1/desktops/default/tokens", json={"role": role, "ttlSeconds": 600})
    assert issued.status_code == 201, issued.text
    return str(issued.json()["token"])


def presses(probe: Probe) -> list[tuple[int, int]]:
    return [(e["rootX"], e["rootY"]) for e in probe.events("ButtonPress")]


def colour_at(picture: Image.Image, x: int, y: int) -> tuple[int, int, int]:
    red, green, blue = picture.convert("RGB").getpixel((x, y))  # type: ignore[misc]
    return int(red), int(green), int(blue)


def is_red(rgb: tuple[int, int, int]) -> bool:
    return rgb[0] > 180 and rgb[1] < 80 and rgb[2] < 80


def test_the_message_header_round_trips() -> None:
    message = media_message(MediaKind.H264, True, 1_234_567, b"\0\0\0\1unit")
    assert MEDIA_HEADER.unpack_from(message) == (1, 1, 1_234_567) and message[MEDIA_HEADER.size:] == b"\0\0\0\1unit"


def test_h264_starts_at_a_keyframe_and_shows_what_is_drawn(srv: ServerProcess, api: httpx.Client, display: str,
                                                           streaming: None) -> None:
    x, y, w, h = PATCH
    painter = xdisplay.Display(display)
    screen = painter.screen()
    red = screen.default_colormap.alloc_color(0xFFFF, 0, 0).pixel

    async def scenario() -> None:
        viewer = SocketViewer(srv.url, srv.token)
        try:
            await viewer.connect()
            first = viewer.received.kinds[0]
            assert first == (MediaKind.H264, True)  # the encoder was asked for a keyframe on join
            assert viewer.received.frames >= 1 and viewer.received.keyframes >= 1
            assert viewer.received.last_frame is not None
            assert (viewer.received.last_frame.width, viewer.received.last_frame.height) == (800, 600)
            assert not is_red(colour_at(viewer.received.last_frame.to_image(), x + w // 2, y + h // 2))
            window = screen.root.create_window(x, y, w, h, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
                                               background_pixel=red, override_redirect=True)
            window.map()
            painter.sync()

            def shown() -> bool:
                frame = viewer.received.last_frame
                return frame is not None and is_red(colour_at(frame.to_image(), x + w // 2, y + h // 2))
            await poll(shown, "the red window in a decoded frame")
            status = api.get("/v1/desktop/stream/status").json()
            assert (status["viewers"], status["encoders"]) == (1, 1)
            window.destroy()
            painter.sync()
        finally:
            await viewer.close()
    try:
        run(scenario)
    finally:
        painter.close()


def test_jpeg_pictures_for_browsers_without_h264(srv: ServerProcess, streaming: None) -> None:
    async def scenario() -> None:
        # The desktop's own path, as every desktop route has (docs/desktops.md).
        viewer = SocketViewer(f"{srv.url}/v1/desktops/default/stream/ws", srv.token, video=VideoFormat.JPEG)
        try:
            await viewer.connect()
            assert viewer.received.kinds[0] == (MediaKind.JPEG, True)
            picture = viewer.received.last_picture
            assert picture is not None and picture.format == "JPEG" and picture.size == (800, 600)
            [provided] = viewer.events_named("media/provide")
            assert provided["video"] == {"disabled": False, "format": "jpeg"}
        finally:
            await viewer.close()
    run(scenario)


def test_input_on_the_socket_reaches_the_desktop(srv: ServerProcess, display: str, streaming: None,
                                                 probe: Probe) -> None:
    x, y, _, _ = PROBE
    reader = xdisplay.Display(display)

    def pointer() -> tuple[int, int]:
        reply = reader.screen().root.query_pointer()
        return int(reply.root_x), int(reply.root_y)

    async def scenario() -> None:
        viewer = SocketViewer(srv.url, srv.token)
        try:
            await viewer.connect()
            viewer.move(700, 500)
            await poll(lambda: pointer() == (700, 500), "the pointer where the viewer moved it")
            viewer.move(x + 40, y + 30)
            viewer.button(1, True)
            viewer.button(1, False)
            viewer.ping()
            await poll(lambda: presses(probe), "the click in the probe")
            pong = (await poll(lambda: viewer.received.data, "the pong on the socket"))[0]
            assert pong[:3] == bytes([3, 0, 16]) and len(pong) == 19  # neko's pong, as on the data channel
        finally:
            await viewer.close()
    try:
        run(scenario)
    finally:
        reader.close()
    assert presses(probe) == [(x + 40, y + 30)]


def test_a_view_only_token_watches_and_its_input_is_dropped(srv: ServerProcess, api: httpx.Client, streaming: None,
                                                            probe: Probe) -> None:
    x, y, _, _ = PROBE
    view_token = scoped_token(api, "view")

    async def scenario() -> None:
        watcher = SocketViewer(srv.url, view_token, name="ws-watcher")  # asks for control at connect
        admin = SocketViewer(srv.url, srv.token, name="ws-admin", request_control=False)
        try:
            await watcher.connect()
            await poll(lambda: watcher.events_named("system/error"), "the view-only request refused")
            assert watcher.events_named("system/error")[0]["event"] == "control/request"
            await admin.connect()
            await admin.request()
            await poll(lambda: api.get("/v1/desktop/stream/status").json().get("controller") == "ws-admin",
                       "the admin in control")
            watcher.move(x + 10, y + 10)
            watcher.button(1, True)
            watcher.button(1, False)
            await asyncio.sleep(0.3)  # the watcher's input went first; the admin's click then proves it was read
            admin.move(x + 90, y + 90)
            admin.button(1, True)
            admin.button(1, False)
            await poll(lambda: presses(probe), "the admin's click")
        finally:
            await watcher.close()
            await admin.close()
    run(scenario)
    assert presses(probe) == [(x + 90, y + 90)]


def test_four_viewers_two_on_each_transport_share_one_encoder(srv: ServerProcess, api: httpx.Client,
                                                               streaming: None) -> None:
    async def scenario() -> None:
        viewers = [Viewer(srv.url, srv.token, name=f"rtc-{i}") for i in range(2)]
        viewers += [SocketViewer(srv.url, srv.token, name=f"ws-{i}", request_control=False) for i in range(2)]
        try:
            for viewer in viewers:
                await viewer.connect()
            waits = [viewer.wait_frames(viewer.received.frames + 2) for viewer in viewers]
            await asyncio.gather(*waits)
            status = api.get("/v1/desktop/stream/status").json()
            assert (status["viewers"], status["encoders"]) == (4, 1), status
        finally:
            for viewer in viewers:
                await viewer.close()
    run(scenario)


def test_control_passes_between_a_webrtc_and_a_websocket_viewer_who_share_one_encoder(
        srv: ServerProcess, api: httpx.Client, streaming: None, probe: Probe) -> None:
    x, y, _, _ = PROBE
    control_token = scoped_token(api, "control")

    async def scenario() -> None:
        rtc = Viewer(srv.url, srv.token, name="rtc")  # asks for control at connect, as the SDK does
        ws = SocketViewer(srv.url, control_token, name="ws", request_control=False)
        try:
            await rtc.connect()
            await ws.connect()
            counts = (rtc.received.frames, ws.received.frames)
            await asyncio.gather(rtc.wait_frames(counts[0] + 2), ws.wait_frames(counts[1] + 2))
            status = api.get("/v1/desktop/stream/status").json()
            assert (status["viewers"], status["encoders"], status["controller"]) == (2, 1, "rtc")
            await ws.request()
            await poll(lambda: {"id": "ws"} in rtc.events_named("control/request"), "the request, told to rtc")
            ws.move(x + 10, y + 10)  # not the controller yet: dropped
            ws.button(1, True)
            ws.button(1, False)
            ws.ping()  # answered once the server has read the click
            await poll(lambda: ws.received.data, "the pong")
            await asyncio.sleep(0.3)  # and applied (dropped) it: input is checked when applied
            await rtc.give("ws")
            wanted = {"id": "rtc", "has_host": True, "host_id": "ws"}
            await poll(lambda: wanted in ws.events_named("control/host") and wanted in rtc.events_named("control/host"),
                       "the hand-over, told to both")
            ws.move(x + 70, y + 70)
            ws.button(1, True)
            ws.button(1, False)
            await poll(lambda: presses(probe), "the new controller's click")
            await rtc.take()  # the admin takes it back, as from a WebRTC viewer
            await poll(lambda: api.get("/v1/desktop/stream/status").json()["controller"] == "rtc", "rtc's take")
        finally:
            await ws.close()
            await rtc.close()
    run(scenario)
    assert presses(probe) == [(x + 70, y + 70)]


def test_the_socket_url_keeps_one_desktops_path() -> None:
    assert signaling_url("http://h:1/v1/desktops/d1/stream/signaling", "t", socket="/v1/desktop/stream/ws") \
        == "ws://h:1/v1/desktops/d1/stream/ws?access_token=t"
    assert signaling_url("http://h:1", None, socket="/v1/desktop/stream/ws") == "ws://h:1/v1/desktop/stream/ws"


def animate(display: str, stop: threading.Event, rounds: int = 600) -> None:
    """Paint noise over the screen until `stop` (at most `rounds` pictures): a stream the encoder cannot shrink."""
    painter = xdisplay.Display(display)
    try:
        screen = painter.screen()
        gc = screen.root.create_gc()
        for _ in range(rounds):
            if stop.is_set():
                return
            for top in range(0, 300, 100):  # strips: a request without BIG-REQUESTS holds at most 256 KiB
                screen.root.put_image(gc, 0, top, 400, 100, X.ZPixmap, 24, 0, os.urandom(400 * 100 * 4))
            painter.sync()
            stop.wait(0.03)
    finally:
        painter.close()


def test_a_viewer_that_stops_reading_skips_to_a_keyframe_instead_of_queueing(srv: ServerProcess, api: httpx.Client,
                                                                             display: str, streaming: None) -> None:
    """Rate control is the socket's backpressure: with the viewer's TCP window shut, the server's sends wait, the
    viewer's packets are dropped past MAX_PENDING and a keyframe is asked for; reading again, the viewer gets what
    the socket held (bounded by the server's unsent limit, api/cli/main.py, not the kernel's 4 MB send buffer),
    then a keyframe."""
    stop = threading.Event()
    painter = threading.Thread(target=animate, args=(display, stop), daemon=True)

    async def scenario() -> tuple[list[tuple[int, bool, int]], int, int]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's sends wait soon
        host, port = srv.url.removeprefix("http://").split(":")
        sock.connect((host, int(port)))
        url = f"ws://{host}:{port}/v1/desktop/stream/ws?access_token={srv.token}"
        async with connect(url, sock=sock, max_queue=1, max_size=None) as ws:  # max_queue=1: stop reading at once
            await ws.send(json.dumps({"event": "media/request", "payload": {"video": "h264"}}))
            seen: list[tuple[int, bool, int]] = []
            while not seen or not seen[0][1]:
                message = await ws.recv()
                if isinstance(message, bytes):
                    seen.append(MEDIA_HEADER.unpack_from(message))
            before = api.get("/v1/desktop/stream/status").json()["keyframes"]
            painter.start()
            # Not reading, while the screen changes with every picture, until the server made a keyframe for the
            # stalled viewer (a drop asks for one; nobody else watches, and the periodic one is 30 s away).
            made = await poll(lambda: api.get("/v1/desktop/stream/status").json()["keyframes"] - before,
                              "a keyframe for the stalled viewer", timeout=20)
            stop.set()
            held = 0
            for _ in range(10_000):  # what the socket held, the drop, then the keyframe it resumes at
                message = await asyncio.wait_for(ws.recv(), 10)
                if isinstance(message, bytes):
                    kind, flags, timestamp = MEDIA_HEADER.unpack_from(message)
                    seen.append((kind, bool(flags & KEYFRAME), timestamp))
                    if len(seen) > 2 and seen[-1][1]:
                        return seen, made, held
                    held += len(message)
        raise AssertionError("no keyframe after the stall")

    try:
        seen, made, held = run(scenario)
    finally:
        stop.set()
        if painter.is_alive():
            painter.join(10)
    assert made >= 1
    assert held < 1024 * 1024, f"{held} bytes were queued for a viewer that did not read"
    # The keyframe follows the longest pause between pictures: the packets dropped while the viewer did not read.
    stamps = [timestamp for kind, _, timestamp in seen if kind == MediaKind.H264]
    gaps = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    assert gaps.index(max(gaps)) == len(gaps) - 1, (gaps, seen)
