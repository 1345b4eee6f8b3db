"""A long drag against a real Xvfb: status stays answerable, other input waits for the release,
and a drag whose client goes away still releases its button.

xprobe (an independent X client) records the events its window receives, in the order the X server
delivered them; python-xlib reads the pointer's button state from outside the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from Xlib import X
from Xlib import display as xdisplay

from desktop.x11.thread import InputLock
from tests.conftest import ServerProcess, managed_probe
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 450, "width": 1280, "height": 800}
START, END = (120, 120), (420, 320)


@pytest.fixture
def probe(display: str, tmp_path: Path) -> Iterator[Probe]:
    p = Probe(display, tmp_path / "events.jsonl", "400x300+100+100")
    yield p
    p.close()


Send = Callable[..., Future[httpx.Response]]


@pytest.fixture
def background(srv: ServerProcess) -> Iterator[Send]:
    """`send(method, path, **kwargs)`: a request from a thread and a client of its own, answered later."""
    with contextlib.ExitStack() as clients, ThreadPoolExecutor(4) as pool:
        def send(method: str, path: str, **kwargs: Any) -> Future[httpx.Response]:
            client = clients.enter_context(srv.client())
            return pool.submit(client.request, method, path, **kwargs)

        yield send


def drag_body(start: tuple[int, int], end: tuple[int, int], **extra: int) -> dict[str, int]:
    return {"startX": start[0], "startY": start[1], "endX": end[0], "endY": end[1], "steps": 60,
            "durationMs": 3000, **extra}


def index(events: list[dict[str, Any]], kind: str, button: int | None = None) -> int:
    return next(i for i, e in enumerate(events) if e["type"] == kind and (button is None or e["button"] == button))


def buttons_down(display: str) -> int:
    d = xdisplay.Display(display)
    try:
        return int(d.screen().root.query_pointer().mask) & (X.Button1Mask | X.Button2Mask | X.Button3Mask)
    finally:
        d.close()


def test_status_and_screenshots_answer_while_a_drag_runs(api: httpx.Client, probe: Probe, background: Send) -> None:
    drag = background("POST", "/v1/desktop/mouse/drag", json=drag_body(START, END))
    assert probe.wait_for(lambda e: e["type"] == "ButtonPress"), "the drag never pressed its button"
    status = api.get("/v1/desktop/status")
    status_first = not drag.done()
    shot = api.get("/v1/desktop/screenshot/region", params={"x": 0, "y": 0, "width": 200, "height": 100})
    shot_first = not drag.done()
    windows = api.get("/v1/desktop/windows")
    windows_first = not drag.done()
    assert drag.result().status_code == 200
    assert status.status_code == 200 and status.json()["state"] == "active"
    assert shot.status_code == 200 and windows.status_code == 200
    # Each answer came while the drag request was still pending: none waited for the drag to end.
    assert (status_first, shot_first, windows_first) == (True, True, True)


def test_input_sent_during_a_drag_is_applied_after_its_release(api: httpx.Client, display: str, tmp_path: Path,
                                                               background: Send) -> None:
    # A managed window: the drag's press goes through click-to-focus, and the key goes to the window.
    with managed_probe(api, display, tmp_path / "events.jsonl", "drag-target") as (target, rect):
        x, y = rect["x"], rect["y"]
        start, end = (x + 20, y + 20), (x + 320, y + 220)
        drag = background("POST", "/v1/desktop/mouse/drag", json=drag_body(start, end))
        assert target.wait_for(lambda e: e["type"] == "ButtonPress"), "the drag never pressed its button"
        click = background("POST", "/v1/desktop/mouse/click", json={"x": x + 50, "y": y + 300, "button": "right"})
        key = background("POST", "/v1/desktop/keyboard/press", json={"key": "a"})
        batch = api.post("/v1/desktop/actions", json={"actions": [
            {"type": "click", "x": x + 60, "y": y + 310, "button": "middle"}]})
        for answer in (drag.result(), click.result(), key.result(), batch):
            assert answer.status_code == 200 and "error" not in answer.json(), answer.text
        target.wait_for(lambda e: e["type"] == "ButtonRelease" and e["button"] in (2, 3), count=2)
        target.wait_for(lambda e: e["type"] == "KeyPress")
        events = target.events()
    press, release = index(events, "ButtonPress", 1), index(events, "ButtonRelease", 1)
    # Nothing of the click, the key or the batch inside the drag: only its own motion, button held.
    during = events[press + 1:release]
    assert during and all(e["type"] == "MotionNotify" and e["state"] & X.Button1Mask for e in during), during
    assert (events[press]["rootX"], events[press]["rootY"], events[release]["rootX"], events[release]["rootY"]) \
        == (*start, *end)
    assert release < index(events, "ButtonPress", 3) < index(events, "ButtonRelease", 3)
    assert release < index(events, "ButtonPress", 2) < index(events, "ButtonRelease", 2)
    assert release < index(events, "KeyPress")
    assert (events[index(events, "ButtonPress", 3)]["rootX"], events[index(events, "ButtonPress", 2)]["rootX"]) \
        == (x + 50, x + 60)


def test_a_drag_whose_client_disconnects_releases_its_button(srv: ServerProcess, api: httpx.Client, display: str,
                                                             probe: Probe) -> None:
    body = json.dumps(drag_body(START, END, durationMs=20_000, steps=200)).encode()
    url = urlsplit(srv.url)
    head = (f"POST /v1/desktop/mouse/drag HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {srv.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((url.hostname, url.port)) as raw:
        raw.sendall(head + body)
        assert probe.wait_for(lambda e: e["type"] == "ButtonPress"), "the drag never pressed its button"
        assert buttons_down(display) == X.Button1Mask
    # The connection is closed 20 s before the drag would end: it stops where it is and lets go.
    released = probe.wait_for(lambda e: e["type"] == "ButtonRelease", timeout=10)
    assert released and released[0]["button"] == 1
    assert (released[0]["rootX"], released[0]["rootY"]) != END
    assert buttons_down(display) == 0
    # Nothing holds the input lock any more: the next action runs at once, not after the 20 s.
    began = time.monotonic()
    clicked = api.post("/v1/desktop/mouse/click", json={"x": 200, "y": 200})
    assert clicked.status_code == 200 and time.monotonic() - began < 10
    assert probe.wait_for(lambda e: e["type"] == "ButtonRelease", count=2)


def test_a_batch_drag_is_the_rest_drag(api: httpx.Client, display: str, probe: Probe) -> None:
    """One drag path (desktop/input/mouse.py): a short two-point path still moves in two points, and the action
    log holds one `drag` entry, not a press, a move a point and a release."""
    since = api.get("/v1/desktop/actions/log").json()["entries"][-1:] or [{"seq": 0}]
    start, end = (150, 150), (180, 160)
    answer = api.post("/v1/desktop/actions", json={"actions": [
        {"type": "drag", "path": [{"x": start[0], "y": start[1]}, {"x": end[0], "y": end[1]}], "durationMs": 50}]})
    assert answer.status_code == 200 and "error" not in answer.json(), answer.text
    assert (answer.json()["results"][0]["x"], answer.json()["results"][0]["y"]) == end
    probe.wait_for(lambda e: e["type"] == "ButtonRelease")
    events = probe.events()
    press, release = index(events, "ButtonPress", 1), index(events, "ButtonRelease", 1)
    assert (events[press]["rootX"], events[press]["rootY"], events[release]["rootX"], events[release]["rootY"]) \
        == (*start, *end)
    motion = [(e["rootX"], e["rootY"]) for e in events[press + 1:release] if e["type"] == "MotionNotify"]
    assert motion == [(165, 155), end], motion
    entries = api.get("/v1/desktop/actions/log", params={"since": since[0]["seq"]}).json()["entries"]
    assert [(e["source"], e["kind"], e["x"], e["y"], e["endX"], e["endY"]) for e in entries] \
        == [("batch", "drag", *start, *end)], entries
    assert buttons_down(display) == 0


def test_the_input_lock_lets_its_holder_in_again_and_others_in_arrival_order() -> None:
    async def run() -> list[str]:
        lock, order = InputLock(), []

        async def other(name: str) -> None:
            async with lock:
                order.append(name)

        async with lock:
            async with lock:  # a batch step calling a mouse method, which takes the lock too
                waiting = [asyncio.create_task(other(name)) for name in ("first", "second")]
                await asyncio.sleep(0.05)
                order.append("holder")
            assert lock.held() and order == ["holder"]
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(run()) == ["holder", "first", "second"]
