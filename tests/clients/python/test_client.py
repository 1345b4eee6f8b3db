"""The Python client (sandbox_desktop_client), sync and async, against a live server with a desktop."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_desktop_client import ApiError, AsyncClient, Client, NotFoundError, Screenshot
from tests.conftest import REPO, ServerProcess, wait_for
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 324, "width": 1024, "height": 768}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def desk(srv: ServerProcess) -> Iterator[Client]:
    with Client(srv.url, token=srv.token) as client:
        yield client


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC, data[:16]
    width, height = struct.unpack(">II", data[16:24])  # IHDR is always the first chunk
    return width, height


def assert_frame_matches_image(shot: Screenshot) -> None:
    assert png_size(shot.data) == (shot.image_width, shot.image_height)
    assert shot.media_type == "image/png"


def test_import_loads_no_server_dependencies() -> None:
    code = ("import sys, sandbox_desktop_client; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'Xlib', 'av', 'aiortc', 'starlette', 'mss', 'PIL', 'desktop', 'streaming', 'recording'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_status_start_and_token(desk: Client, srv: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    assert desk.health() == "ok"
    status = desk.status()
    assert status.state == "active" and status.resolution is not None
    assert (status.resolution.width, status.resolution.height) == (1024, 768)
    again = desk.start(width=1024, height=768, dpi=96)  # idempotent while active
    assert again.state == "active" and again.display == status.display
    assert desk.display_info().display == status.display
    monkeypatch.setenv("SANDBOX_DESKTOP_TOKEN", srv.token or "")
    with Client(srv.url) as from_env:
        assert from_env.status().state == "active"
    with Client(srv.url, token="wrong") as bad, pytest.raises(ApiError) as caught:
        bad.status()
    assert caught.value.status == 401 and caught.value.problem["status"] == 401


def test_screenshot_frame_matches_headers(desk: Client) -> None:
    full = desk.screenshot()
    assert_frame_matches_image(full)
    assert (full.screen_width, full.screen_height) == (1024, 768)
    assert full.region == (0, 0, 1024, 768) and (full.image_width, full.image_height) == (1024, 768)
    desk.move(300, 200)
    part = desk.screenshot(region=(100, 50, 400, 300), scale=0.5, show_cursor=True)
    assert_frame_matches_image(part)
    assert part.region == (100, 50, 400, 300) and (part.image_width, part.image_height) == (200, 150)
    assert part.scale == 0.5 and part.cursor == (300, 200)
    assert part.to_screen(0, 0) == (101, 51) and part.to_screen(199, 149) == (499, 349)
    jpeg = desk.screenshot(format="jpeg", quality=50)
    assert jpeg.data[:3] == b"\xff\xd8\xff" and jpeg.media_type == "image/jpeg"


def test_click_and_type_reach_an_x_client(desk: Client, tmp_path: Path) -> None:
    title = f"client-probe-{time.monotonic_ns()}"
    probe = Probe(desk.display_info().display, tmp_path / "events.jsonl", "300x200+200+200",
                  override_redirect=False, title=title)
    try:
        window = wait_for(lambda: next((w for w in desk.windows() if w.title == title), None), "the probe window")
        focused = desk.focus(window.id)
        assert focused.id == window.id and desk.focused_window().id == window.id
        at = desk.click(window.x + 20, window.y + 30, button="right")
        assert at.window == window.id
        clicks = probe.wait_for(lambda e: e["type"] == "ButtonPress")
        assert clicks and (clicks[0]["button"], clicks[0]["x"], clicks[0]["y"]) == (3, 20, 30)
        desk.type_text("ab")
        desk.press("c", shift=True)
        keys = probe.wait_for(lambda e: e["type"] == "KeyPress", count=4)
        syms = [e["keysym"] for e in keys]
        assert syms[:2] == [ord("a"), ord("b")] and ord("C") in syms, syms
    finally:
        probe.close()


def test_clipboard_round_trip_seen_by_xclip(desk: Client) -> None:
    text = "héllo ✓ from the client"
    desk.set_clipboard(text)
    assert desk.clipboard() == text
    env = dict(os.environ, DISPLAY=desk.display_info().display)
    seen = subprocess.run(["xclip", "-selection", "clipboard", "-o"], env=env, capture_output=True, timeout=10)
    assert seen.stdout.decode() == text
    desk.set_clipboard("primary text", selection="primary")
    assert desk.clipboard(selection="primary") == "primary text"


def test_recording_downloaded_to_a_file(desk: Client, tmp_path: Path) -> None:
    started = desk.start_recording(fps=10)
    assert started.status == "recording"
    for i in range(5):
        desk.move(100 + 50 * i, 100)
        time.sleep(0.1)
    done = desk.stop_recording()
    assert done.id == started.id and done.status == "completed"
    assert started.id in [r.id for r in desk.recordings()]
    assert desk.recording(started.id).bytes == done.bytes
    seen: list[tuple[int, int | None]] = []
    path = desk.download_recording(started.id, tmp_path / "out.mp4", progress=lambda n, t: seen.append((n, t)),
                                   chunk_size=512)
    data = path.read_bytes()
    assert data[4:8] == b"ftyp" and len(data) == done.bytes
    assert seen[-1] == (len(data), len(data)) and len(seen) == -(-len(data) // 512)  # one call per chunk
    desk.delete_recording(started.id)
    with pytest.raises(NotFoundError) as caught:
        desk.recording(started.id)
    assert caught.value.status == 404
    with pytest.raises(NotFoundError):
        desk.download_recording(started.id, tmp_path / "gone.mp4")
    assert not (tmp_path / "gone.mp4").exists()


def test_unknown_window_raises_api_error(desk: Client) -> None:
    with pytest.raises(ApiError) as caught:
        desk.focus("999999999")
    error = caught.value
    assert (error.status, error.code) == (404, "window_not_found") and isinstance(error, NotFoundError)
    assert error.problem["code"] == "window_not_found" and error.detail and "999999999" in error.detail


def test_actions_run_and_processes(desk: Client) -> None:
    result = desk.actions([{"type": "move", "x": 40, "y": 50}, {"type": "cursor_position"}],
                          screenshot={"format": "png", "scale": 0.5})
    assert result.error is None and (result.results[-1].x, result.results[-1].y) == (40, 50)
    assert result.screenshot is not None and result.screenshot.frame.image_width == 512
    ran = desk.run("sh", ["-c", "echo out; echo err >&2; exit 3"], timeout_ms=5000)
    assert (ran.exit_code, ran.stdout, ran.stderr, ran.timed_out) == (3, "out\n", "err\n", False)
    assert {p.owner for p in desk.processes(owner="desktop")} == {"desktop"}


def test_files_and_commands_of_the_server_and_of_a_desktop(desk: Client, tmp_path: Path) -> None:
    """The client's own are the server's (the machine's); a handle's are its desktop's, inside its sandbox."""
    desk.write_file(str(tmp_path / "server.txt"), b"the machine's")
    assert (tmp_path / "server.txt").read_bytes() == b"the machine's" == desk.read_file(str(tmp_path / "server.txt"))
    with desk.desktops.create(width=320, height=240) as desktop:
        written = desktop.write_file("~/notes/a.txt", b"hello")
        assert written.bytes_written == 5 and written.path.endswith("/notes/a.txt")
        assert desktop.read_file("~/notes/a.txt") == b"hello"
        assert [e.name for e in desktop.list_files("~/notes")] == ["a.txt"]
        assert desktop.stat("~/notes/a.txt").size == 5
        assert desktop.move_file("~/notes/a.txt", "~/notes/b.txt").to.endswith("/notes/b.txt")
        desktop.make_directory("~/empty")
        assert {e.name for e in desktop.list_files()} >= {"notes", "empty"}
        # The same file from a command inside it, run as its own user from its HOME.
        ran = desktop.run("sh", ["-c", "cat notes/b.txt; echo; id -u"])
        text, uid = ran.stdout.splitlines()
        assert text == "hello" and uid != str(os.getuid())
        assert "Xvfb" in {p.command for p in desktop.processes()}  # its own desktop's processes
        desktop.delete_file("~/notes", recursive=True)
        with pytest.raises(NotFoundError):
            desktop.read_file("~/notes/b.txt")
        # The machine's /tmp is not in its view (pytest's basetemp is shared with desktops on purpose).
        machine_only = f"/tmp/only-the-machine-{uuid.uuid4().hex}.txt"
        desk.write_file(machine_only, b"x")
        try:
            with pytest.raises(NotFoundError):
                desktop.read_file(machine_only)
        finally:
            desk.delete_file(machine_only)


def test_async_client(srv: ServerProcess, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncClient(srv.url, token=srv.token) as desk:
            status, shot = await asyncio.gather(desk.status(), desk.screenshot(scale=0.25))
            assert status.state == "active"
            assert_frame_matches_image(shot)
            assert (shot.image_width, shot.image_height) == (256, 192)
            moved = await desk.move(123, 45)
            assert (moved.x, moved.y) == (123, 45) == ((await desk.mouse_position()).x, 45)
            await desk.set_clipboard("async ✓")
            assert await desk.clipboard() == "async ✓"
            with pytest.raises(ApiError) as caught:
                await desk.move_window("999999999", 0, 0)
            assert caught.value.code == "window_not_found"
            rec = await desk.start_recording()
            await desk.move(200, 200)
            await asyncio.sleep(0.3)
            await desk.stop_recording()
            path = await desk.download_recording(rec.id, tmp_path / "async.mp4")
            assert path.read_bytes()[4:8] == b"ftyp"
            await desk.delete_recording(rec.id)

    asyncio.run(scenario())
