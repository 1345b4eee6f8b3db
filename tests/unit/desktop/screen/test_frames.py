"""The shared capture loop against a real Xvfb: frames on change only, sharing, stop, restart."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from Xlib import X, display

from desktop.screen.frames import FrameSource
from tests.conftest import wait_for

DISPLAY = ":250"


def start_xvfb() -> subprocess.Popen[bytes]:
    # -noreset: without it the server regenerates whenever its last client leaves (the readiness probe, a
    # paint), and a connection made meanwhile is closed; the desktops' Xvfb runs with it too.
    proc = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", "640x480x24", "-nolisten", "tcp", "-noreset"],
                            stderr=subprocess.DEVNULL)

    def answers() -> bool:
        return subprocess.run(["xdpyinfo", "-display", DISPLAY], capture_output=True).returncode == 0

    wait_for(answers, f"Xvfb on {DISPLAY}")
    return proc


@pytest.fixture
def xvfb() -> Iterator[subprocess.Popen[bytes]]:
    proc = start_xvfb()
    yield proc
    proc.kill()
    proc.wait()


def paint(color: int) -> None:
    """Draw a filled rectangle on the root window from an independent client."""
    d = display.Display(DISPLAY)
    root = d.screen().root
    gc = root.create_gc(foreground=color)
    root.fill_rectangle(gc, 10, 10, 100, 100)
    d.sync()
    d.close()


def pixel(frame_data: bytes, width: int, x: int, y: int) -> tuple[int, int, int]:
    offset = (y * width + x) * 4
    b, g, r = frame_data[offset:offset + 3]
    return r, g, b


def test_first_frame_then_only_changes(xvfb: subprocess.Popen[bytes]) -> None:
    async def scenario() -> None:
        source = FrameSource()
        sub = source.subscribe(DISPLAY, 30)
        first = await sub.next(timeout=5)
        assert first is not None and (first.width, first.height) == (640, 480)
        assert len(first.data) == 640 * 480 * 4
        # Nothing drawn: no new frame (an idle screen is not grabbed again).
        assert await sub.next(timeout=0.4) is None
        paint(0xFF0000)
        changed = await sub.next(timeout=5)
        assert changed is not None and changed.seq > first.seq
        assert changed.captured_at > first.captured_at
        assert pixel(changed.data, 640, 50, 50) == (255, 0, 0)
        await sub.close()
        assert not source.running
    asyncio.run(scenario())


def test_subscribers_share_one_loop_at_the_highest_rate(xvfb: subprocess.Popen[bytes]) -> None:
    async def scenario() -> None:
        source = FrameSource()
        slow = source.subscribe(DISPLAY, 5)
        fast = source.subscribe(DISPLAY, 30)
        assert source.fps == 30
        before = {t.name for t in __import__("threading").enumerate() if t.name.startswith("frames-")}
        assert len(before) == 1
        frames = [await fast.next(timeout=5), await slow.next(timeout=5)]
        assert frames[0] is not None and frames[1] is not None and frames[0].seq == frames[1].seq
        await fast.close()
        assert source.fps == 5 and source.running
        await slow.close()
        assert not source.running
    asyncio.run(scenario())


def test_a_slow_consumer_gets_the_latest_frame_not_a_queue(xvfb: subprocess.Popen[bytes]) -> None:
    async def scenario() -> None:
        source = FrameSource()
        sub = source.subscribe(DISPLAY, 60)
        await sub.next(timeout=5)
        for i in range(5):  # five changes while the consumer is busy
            paint(0x010101 * (i + 1) * 40)
            await asyncio.sleep(0.05)
        latest = await sub.next(timeout=5)
        assert latest is not None and pixel(latest.data, 640, 50, 50) == (200, 200, 200)
        assert await sub.next(timeout=0.3) is None  # nothing older left over
        await source.close()
    asyncio.run(scenario())


def test_a_lingering_thread_serves_the_next_subscriber_with_a_new_grab_then_ends(
        xvfb: subprocess.Popen[bytes]) -> None:
    async def scenario() -> None:
        source = FrameSource(linger_s=1.0)
        sub = source.subscribe(DISPLAY, 30)
        first = await sub.next(timeout=5)
        assert first is not None
        threads = {t for t in threading.enumerate() if t.name.startswith("frames-")}
        await sub.close()
        assert source.running and source.latest is None, "the thread lingers; its last frame is not handed out"
        await asyncio.to_thread(paint, 0x0000FF)  # drawn while nobody watched
        again = source.subscribe(DISPLAY, 30)
        frame = await again.next(timeout=2)
        assert frame is not None and frame.seq > first.seq and pixel(frame.data, 640, 50, 50) == (0, 0, 255)
        assert {t for t in threading.enumerate() if t.name.startswith("frames-")} == threads, \
            "the same thread, not a new one"
        await again.close()
        at_once = source.subscribe(DISPLAY, 30)  # back at once, nothing drawn: still a frame, not a wait for damage
        assert (unchanged := await at_once.next(timeout=1)) is not None and unchanged.seq > frame.seq
        await at_once.close()
        await asyncio.sleep(0.5)
        assert source.running, "a new linger began when the second subscriber left"
        deadline = time.monotonic() + 5
        while source.running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not source.running, "the thread ends after its linger"
        third = source.subscribe(DISPLAY, 30)  # a new thread, sequence numbers going on
        later = await third.next(timeout=5)
        assert later is not None and later.seq > unchanged.seq
        await source.close()
        assert not source.running
    asyncio.run(scenario())


def test_capture_resumes_after_the_x_server_restarts() -> None:
    async def scenario() -> None:
        server = start_xvfb()
        source = FrameSource()
        sub = source.subscribe(DISPLAY, 20)
        try:
            first = await sub.next(timeout=5)
            assert first is not None
            server.kill()
            server.wait()
            await asyncio.sleep(0.3)
            server = await asyncio.to_thread(start_xvfb)
            await asyncio.to_thread(paint, 0x00FF00)
            deadline = time.monotonic() + 10
            frame = None
            while time.monotonic() < deadline:
                frame = await sub.next(timeout=1)
                if frame is not None and pixel(frame.data, 640, 50, 50) == (0, 255, 0):
                    break
                await asyncio.to_thread(paint, 0x00FF00)
            assert frame is not None and frame.seq > first.seq
        finally:
            await source.close()
            server.kill()
            server.wait()
    asyncio.run(scenario())


def test_bad_rate_is_refused() -> None:
    async def scenario() -> None:
        with pytest.raises(ValueError, match="fps"):
            FrameSource().subscribe(DISPLAY, 0)
    asyncio.run(scenario())
    assert X.NONE == 0
