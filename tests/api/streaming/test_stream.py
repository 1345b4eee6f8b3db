"""The live view against the real server: real aiortc viewers speaking the SDK's side of the protocol.

Effects are checked independently: frames are decoded by the viewer's own aiortc/PyAV stack, input
must arrive in a separate X client (tests/support/xprobe.py), held keys are read back with QueryKeymap,
and the UDP ports are read from /proc for the server's own sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from av.video.frame import VideoFrame
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from Xlib import XK
from Xlib import display as xdisplay

from streaming.control import Access, Control
from streaming.input import Button, Key, Move, Ping, Scroll, WheelAccumulator, decode, normalize_keysym, pong
from streaming.ports import HostPolicy, PortRangeExhausted, host_policy
from streaming.rate import FrameRate
from streaming.viewer import Viewer, signaling_url, split_candidates
from tests.conftest import XAUTHORITY, ServerProcess, assert_problem, launch_server, poll, run
from tests.support.xprobe import Probe

PORTS = (59300, 59320)
DESKTOP = {"displayNum": 270, "width": 1024, "height": 768, "streamVideoCodec": "h264",
           "webrtcPortRange": f"{PORTS[0]}-{PORTS[1]}"}
PROBE = (200, 150, 400, 300)  # x, y, width, height of the probe window

# Records each key's keysym from the keymap *as it is when the key arrives* (xprobe caches the keymap,
# so it cannot see keysyms bound to spare keycodes on the fly, as Unicode keysyms are).
KEY_CLIENT = r"""
import json, sys
from Xlib import X, display
d = display.Display()
s = d.screen()
w = s.root.create_window(650, 150, 300, 200, 0, s.root_depth, X.InputOutput, X.CopyFromParent,
    background_pixel=s.white_pixel, event_mask=X.KeyPressMask | X.ButtonPressMask | X.StructureNotifyMask)
w.set_wm_name("stream-keys")
w.map()
d.sync()
with open(sys.argv[1], "a") as out:
    for _ in range(100000):
        e = d.next_event()
        if e.type == X.KeyPress:
            row = d.get_keyboard_mapping(e.detail, 1)[0]
            out.write(json.dumps({"keysym": row[1] if e.state & X.ShiftMask else row[0]}) + "\n")
        elif e.type == X.MapNotify:
            out.write(json.dumps({"mapped": True}) + "\n")
        out.flush()
"""


# -- fixtures and helpers ------------------------------------------------------------------------

@pytest.fixture
def probe(display: str, tmp_path: Path) -> Iterator[Probe]:
    x, y, w, h = PROBE
    p = Probe(display, tmp_path / "events.jsonl", f"{w}x{h}+{x}+{y}", override_redirect=False, title="stream-probe")
    time.sleep(0.2)  # openbox places and decorates it
    yield p
    p.close()


def window_titled(api: httpx.Client, title: str) -> dict[str, Any] | None:
    return next((w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"] == title), None)


def focused_title(api: httpx.Client) -> str | None:
    focused = api.get("/v1/desktop/windows/focused")
    return str(focused.json().get("title")) if focused.status_code == 200 else None


def probe_origin(api: httpx.Client) -> tuple[int, int]:
    """Where the WM put the probe's client area (openbox may shift it for its decorations)."""
    window = next(w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"] == "stream-probe")
    return int(window["x"]), int(window["y"])




def server_udp_ports(pid: int) -> set[int]:
    """Local UDP ports of the sockets the process holds (its fds matched against /proc/net/udp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        match = re.fullmatch(r"socket:\[(\d+)\]", target)
        if match:
            inodes.add(match.group(1))
    ports = set()
    for table in ("udp", "udp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def offer_ports(sdp: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(r"a=candidate:\S+ \d+ udp \d+ \S+ (\d+) typ host", sdp)}


# -- pure units: the wire format and the rules -----------------------------------------------------

def test_data_channel_opcodes_decode_as_the_sdk_encodes_them() -> None:
    # Bytes exactly as sandbox-agent 0.4.2 builds them (DataView, big-endian): move, button, scroll, key.
    message = (bytes([1, 0, 4]) + (1000).to_bytes(2, "big") + (700).to_bytes(2, "big")
               + bytes([5, 0, 4]) + (3).to_bytes(4, "big")
               + bytes([2, 0, 5]) + (-120).to_bytes(2, "big", signed=True) + (240).to_bytes(2, "big", signed=True)
               + bytes([0])
               + bytes([3, 0, 4]) + (0x010020AC).to_bytes(4, "big")
               + bytes([9, 0, 1, 0])  # an unknown opcode is skipped
               + bytes([4, 0, 4]) + (0xFF0D).to_bytes(4, "big")
               + bytes([7, 0, 8]) + bytes(range(8))
               + bytes([1, 0, 4, 0]))  # truncated: ignored
    assert decode(message) == [Move(1000, 700), Button(3, True), Scroll(-120, 240, False), Key(0x010020AC, True),
                               Key(0xFF0D, False), Ping(bytes(range(8)))]
    assert pong(Ping(bytes(range(8))), 1234)[:3] == bytes([3, 0, 16])


def test_keysyms_and_wheel_pixels_convert_as_documented() -> None:
    assert normalize_keysym(0x01000000 + ord("é")) == ord("é")  # Latin-1: the layout's keysym
    assert normalize_keysym(0x01000000 + ord("€")) == 0x01000000 + ord("€")
    assert normalize_keysym(ord("a")) == ord("a")
    wheel = WheelAccumulator()
    assert wheel.clicks(0, 100, now=0.0) == (0, 2)  # a Chrome notch: 100 px, 50 px per click
    assert wheel.clicks(0, 30, now=0.1) == (0, 0)  # accumulates...
    assert wheel.clicks(0, 30, now=0.2) == (0, 1)  # ...until a step is complete
    assert wheel.clicks(-3, 0, now=5.0) == (-1, 0)  # a new gesture always moves at least one click
    assert wheel.clicks(0, 30000, now=5.1)[1] == 10  # capped per event


def test_control_has_one_host_and_passes_it_to_the_next_in_line() -> None:
    changes: list[tuple[str | None, str | None, str]] = []
    control = Control(lambda c: changes.append((c.controller, c.previous, c.cause)), lambda viewer: Access.CONTROL)
    assert control.request("a") and control.holds("a")
    assert not control.request("b") and not control.request("c")
    control.release("c")  # c gave up waiting
    control.release("a")
    assert control.host == "b"
    control.release("b")
    assert control.host is None
    assert changes == [("a", None, "a"), ("b", "a", "a"), (None, "b", "b")]


def test_frame_rate_drops_under_load_and_recovers_slowly() -> None:
    rate = FrameRate(30)
    t = 0.0

    def encode(pictures: int, cost_s: float) -> int:
        """`pictures` pictures, one every 50 ms, each taking `cost_s` to encode; the rate after them."""
        nonlocal t
        for _ in range(pictures):
            t += 0.05
            rate.observe(cost_s, t)
        return rate.current

    assert encode(40, 0.030) == 20  # 30 ms per picture at 30 fps is 90 % of the period
    assert encode(200, 0.030) == 20  # 30 ms is not over 60 % of 50 ms: it holds
    assert encode(30, 0.002) == 20  # cheap again: back up, but only after RAISE_AFTER_S
    assert encode(400, 0.002) == 30
    assert FrameRate(3).current == 3 and FrameRate(30, current=5).period == 0.2


def test_port_policy_binds_inside_the_range_and_reports_exhaustion() -> None:
    from aioice import ice

    async def scenario() -> None:
        policy = HostPolicy(ports=(59400, 59401), addresses=("127.0.0.1",))
        connections = [ice.Connection(ice_controlling=True) for _ in range(3)]
        try:
            with host_policy(policy):
                await connections[0].gather_candidates()
                await connections[1].gather_candidates()
                ports = {c.port for conn in connections[:2] for c in conn.local_candidates}
                assert ports == {59400, 59401}
                with pytest.raises(PortRangeExhausted, match="59400-59401"):
                    await connections[2].gather_candidates()
            # Outside a policy aioice is as shipped: an ephemeral port, no loopback.
            plain = ice.Connection(ice_controlling=True)
            await plain.gather_candidates()
            assert all(c.host != "127.0.0.1" for c in plain.local_candidates)
            await plain.close()
        finally:
            for conn in connections:
                await conn.close()
    run(scenario)


def test_trickle_helpers_split_candidates_and_build_urls() -> None:
    sdp = ("v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 97\r\na=mid:0\r\na=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host"
           "\r\na=end-of-candidates\r\nm=application 9 DTLS/SCTP 5000\r\na=candidate:2 1 udp 1 127.0.0.1 5001 typ host"
           "\r\na=mid:1\r\n")
    stripped, candidates = split_candidates(sdp)
    assert "candidate" not in stripped
    assert candidates == [
        {"candidate": "candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host", "sdpMid": "0", "sdpMLineIndex": 0},
        {"candidate": "candidate:2 1 udp 1 127.0.0.1 5001 typ host", "sdpMid": "1", "sdpMLineIndex": 1},
    ]
    assert signaling_url("http://127.0.0.1:9/", "a b") == "ws://127.0.0.1:9/v1/desktop/stream/signaling?access_token=a%20b"


# -- against the server ------------------------------------------------------------------------

def test_signaling_is_a_409_problem_before_the_stream_starts(srv: ServerProcess, api: httpx.Client) -> None:
    assert api.get("/v1/desktop/stream/status").json() == {"active": False}
    assert api.post("/v1/desktop/stream/stop").json() == {"active": False}

    async def scenario() -> None:
        with pytest.raises(InvalidStatus) as refused:
            await connect(signaling_url(srv.url, srv.token))
        response = refused.value.response
        assert response.status_code == 409
        body = json.loads(response.body or b"{}")
        assert body["code"] == "stream_not_active" and "stream/start" in body["detail"]
    run(scenario)


def test_access_token_opens_the_socket_and_a_wrong_one_is_refused(srv: ServerProcess, streaming: None) -> None:
    async def scenario() -> None:
        for token in ("wrong", None):
            with pytest.raises(InvalidStatus) as refused:
                await connect(signaling_url(srv.url, token))
            assert refused.value.response.status_code == 401
        async with connect(signaling_url(srv.url, srv.token)) as ws:
            init = json.loads(await ws.recv())
            assert init["event"] == "system/init"
            assert init["payload"]["screen_size"] == {"width": 1024, "height": 768, "rate": 30}
            await ws.send("not json")  # ignored, as are unknown events and heartbeats
            await ws.send(json.dumps({"event": "client/heartbeat", "payload": {}}))
            await ws.send(json.dumps({"event": "control/request", "payload": {}}))
            host = json.loads(await ws.recv())
            assert host == {"event": "control/host", "payload": {"id": init["payload"]["session_id"],
                                                                  "has_host": True,
                                                                  "host_id": init["payload"]["session_id"]}}
    run(scenario)


def test_a_viewer_gets_decoded_frames_of_the_screen_in_the_configured_codec(srv: ServerProcess, api: httpx.Client,
                                                                             streaming: None) -> None:
    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            await viewer.wait_frames(2)
            frame = viewer.received.last_frame
            assert frame is not None and (frame.width, frame.height) == (1024, 768)
            assert (viewer.width, viewer.height) == (1024, 768)
            assert viewer.codec == "H264"
            assert viewer.offer_sdp is not None and re.search(r"m=video \d+ \S+ (\d+)", viewer.offer_sdp)
            status = api.get("/v1/desktop/stream/status").json()
            assert status["active"] and status["codec"] == "h264" and status["viewers"] == 1
            assert status["controller"] == viewer.session_id
            # A PLI from the viewer gets a keyframe (the hook on aiortc's sender routes it to the encoder).
            assert viewer.received.keyframes >= 1 and status["keyframes"] >= 1
            before, sent_before = viewer.received.keyframes, status["keyframes"]
            await asyncio.sleep(0.6)  # past the keyframe throttle
            await viewer.request_keyframe()
            await poll(lambda: api.get("/v1/desktop/stream/status").json()["keyframes"] > sent_before,
                       "the server to send a keyframe after a PLI")
            for _ in range(10):  # a packet lost under load loses the picture: ask again, as a browser does
                with contextlib.suppress(AssertionError):
                    await poll(lambda: viewer.received.keyframes > before, "a decoded keyframe", timeout=1.0)
                    break
                await viewer.request_keyframe()
            else:
                raise AssertionError("the viewer decoded no keyframe in 10 s of PLIs")
        finally:
            await viewer.close()
    run(scenario)


def test_the_pointer_is_drawn_into_the_video(srv: ServerProcess, api: httpx.Client, streaming: None) -> None:
    spot = (900, 700)  # bare root window, far from the other tests' windows

    def patch(frame: VideoFrame) -> bytes:
        plane, (x, y) = frame.planes[0], spot
        rows = memoryview(plane)
        return b"".join(bytes(rows[(y + r) * plane.line_size + x - 8:(y + r) * plane.line_size + x + 16])
                        for r in range(-8, 16))

    async def latest_after_move(viewer: Viewer, x: int, y: int) -> bytes:
        await asyncio.to_thread(api.post, "/v1/desktop/mouse/move", json={"x": x, "y": y})
        await viewer.wait_frames(viewer.received.frames + 2)  # the change, then its repeat
        assert viewer.received.last_frame is not None
        return patch(viewer.received.last_frame)

    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            bare = await latest_after_move(viewer, 10, 740)
            with_pointer = await latest_after_move(viewer, *spot)
            assert sum(abs(a - b) for a, b in zip(bare, with_pointer, strict=True)) > 2000
            again = await latest_after_move(viewer, 10, 740)
            assert sum(abs(a - b) for a, b in zip(bare, again, strict=True)) < 500  # gone again (codec noise)
        finally:
            await viewer.close()
    run(scenario)


def test_data_channel_input_reaches_x_clients(srv: ServerProcess, api: httpx.Client, display: str,
                                             streaming: None, probe: Probe, tmp_path: Path) -> None:
    left, top = probe_origin(api)
    keys_out = tmp_path / "keys.jsonl"
    keys = subprocess.Popen([sys.executable, "-c", KEY_CLIENT, str(keys_out)], env=dict(os.environ, DISPLAY=display))

    def typed() -> list[int]:
        lines = keys_out.read_text().splitlines() if keys_out.exists() else []
        return [json.loads(line)["keysym"] for line in lines if "keysym" in line]

    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            viewer.move(left + 40, top + 30)
            viewer.button(1, True)
            viewer.button(1, False)
            viewer.scroll(0, 120)  # 120 browser pixels: two wheel clicks down
            viewer.ping()
            await poll(lambda: len([e for e in probe.events() if e.get("button") == 5
                                    and e["type"] == "ButtonRelease"]) >= 2, "the click and the wheel clicks")
            for _ in range(5):  # click the key window until it has the focus (openbox click-to-focus)
                key_window = await poll(lambda: window_titled(api, "stream-keys"), "the key window")
                viewer.move(key_window["x"] + 20, key_window["y"] + 20)
                viewer.button(1, True)
                viewer.button(1, False)
                with contextlib.suppress(AssertionError):
                    await poll(lambda: focused_title(api) == "stream-keys", "the focus", timeout=2)
                    break
            for keysym in (ord("a"), 0x01000000 + ord("€"), 0x01000000 + ord("é"), 0xFF0D):
                viewer.key(keysym, True)
                viewer.key(keysym, False)
            await poll(lambda: len(typed()) >= 4, "the keys")
            pong = (await poll(lambda: viewer.received.data, "the pong"))[0]
            assert pong[:3] == bytes([3, 0, 16]) and len(pong) == 19  # neko's pong: header + 4 u32
        finally:
            await viewer.close()
    try:
        run(scenario)
    finally:
        keys.kill()
        keys.wait()
    events = probe.events()
    press = next(e for e in events if e["type"] == "ButtonPress")
    assert (press["button"], press["rootX"], press["rootY"]) == (1, left + 40, top + 30)
    assert [e["button"] for e in events if e["type"] == "ButtonPress"] == [1, 5, 5]
    assert typed() in ([ord("a"), 0x01000000 + ord("€"), ord("é"), 0xFF0D], [ord("a"), 0x20AC, ord("é"), 0xFF0D])


def test_three_viewers_share_one_encoder_and_only_the_host_drives(srv: ServerProcess, api: httpx.Client,
                                                                  streaming: None, probe: Probe) -> None:
    left, top = probe_origin(api)

    def presses() -> list[dict[str, Any]]:
        return [e for e in probe.events() if e["type"] == "ButtonPress"]

    async def click(viewer: Viewer, x: int, y: int) -> None:
        viewer.move(x, y)
        viewer.button(1, True)
        viewer.button(1, False)

    async def scenario() -> None:
        viewers = [Viewer(srv.url, srv.token) for _ in range(3)]
        try:
            for viewer in viewers:  # in order: the first one asks for control first
                await viewer.connect()
            counts = [v.received.frames for v in viewers]
            await asyncio.gather(*(v.wait_frames(c + 2) for v, c in zip(viewers, counts, strict=True)))
            status = api.get("/v1/desktop/stream/status").json()
            assert (status["viewers"], status["encoders"]) == (3, 1)
            assert status["controller"] == viewers[0].session_id
            # Ports: the offer's candidates and every UDP socket of the server lie in the range.
            for viewer in viewers:
                assert viewer.offer_sdp and offer_ports(viewer.offer_sdp) <= set(range(PORTS[0], PORTS[1] + 1))
            udp = server_udp_ports(srv.proc.pid)
            assert udp and all(PORTS[0] <= p <= PORTS[1] for p in udp), udp
            # A watcher's click is dropped; the host's arrives.
            await click(viewers[1], left + 10, top + 10)
            await asyncio.sleep(0.3)
            await click(viewers[0], left + 50, top + 50)
            await poll(lambda: presses(), "the host's click")
            assert [(e["rootX"], e["rootY"]) for e in presses()] == [(left + 50, top + 50)]
            # The host leaves: control passes to the next viewer that asked, and everyone is told.
            await viewers[0].close()
            host = {"id": viewers[0].session_id, "has_host": True, "host_id": viewers[1].session_id}
            for viewer in viewers[1:]:
                await poll(lambda v=viewer: ("control/host", host) in v.received.events,  # type: ignore[misc]
                           "control/host")
            await click(viewers[1], left + 60, top + 60)
            await poll(lambda: len(presses()) == 2, "the new host's click")
            assert (presses()[1]["rootX"], presses()[1]["rootY"]) == (left + 60, top + 60)
            frames = viewers[2].received.frames
            await viewers[2].wait_frames(frames + 1)  # the others kept receiving video
        finally:
            for viewer in viewers:
                await viewer.close()
    run(scenario)


def test_keys_held_by_a_viewer_are_released_when_it_disconnects(srv: ServerProcess, display: str,
                                                                streaming: None) -> None:
    x = xdisplay.Display(display)
    shift = x.keysym_to_keycode(XK.XK_Shift_L)

    def held() -> bool:
        return bool(x.query_keymap()[shift // 8] >> (shift % 8) & 1)

    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            viewer.key(XK.XK_Shift_L, True)
            viewer.button(3, True)
            await poll(held, "Shift held")
        finally:
            await viewer.close()
        # Keys are released first, then buttons: wait for both (Button3Mask is 0x400).
        await poll(lambda: not held() and not x.screen().root.query_pointer().mask & 0x400,
                   "Shift and button 3 released")
    try:
        run(scenario)
    finally:
        x.close()


def test_stop_disconnects_viewers_and_closes_their_peers(srv: ServerProcess, api: httpx.Client,
                                                         streaming: None) -> None:
    async def scenario() -> None:
        viewer = Viewer(srv.url, srv.token)
        try:
            await viewer.connect()
            stopped = await asyncio.to_thread(api.post, "/v1/desktop/stream/stop")
            assert stopped.json() == {"active": False}
            await asyncio.wait_for(viewer.disconnected.wait(), 10)
            assert ("system/disconnect", {"message": "desktop streaming stopped"}) in viewer.received.events
            assert viewer._pc is not None
            await poll(lambda: viewer._pc is not None and viewer._pc.connectionState in ("closed", "failed"),
                       "the peer connection to close", timeout=20)
            with pytest.raises(InvalidStatus):
                await connect(signaling_url(srv.url, srv.token))
        finally:
            await viewer.close()
    run(scenario)
    assert api.get("/v1/desktop/stream/status").json() == {"active": False}


def test_codec_and_frame_rate_follow_the_desktop_start_request(tmp_path: Path) -> None:
    server = launch_server(tmp_path)
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={"displayNum": 272, "width": 640, "height": 480,
                                                          "streamVideoCodec": "vp9"})
            assert started.json()["state"] == "active", started.text
            refused = assert_problem(api.post("/v1/desktop/stream/start"), 400, "desktop_invalid_action")
            assert "vp9" in str(refused["detail"]) and "h264 or vp8" in str(refused["detail"])
            api.post("/v1/desktop/stop")
            started = api.post("/v1/desktop/start", json={"displayNum": 272, "width": 640, "height": 480,
                                                          "streamVideoCodec": "vp8", "streamFrameRate": 12,
                                                          "webrtcPortRange": "59330-59335"})
            assert started.json()["state"] == "active", started.text
            status = api.post("/v1/desktop/stream/start").json()
            assert (status["codec"], status["frameRate"], status["webrtcPortRange"]) == ("vp8", 12, "59330-59335")
            assert api.post("/v1/desktop/stream/start").json()["active"]  # idempotent

            async def scenario() -> None:
                viewer = Viewer(server.url, server.token)
                try:
                    await viewer.connect()
                    frame = viewer.received.last_frame
                    assert viewer.codec == "VP8" and frame is not None and (frame.width, frame.height) == (640, 480)
                    assert offer_ports(viewer.offer_sdp or "") <= set(range(59330, 59336))
                finally:
                    await viewer.close()
            run(scenario)
            # Stopping the desktop stops the stream.
            api.post("/v1/desktop/stop")
            assert api.get("/v1/desktop/stream/status").json() == {"active": False}
    finally:
        server.stop()


def test_no_task_or_thread_outlives_the_stream(tmp_path: Path) -> None:
    """The app in this process (so its tasks and threads are visible), two full start/view/stop cycles."""
    import uvicorn

    from api.app import create_app
    from api.routes.stream import SIGNALING_PATH, WEBSOCKET_ROUTES
    from api.server.config import ServerConfig
    from tests.conftest import free_port

    app = create_app(ServerConfig(token="t0k", state_dir=tmp_path / "state", xauthority=XAUTHORITY))
    if not any(getattr(route, "path", None) == SIGNALING_PATH for route in app.routes):
        app.router.routes.extend(WEBSOCKET_ROUTES)  # until api/app.py mounts it
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def ours(thread: threading.Thread) -> bool:
        return thread.name.startswith(("stream-", "frames-", "video-decoder"))

    async def scenario() -> None:
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        serving = asyncio.create_task(server.serve())
        try:
            await poll(lambda: server.started, "the in-process server")
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer t0k"}, timeout=30) as api:
                started = await api.post("/v1/desktop/start", json={"displayNum": 273, "width": 320, "height": 240})
                assert started.json()["state"] == "active", started.text
                baseline = asyncio.all_tasks()
                current = asyncio.current_task()
                for _ in range(2):
                    assert (await api.post("/v1/desktop/stream/start")).json()["active"]
                    viewers = [Viewer(url, "t0k") for _ in range(3)]
                    for viewer in viewers:
                        await viewer.connect()
                    assert any(ours(t) for t in threading.enumerate())
                    await viewers[0].close()
                    assert (await api.post("/v1/desktop/stream/stop")).json() == {"active": False}
                    for viewer in viewers[1:]:
                        await asyncio.wait_for(viewer.disconnected.wait(), 10)
                        await viewer.close()
                    await poll(lambda: not [t for t in threading.enumerate() if ours(t)], "threads to end")
                    await poll(lambda: not (asyncio.all_tasks() - baseline - {current}), "tasks to end")
                await api.post("/v1/desktop/stop")
        finally:
            server.should_exit = True
            await serving
    run(scenario)
