"""Takeover (docs/control.md): agent input while a person holds control through the live view.

A real aiortc viewer takes over; the agent's calls go through the real REST, batch and vendor endpoints.
`refuse` (the default) answers 409 `desktop_controlled_by_viewer` naming the person; `queue` holds the
call until the person releases control, bounded by `Prefer: wait=N`. The live view's own input is never
held, and the action log says who did what.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from Xlib import XK

from desktop.control.takeover import ControlledByViewer, TakeoverGate
from desktop.events.action_log import acting_as, action_wait
from desktop.x11.thread import InputLock
from sandbox_desktop_wire.enums import ActionSource, TakeoverMode
from streaming.viewer import Viewer
from tests.conftest import ServerProcess, assert_problem, poll, run, running_server

PORTS = (59530, 59545)
DESKTOP = {"displayNum": 614, "width": 800, "height": 600, "streamVideoCodec": "h264",
           "webrtcPortRange": f"{PORTS[0]}-{PORTS[1]}"}
QUEUE_DESKTOP = {**DESKTOP, "displayNum": 616, "webrtcPortRange": "59546-59560"}
OPENAI_CLICK = {"call": {"type": "computer_call", "call_id": "c1", "status": "completed", "pending_safety_checks": [],
                         "actions": [{"type": "click", "button": "left", "x": 700, "y": 500}]}}




def takeover(viewer: Viewer) -> bool:
    """Whether the last `control/takeover` this viewer got says a person holds the desktop."""
    states = viewer.events_named("control/takeover")
    return bool(states and states[-1]["active"])


# -- the gate alone ----------------------------------------------------------------------------------

def test_the_gate_refuses_queues_or_shares_agent_input_but_never_the_live_view() -> None:
    async def scenario() -> None:
        lock = InputLock()
        gate = TakeoverGate(TakeoverMode.REFUSE)
        async with gate.admitted(lock):  # nobody holds the desktop
            pass
        gate.hold("pat")
        with pytest.raises(ControlledByViewer) as refused:
            async with gate.admitted(lock):
                pass
        assert refused.value.extensions == {"controller": "pat"} and not lock.held()
        with acting_as(ActionSource.STREAM):  # the live view's own input
            async with gate.admitted(lock):
                pass
        gate.mode = TakeoverMode.SHARE
        async with gate.admitted(lock):
            pass

        gate.mode = TakeoverMode.QUEUE
        entered: list[float] = []

        async def agent() -> None:
            async with gate.admitted(lock):
                entered.append(asyncio.get_running_loop().time())
        waiting = asyncio.create_task(agent())
        await asyncio.sleep(0.2)
        assert not entered
        async with lock:  # the person's input is not stuck behind the queued action
            pass
        released = asyncio.get_running_loop().time()
        gate.hold(None)
        await asyncio.wait_for(waiting, 2)
        assert entered[0] - released < 0.05

        gate.hold("pat")
        token = action_wait.set(0.3)  # the request's `Prefer: wait=0.3`
        try:
            started = asyncio.get_running_loop().time()
            with pytest.raises(ControlledByViewer):
                async with gate.admitted(lock):
                    pass
            assert 0.25 <= asyncio.get_running_loop().time() - started < 1
        finally:
            action_wait.reset(token)
        async with lock:  # inside a batch (the lock held): a queued step cannot wait without blocking pat
            with pytest.raises(ControlledByViewer, match="batch"):
                async with gate.admitted(lock):
                    pass
    run(scenario, 10)


# -- against the server ------------------------------------------------------------------------------

def test_refuse_names_the_person_and_lets_the_agent_in_after_release(srv: ServerProcess, api: httpx.Client,
                                                                     streaming: None) -> None:
    def agent_move(x: int) -> httpx.Response:
        return api.post("/v1/desktop/mouse/move", json={"x": x, "y": 20})

    async def scenario() -> None:
        pat = Viewer(srv.url, srv.token, name="pat")  # asks for control at connect, as the SDK does
        try:
            await pat.connect()
            await poll(lambda: api.get("/v1/desktop/stream/status").json().get("controller") == "pat", "control")
            # Control asked for at connect is not a takeover: the agent keeps working while pat only watches.
            assert (await asyncio.to_thread(agent_move, 10)).status_code == 200
            pat.key(XK.XK_Shift_L, True)  # pat's first key: pat holds the desktop from now on
            pat.key(XK.XK_Shift_L, False)
            await poll(lambda: takeover(pat), "the takeover")

            refused = await asyncio.to_thread(agent_move, 11)
            problem = assert_problem(refused, 409, "desktop_controlled_by_viewer")
            assert problem["controller"] == "pat" and "pat" in str(problem["detail"])
            typed = await asyncio.to_thread(api.post, "/v1/desktop/keyboard/type", json={"text": "no"})
            assert assert_problem(typed, 409, "desktop_controlled_by_viewer")["controller"] == "pat"
            # A batch is admitted (or refused) whole, before its first step: nothing of it ran.
            batch = await asyncio.to_thread(api.post, "/v1/desktop/actions",
                                            json={"actions": [{"type": "move", "x": 12, "y": 20}]})
            assert assert_problem(batch, 409, "desktop_controlled_by_viewer")["controller"] == "pat"
            vendor = await asyncio.to_thread(api.post, "/v1/desktop/openai/computer", json=OPENAI_CLICK)
            assert assert_problem(vendor, 409, "desktop_controlled_by_viewer")["controller"] == "pat"
            # pat's own input still goes through.
            pat.move(300, 300)
            await poll(lambda: api.get("/v1/desktop/mouse/position").json()["x"] == 300, "pat's pointer move")

            await pat.release()
            await poll(lambda: not takeover(pat), "control handed back")
            assert (await asyncio.to_thread(agent_move, 13)).status_code == 200
        finally:
            await pat.close()
    run(scenario)

    entries = api.get("/v1/desktop/actions/log").json()["entries"]
    story = [(e["source"], e["kind"], e.get("x"), e.get("takeover")) for e in entries
             if e["kind"] in ("move", "control") and (e["kind"] == "control" or e["x"] in (10, 13, 300))]
    assert story == [("stream", "control", None, False), ("rest", "move", 10, None),
                     ("stream", "control", None, True), ("stream", "move", 300, None),
                     ("stream", "control", None, False), ("rest", "move", 13, None)], story


@pytest.fixture(scope="module")
def queue_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("takeover_queue"), "--takeover", "queue",
                        desktop=QUEUE_DESKTOP) as server:
        with server.client() as api:
            status = api.post("/v1/desktop/stream/start").json()
            assert status.get("takeoverMode") == "queue", f"--takeover queue did not reach the live view: {status}"
        yield server


def test_queue_holds_the_agent_until_release(queue_server: ServerProcess, tmp_path: Path) -> None:
    answers: list[tuple[float, httpx.Response]] = []

    def agent_click(prefer: str | None = None) -> None:
        with queue_server.client(timeout=60) as api:
            headers = {"Prefer": prefer} if prefer else {}
            answer = api.post("/v1/desktop/mouse/click", json={"x": 700, "y": 500}, headers=headers)
            answers.append((time.monotonic(), answer))

    async def scenario() -> None:
        sam = Viewer(queue_server.url, queue_server.token, name="sam", request_control=False)
        try:
            await sam.connect()
            await sam.request(takeover=True)  # the inspector's "Take control": holds the desktop at once
            await poll(lambda: takeover(sam), "the takeover")
            agent = threading.Thread(target=agent_click)
            agent.start()
            await asyncio.sleep(1.0)
            assert not answers, "the agent's click must wait while sam holds the desktop"
            released = time.monotonic()
            await sam.release()
            await poll(lambda: answers, "the agent's click after the release")
            agent.join(5)
            done, answer = answers.pop()
            assert answer.status_code == 200, answer.text
            print(f"\nqueued agent click answered {1000 * (done - released):.0f} ms after the release was sent")

            # A wait shorter than the person's hold ends in the same 409, after that wait.
            await sam.request(takeover=True)
            await poll(lambda: takeover(sam), "the second takeover")
            started = time.monotonic()
            await asyncio.to_thread(agent_click, "wait=1")
            done, answer = answers.pop()
            assert assert_problem(answer, 409, "desktop_controlled_by_viewer")["controller"] == "sam"
            assert 0.9 <= done - started < 5, done - started
        finally:
            await sam.close()
    run(scenario)
