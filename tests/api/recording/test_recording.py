"""Recording against a real server and desktop, checked with ffprobe/ffmpeg and screenshots.

The scene is drawn by the test itself (python-xlib, an override-redirect window of solid colours)
or by an xterm printing a counter, so what ends up in the MP4 is compared with effects the server
did not produce. Crash safety is checked by SIGKILLing a server mid-recording and reading the
recording from a new server on the same state directory.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import httpx
import pytest
from PIL import Image
from Xlib import X, display

from tests.conftest import ServerProcess, assert_problem, launch_server, wait_for

DESKTOP = {"displayNum": 260, "width": 800, "height": 600, "recordingFps": 25}
PATCH = (100, 100, 200, 150)  # x, y, width, height of the painted window
PROBE = (200, 175)  # a screen point well inside it
RED, GREEN, BLUE = 0xC81E28, 0x14B43C, 0x1E3CDC


def rgb(pixel: int) -> tuple[int, int, int]:
    return (pixel >> 16) & 0xFF, (pixel >> 8) & 0xFF, pixel & 0xFF


def close_to(a: tuple[int, ...], b: tuple[int, ...], tolerance: int = 14) -> bool:
    return all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))


class Painter:
    """An override-redirect window of one solid colour at PATCH, drawn by this test process."""

    def __init__(self, display_name: str) -> None:
        self.d = display.Display(display_name)
        screen = self.d.screen()
        x, y, w, h = PATCH
        self.window = screen.root.create_window(x, y, w, h, 0, screen.root_depth, X.InputOutput,
                                                X.CopyFromParent, background_pixel=0, override_redirect=True)
        self.gc = self.window.create_gc(foreground=0)
        self.window.map()
        self.d.sync()

    def fill(self, pixel: int) -> None:
        self.gc.change(foreground=pixel)
        self.window.fill_rectangle(self.gc, 0, 0, PATCH[2], PATCH[3])
        self.d.sync()

    def close(self) -> None:
        self.window.destroy()
        self.d.close()


@pytest.fixture(scope="module")
def painter(api: httpx.Client) -> Iterator[Painter]:
    p = Painter(api.get("/v1/desktop/status").json()["display"])
    yield p
    p.close()


@contextlib.contextmanager
def counter_xterm(display_name: str) -> Iterator[subprocess.Popen[bytes]]:
    """An xterm printing a counter as fast as it can: a screen that never stops changing."""
    proc = subprocess.Popen(
        ["xterm", "-geometry", "100x30+0+0", "-e", "sh", "-c", "i=0; while :; do i=$((i+1)); echo $i; done"],
        env=dict(os.environ, DISPLAY=display_name), stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def timed_post(api: httpx.Client, path: str, **kwargs: Any) -> tuple[httpx.Response, float]:
    """The response and the midpoint of the request on the monotonic clock."""
    before = time.monotonic()
    response = api.post(path, **kwargs)
    return response, (before + time.monotonic()) / 2


def ffprobe(path: Path) -> dict[str, Any]:
    done = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_format", "-show_streams",
                           "-of", "json", str(path)], capture_output=True, check=True, timeout=60)
    info: dict[str, Any] = json.loads(done.stdout)
    return info


def last_frame_at(path: Path) -> float:
    """When the last frame that really decodes is shown (0 if none does)."""
    done = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                           "frame=pts_time", "-of", "csv=p=0", str(path)], capture_output=True, timeout=60, text=True)
    times = [float(line.strip(", ")) for line in done.stdout.splitlines() if line.strip(", ")]
    return max(times, default=0.0)


def pixel_at(path: Path, seconds: float, x: int, y: int) -> tuple[int, int, int]:
    """The colour shown at (x, y) at `seconds` into the video, decoded by ffmpeg.

    The fps filter turns the variable-rate video into a constant-rate one (repeating the frame
    being shown), so the frame picked is the one on screen at that time.
    """
    done = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-vf", f"fps=20,format=rgb24,crop=1:1:{x}:{y}",
                           "-ss", f"{seconds:.3f}", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                          capture_output=True, check=True, timeout=60)
    assert len(done.stdout) == 3, done.stderr
    return done.stdout[0], done.stdout[1], done.stdout[2]


def screen_pixel(api: httpx.Client, x: int, y: int) -> tuple[int, int, int]:
    shot = api.get("/v1/desktop/screenshot/region", params={"x": x, "y": y, "width": 1, "height": 1})
    assert shot.status_code == 200, shot.text
    value = Image.open(io.BytesIO(shot.content)).convert("RGB").getpixel((0, 0))
    assert isinstance(value, tuple)
    return value[0], value[1], value[2]


def download(api: httpx.Client, rec_id: str, dest: Path) -> Path:
    response = api.get(f"/v1/desktop/recordings/{rec_id}/download")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "video/mp4"
    dest.write_bytes(response.content)
    return dest


def stop_recording(api: httpx.Client) -> dict[str, Any]:
    response = api.post("/v1/desktop/recording/stop")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# -- the recorded scene ----------------------------------------------------------------------------


def test_recording_matches_the_screen(api: httpx.Client, painter: Painter, srv: ServerProcess,
                                      tmp_path: Path) -> None:
    painter.fill(RED)
    started, t_start = timed_post(api, "/v1/desktop/recording/start", json={})
    assert started.status_code == 200, started.text
    info = started.json()
    assert info["status"] == "recording" and info["fileName"] == f"{info['id']}.mp4"
    assert info["fps"] == 25  # the desktop's recordingFps
    assert "endedAt" not in info and info["startedAt"].endswith("+00:00")
    time.sleep(0.6)
    red_at, red_seen = time.monotonic() - t_start, screen_pixel(api, *PROBE)
    time.sleep(0.6)
    colours = [RED, GREEN, BLUE]
    deadline = time.monotonic() + 1.5
    i = 0
    while time.monotonic() < deadline:  # a busy phase: a new colour every 30 ms
        painter.fill(colours[i % 3] ^ (i & 0x0F))
        time.sleep(0.03)
        i += 1
    painter.fill(GREEN)
    time.sleep(0.6)
    green_at, green_seen = time.monotonic() - t_start, screen_pixel(api, *PROBE)
    time.sleep(0.6)
    stopped, t_stop = timed_post(api, "/v1/desktop/recording/stop")
    assert stopped.status_code == 200, stopped.text
    final = stopped.json()
    assert final["status"] == "completed" and final["id"] == info["id"] and "lastError" not in final
    assert final["endedAt"] >= final["startedAt"]

    video = download(api, info["id"], tmp_path / "scene.mp4")
    assert video.read_bytes() == (srv.state_dir / "recordings" / info["fileName"]).read_bytes()
    assert final["bytes"] == video.stat().st_size
    probe = ffprobe(video)
    stream = probe["streams"][0]
    assert (stream["codec_name"], stream["pix_fmt"]) == ("h264", "yuv420p")
    assert (stream["width"], stream["height"]) == (800, 600)
    wall = t_stop - t_start
    duration = float(probe["format"]["duration"])
    assert abs(duration - wall) <= 0.3, (duration, wall)
    assert abs(last_frame_at(video) - wall) <= 0.3
    frames = int(stream["nb_read_packets"])
    assert frames == final["frames"]
    # The busy phase alone changes the screen ~50 times in 1.5 s: at 25 fps that is ~37 frames;
    # an idle screen adds only a few, so the whole file stays far below 25 fps x duration + slack.
    assert 20 <= frames <= 25 * duration + 10, frames
    # What the video shows matches screenshots taken at the same moments.
    assert close_to(red_seen, rgb(RED), 2) and close_to(green_seen, rgb(GREEN), 2)
    assert close_to(pixel_at(video, red_at, *PROBE), red_seen)
    assert close_to(pixel_at(video, green_at, *PROBE), green_seen)


def test_back_to_back_recordings_each_play_alone(api: httpx.Client, painter: Painter, tmp_path: Path) -> None:
    """The second recording starts on the first one's warm encoder (recording/encoder.py): it still begins at zero
    with a keyframe of its own, shows its own screen, and plays without the first file."""
    files = []
    for colour in (RED, BLUE):
        painter.fill(colour)
        time.sleep(0.2)
        rec = api.post("/v1/desktop/recording/start", json={}).json()
        time.sleep(0.4)
        assert stop_recording(api)["status"] == "completed"
        files.append((download(api, rec["id"], tmp_path / f"{rec['id']}.mp4"), colour))
    for video, colour in files:
        with av.open(str(video)) as container:
            first = next(container.decode(video=0))
        assert first.key_frame and first.pts == 0
        shown = first.to_image().convert("RGB").getpixel(PROBE)
        assert isinstance(shown, tuple) and close_to((shown[0], shown[1], shown[2]), rgb(colour), 12), (shown, colour)


def test_download_ranges(api: httpx.Client, painter: Painter, tmp_path: Path) -> None:
    rec = api.post("/v1/desktop/recording/start", json={"fps": 10}).json()
    painter.fill(BLUE)
    time.sleep(0.3)
    stop_recording(api)
    whole = download(api, rec["id"], tmp_path / "r.mp4").read_bytes()
    size = len(whole)
    url = f"/v1/desktop/recordings/{rec['id']}/download"
    for header, first, last in (("bytes=10-19", 10, 19), (f"bytes={size - 5}-", size - 5, size - 1),
                                ("bytes=-100", size - 100, size - 1), (f"bytes=0-{size + 50}", 0, size - 1),
                                (f"bytes=-{size + 7}", 0, size - 1)):
        part = api.get(url, headers={"Range": header})
        assert part.status_code == 206, (header, part.text)
        assert part.headers["content-range"] == f"bytes {first}-{last}/{size}"
        assert int(part.headers["content-length"]) == last - first + 1
        assert part.content == whole[first:last + 1], header
    for header in (f"bytes={size}-", f"bytes={size + 10}-{size + 20}", "bytes=-0"):
        problem = assert_problem(api.get(url, headers={"Range": header}), 416)
        assert "range" in str(problem["detail"])
    assert api.get(url, headers={"Range": f"bytes={size}-"}).headers["content-range"] == f"bytes */{size}"
    for ignored in ("bytes=5-2", "bytes=0-1,5-6", "items=0-5", "bytes=abc"):
        full = api.get(url, headers={"Range": ignored})
        assert full.status_code == 200 and full.content == whole, ignored
    assert api.get(url).headers["accept-ranges"] == "bytes"
    documented = api.get("/v1/openapi.json").json()["paths"]["/v1/desktop/recordings/{id}/download"]["get"]
    assert {"200", "206", "416"} <= set(documented["responses"]), documented["responses"]
    assert any(p["name"] == "Range" and p["in"] == "header" for p in documented["parameters"])


def test_download_while_recording(api: httpx.Client, painter: Painter, tmp_path: Path) -> None:
    rec = api.post("/v1/desktop/recording/start", json={}).json()
    try:
        partial = tmp_path / "partial.mp4"

        def some_video_on_disk() -> bool:
            painter.fill(RED if int(time.monotonic() * 10) % 2 else BLUE)
            download(api, rec["id"], partial)
            return last_frame_at(partial) > 0.3

        wait_for(some_video_on_disk, "a growing recording that already decodes")
        listed = api.get(f"/v1/desktop/recordings/{rec['id']}").json()
        assert listed["status"] == "recording" and listed["bytes"] >= partial.stat().st_size
        head = api.get(f"/v1/desktop/recordings/{rec['id']}/download", headers={"Range": "bytes=0-99"})
        assert head.status_code == 206 and head.content == partial.read_bytes()[:100]
        assert head.content[4:8] == b"ftyp"
    finally:
        final = stop_recording(api)
    assert final["bytes"] >= partial.stat().st_size


def test_one_recording_at_a_time(api: httpx.Client) -> None:
    def start() -> httpx.Response:
        return api.post("/v1/desktop/recording/start", json={})

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(lambda _: start(), range(6)))
    assert sorted(r.status_code for r in responses) == [200] + [409] * 5
    for r in responses:
        if r.status_code == 409:
            problem = assert_problem(r, 409, "conflict")
            assert problem["detail"] == "conflict: a desktop recording is already active"
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert stop_recording(api)["id"] == winner["id"]
    problem = assert_problem(api.post("/v1/desktop/recording/stop"), 409, "conflict")
    assert "no desktop recording is active" in str(problem["detail"])


def test_fps_must_be_between_1_and_60(api: httpx.Client) -> None:
    for fps in (0, 61, -1):
        response = api.post("/v1/desktop/recording/start", json={"fps": fps})
        assert_problem(response, 400, "desktop_invalid_action")
        assert [e["field"] for e in response.json()["errors"]] == ["fps"]
    assert_problem(api.post("/v1/desktop/recording/start", json={"fps": "30"}), 422)
    started = api.post("/v1/desktop/recording/start", json={"fps": 60})
    assert started.status_code == 200 and started.json()["fps"] == 60
    assert stop_recording(api)["status"] == "completed"


def test_delete_and_ids_are_never_reused(api: httpx.Client, srv: ServerProcess) -> None:
    rec = api.post("/v1/desktop/recording/start", json={}).json()
    problem = assert_problem(api.delete(f"/v1/desktop/recordings/{rec['id']}"), 409, "conflict")
    assert "stop the active desktop recording" in str(problem["detail"])
    stop_recording(api)
    path = srv.state_dir / "recordings" / rec["fileName"]
    assert path.exists()
    deleted = api.delete(f"/v1/desktop/recordings/{rec['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert not path.exists() and not path.with_suffix(".json").exists()
    problem = assert_problem(api.get(f"/v1/desktop/recordings/{rec['id']}"), 404, "not_found")
    assert problem["details"] == {"resource": "desktop_recording", "id": rec["id"]}
    assert_problem(api.get(f"/v1/desktop/recordings/{rec['id']}/download"), 404, "not_found")
    assert_problem(api.delete(f"/v1/desktop/recordings/{rec['id']}"), 404, "not_found")
    assert_problem(api.get("/v1/desktop/recordings/bogus"), 404, "not_found")
    after = api.post("/v1/desktop/recording/start", json={}).json()
    stop_recording(api)
    number = int(rec["id"].removeprefix("rec_"))
    assert after["id"] == f"rec_{number + 1}"  # the deleted highest id is not handed out again
    ids = [r["id"] for r in api.get("/v1/desktop/recordings").json()["recordings"]]
    assert rec["id"] not in ids and ids == sorted(ids, key=lambda i: int(i[4:]))


def test_desktop_not_ready_is_the_desktops_problem(client: httpx.Client) -> None:
    assert_problem(client.post("/v1/desktop/recording/start", json={}), 409, "desktop_runtime_inactive")
    assert_problem(client.post("/v1/desktop/recording/stop"), 409, "conflict")
    assert client.get("/v1/desktop/recordings").json() == {"recordings": []}


# -- lifecycle: desktop stop, SIGTERM, SIGKILL, full disk ----------------------------------------------


def desktop_pids(api: httpx.Client) -> list[int]:
    return [p["pid"] for p in api.get("/v1/desktop/status").json()["processes"] if p.get("pid")]


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_stopping_the_desktop_or_the_server_finalises(tmp_path: Path) -> None:
    server = launch_server(tmp_path)
    try:
        with server.client() as api:
            display_name = api.post("/v1/desktop/start", json={"displayNum": 270, "width": 640, "height": 480}
                                    ).json()["display"]
            rec = api.post("/v1/desktop/recording/start", json={}).json()
            with counter_xterm(display_name):
                time.sleep(1.2)
            assert api.post("/v1/desktop/stop").json()["state"] == "inactive"
            first = api.get(f"/v1/desktop/recordings/{rec['id']}").json()
            assert first["status"] == "completed", first
            assert_problem(api.post("/v1/desktop/recording/stop"), 409, "conflict")
            api.post("/v1/desktop/start", json={"displayNum": 270, "width": 640, "height": 480})
            second = api.post("/v1/desktop/recording/start", json={}).json()
            time.sleep(0.5)
        server.stop()  # SIGTERM: a graceful shutdown
        recordings = server.state_dir / "recordings"
        for rec_info in (first, second):
            meta = json.loads((recordings / f"{rec_info['id']}.json").read_text())
            assert meta["status"] == "completed", meta
            assert last_frame_at(recordings / rec_info["fileName"]) >= 0.4
        # Closed normally: the fragment index (mfra, whose last box is a 16-byte mfro) ends the file.
        assert (recordings / second["fileName"]).read_bytes()[-12:-8] == b"mfro"
    finally:
        server.stop()


def test_sigkill_mid_recording_leaves_a_playable_interrupted_recording(tmp_path: Path) -> None:
    server = launch_server(tmp_path)
    pids: list[int] = []
    try:
        with server.client() as api:
            display_name = api.post("/v1/desktop/start", json={"displayNum": 280, "width": 640, "height": 480}
                                    ).json()["display"]
            pids = desktop_pids(api)
            with counter_xterm(display_name):
                started, t_start = timed_post(api, "/v1/desktop/recording/start", json={})
                rec = started.json()

                def busy_for_a_while() -> bool:
                    info = api.get(f"/v1/desktop/recordings/{rec['id']}").json()
                    return bool(info["frames"] >= 40 and info["durationMs"] >= 2500)

                wait_for(busy_for_a_while, "40 frames of a changing screen", timeout=30)
                os.killpg(server.proc.pid, signal.SIGKILL)
                elapsed = time.monotonic() - t_start
                server.proc.wait(10)
    finally:
        kill_pids(pids)
        server.stop()
    state_dir = server.state_dir
    again = launch_server(tmp_path, "--state-dir", str(state_dir))
    try:
        with again.client() as api:
            listed = api.get("/v1/desktop/recordings").json()["recordings"]
            assert [r["id"] for r in listed] == [rec["id"]]
            found = listed[0]
            assert found["status"] == "interrupted" and found["lastError"], found
            assert found["bytes"] == (state_dir / "recordings" / rec["fileName"]).stat().st_size
            video = download(api, rec["id"], tmp_path / "interrupted.mp4")
            assert last_frame_at(video) >= elapsed - 2.0, (last_frame_at(video), elapsed)
            assert found["durationMs"] == round(float(ffprobe(video)["format"]["duration"]) * 1000)
            assert found["frames"] >= 20, found
            # A new recording on this state directory gets a new id.
            api.post("/v1/desktop/start", json={"displayNum": 280, "width": 640, "height": 480})
            newer = api.post("/v1/desktop/recording/start", json={}).json()
            stop_recording(api)
            assert newer["id"] == f"rec_{int(rec['id'][4:]) + 1}"
            assert api.delete(f"/v1/desktop/recordings/{newer['id']}").status_code == 204
            api.post("/v1/desktop/stop")
    finally:
        again.stop()
    third = launch_server(tmp_path, "--state-dir", str(state_dir))
    try:
        with third.client() as api:
            api.post("/v1/desktop/start", json={"displayNum": 280, "width": 640, "height": 480})
            latest = api.post("/v1/desktop/recording/start", json={}).json()
            stop_recording(api)
            assert latest["id"] == f"rec_{int(newer['id'][4:]) + 1}"  # not reused after delete + restart
            assert api.get(f"/v1/desktop/recordings/{rec['id']}").json()["status"] == "interrupted"
            api.post("/v1/desktop/stop")
    finally:
        third.stop()


def test_full_disk_fails_the_recording_with_a_clear_error(tmp_path: Path) -> None:
    state_dir = tmp_path / "small-state"
    recordings = state_dir / "recordings"
    recordings.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(recordings)],
                             capture_output=True)
    if mounted.returncode != 0 or shutil.which("umount") is None:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace')}")
    server = launch_server(tmp_path)
    try:
        with server.client() as api:
            display_name = api.post("/v1/desktop/start", json={
                "displayNum": 290, "width": 640, "height": 480, "stateDir": str(state_dir)}).json()["display"]
            rec = api.post("/v1/desktop/recording/start", json={}).json()
            assert rec["status"] == "recording", rec
            with counter_xterm(display_name):

                def failed() -> dict[str, Any] | None:
                    info: dict[str, Any] = api.get(f"/v1/desktop/recordings/{rec['id']}").json()
                    return info if info["status"] == "failed" else None

                info = wait_for(failed, "the recording to fail on the full disk", timeout=30)
            assert "No space left on device" in info["lastError"], info
            problem = assert_problem(api.post("/v1/desktop/recording/stop"), 409, "conflict")
            assert "No space left on device" in str(problem["detail"])
            assert api.get("/v1/health").status_code == 200  # the server carries on
            api.post("/v1/desktop/stop")
    finally:
        server.stop()
        subprocess.run(["umount", str(recordings)], check=False)


def top_level_boxes(data: bytes) -> list[tuple[int, bytes, int]]:
    """(offset, type, size) of each top-level MP4 box."""
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[offset:offset + 8])
        boxes.append((offset, kind, size))
        offset += size
    return boxes


def test_catalog_settles_torn_and_orphaned_files(api: httpx.Client, srv: ServerProcess, painter: Painter,
                                                 tmp_path: Path) -> None:
    """What a crash can leave: a video without metadata, cut mid-fragment; metadata without a video."""
    from recording.catalog import Catalog

    rec = api.post("/v1/desktop/recording/start", json={}).json()
    for i in range(40):
        painter.fill((RED, BLUE)[i % 2])
        time.sleep(0.04)
    stop_recording(api)
    whole = (srv.state_dir / "recordings" / rec["fileName"]).read_bytes()
    boxes = top_level_boxes(whole)
    assert [b[1] for b in boxes[:2]] == [b"ftyp", b"moov"] and boxes[-1][1] == b"mfra"
    offset, _, size = [b for b in boxes if b[1] == b"mdat"][-1]
    directory = tmp_path / "recordings"
    directory.mkdir()
    (directory / "rec_7.mp4").write_bytes(whole[:offset + size // 2])  # no mfra, and a torn last fragment
    (directory / "rec_9.json").write_text(json.dumps({"status": "recording", "started_at": "2026-01-01T00:00:00Z"}))
    catalog = Catalog.open(directory)
    torn, lost = catalog.records[7], catalog.records[9]
    assert torn.status == "interrupted" and torn.frames > 0 and torn.last_error
    kept = (directory / "rec_7.mp4").stat().st_size
    assert torn.size == kept and [b[1] for b in top_level_boxes(whole[:kept])][-1] == b"mdat"
    assert kept < offset
    assert abs(torn.duration_ms / 1000 - float(ffprobe(directory / "rec_7.mp4")["format"]["duration"])) < 0.01
    assert lost.status == "failed" and "missing" in str(lost.last_error)
    assert json.loads((directory / "rec_7.json").read_text())["status"] == "interrupted"
    claim = catalog.claim()
    claim.release()
    assert claim.number == 10 and (directory / "last-id").read_text().strip() == "10"


def test_odd_screen_sizes_are_cropped_to_even(tmp_path: Path) -> None:
    """yuv420p needs even sizes: a 641x481 screen records as 640x480 with its colours intact."""
    from recording.encoder import Mp4Writer

    writer = Mp4Writer(tmp_path / "odd.mp4", 641, 481, 30)
    image = bytes((40, 200, 100, 0)) * (641 * 481)  # BGRX of rgb(100, 200, 40)
    writer.write(image, 641, 481, 0)
    writer.write(image, 641, 481, 100)
    writer.finish(500)
    probe = ffprobe(tmp_path / "odd.mp4")
    assert (probe["streams"][0]["width"], probe["streams"][0]["height"]) == (640, 480)
    assert abs(float(probe["format"]["duration"]) - 0.5) < 0.01
    assert close_to(pixel_at(tmp_path / "odd.mp4", 0.2, 639, 479), (100, 200, 40), 6)
