"""Approvals (docs/approvals.md): agent actions of held kinds wait for a person's decision, against a real server
started with `--approve pointer,type` and a real desktop; effects are checked with a separate X client
(tests/support/xprobe.py) that records the input it receives, and in the inspector page in a real Chromium."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.operations import PREFER_WAIT_MAX_S, prefer_wait
from desktop.control.approvals import ApprovalBook, ApprovalNotFound, Venue
from desktop.events import action_log as logged
from desktop.events.action_log import ActionLog
from desktop.events.bus import EventBus
from sandbox_desktop_wire.approvals import ActionKind, ApprovalStatus, Decision, ProposedAction, ProposedStep
from sandbox_desktop_wire.enums import ActionSource
from tests.conftest import ServerProcess, assert_problem, managed_probe, running_server, wait_for
from tests.support import inspector_fixtures as shared
from tests.support.browser import Browser, Page, chromium_path
from tests.support.inspector_fixtures import click_at
from tests.support.xprobe import Probe

DESKTOP = {"displayNum": 377, "width": 1024, "height": 768}
TIMEOUT_S = 30
WAIT_S = 15.0


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server holding pointer and typing actions (any Host: the inspector test's browser reaches it too)."""
    with running_server(tmp_path_factory.mktemp("approvals"), "--approve", "pointer,type",
                        "--approval-timeout", str(TIMEOUT_S), "--allowed-host", "*", desktop=DESKTOP) as server:
        yield server


@pytest.fixture(scope="module")
def agent(srv: ServerProcess) -> Iterator[Callable[..., Future[httpx.Response]]]:
    """Sends a request as the agent, in the background: its answer comes once a person decides."""
    with srv.client(timeout=60) as client, ThreadPoolExecutor(4) as pool:
        def send(method: str, path: str, **kwargs: Any) -> Future[httpx.Response]:
            return pool.submit(client.request, method, path, **kwargs)
        yield send


@pytest.fixture
def probe(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[tuple[Probe, dict[str, Any]]]:
    with managed_probe(api, display, tmp_path / "probe.jsonl", f"approvals-{time.monotonic_ns()}",
                       geometry="400x300+200+150") as found:
        yield found


def pending(api: httpx.Client, count: int = 1, desktop: str | None = None) -> list[dict[str, Any]]:
    """The pending approvals once there are `count` of them."""
    params = {"status": "pending", **({"desktopId": desktop} if desktop else {})}
    found: list[dict[str, Any]] = wait_for(lambda: (lambda a: a if len(a) >= count else None)(
        api.get("/v1/approvals", params=params).json()["approvals"]), f"{count} pending approval(s)")
    return found


def decide(api: httpx.Client, approval_id: str, decision: str, message: str | None = None) -> dict[str, Any]:
    response = api.post(f"/v1/approvals/{approval_id}", json={"decision": decision, "message": message})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def presses(probe: Probe) -> list[dict[str, Any]]:
    return probe.events("ButtonPress")


# -- a held click ----------------------------------------------------------------------------------

def test_click_waits_for_approval_then_lands(api: httpx.Client, agent: Any, probe: tuple[Probe, dict]) -> None:
    window, rect = probe
    x, y = rect["x"] + 40, rect["y"] + 30
    answer = agent("POST", "/v1/desktop/mouse/click", json={"x": x, "y": y})
    [held] = pending(api)
    assert held["status"] == "pending" and held["source"] == "rest" and held["desktopId"] == "default"
    action = held["action"]
    assert action["operation"] == "POST /v1/desktop/mouse/click" and action["kinds"] == ["pointer"]
    assert action["steps"] == [{"kind": "pointer", "type": "click", "x": x, "y": y, "button": "left", "count": 1}]
    assert action["screen"] == {"width": 1024, "height": 768}
    assert api.get(f"/v1/approvals/{held['id']}").json() == held
    time.sleep(0.3)
    assert not answer.done() and presses(window) == []  # nothing ran while it waits

    decided = decide(api, held["id"], "approve")
    assert decided["status"] == "approved" and decided["decidedBy"] == "admin" and "decidedAt" in decided
    response = answer.result(WAIT_S)
    assert response.status_code == 200 and response.json()["x"] == x
    [press] = window.wait_for(lambda e: e["type"] == "ButtonPress")
    assert (press["rootX"], press["rootY"]) == (x, y)
    log = api.get("/v1/desktop/actions/log").json()["entries"]
    record = next(e for e in reversed(log) if e["kind"] == "approval" and e["approvalId"] == held["id"])
    assert record["status"] == "approved" and record["decidedBy"] == "admin" and record["source"] == "rest"
    assert log[-1]["kind"] == "click" and log[-1]["source"] == "rest" and log[-1]["seq"] > record["seq"]


def test_denied_click_answers_the_message_and_does_not_happen(api: httpx.Client, agent: Any,
                                                              probe: tuple[Probe, dict]) -> None:
    window, rect = probe
    answer = agent("POST", "/v1/desktop/mouse/click", json={"x": rect["x"] + 10, "y": rect["y"] + 10})
    [held] = pending(api)
    decided = decide(api, held["id"], "deny", "wrong window: open Settings first")
    assert decided["status"] == "denied" and decided["message"] == "wrong window: open Settings first"
    problem = assert_problem(answer.result(WAIT_S), 403, "action_denied")
    assert problem["message"] == "wrong window: open Settings first"
    assert "wrong window: open Settings first" in str(problem["detail"]) and problem["approvalId"] == held["id"]
    time.sleep(0.3)  # a click that ran would have reached the window by now
    assert presses(window) == []
    log = api.get("/v1/desktop/actions/log").json()["entries"]
    assert not any(e["kind"] == "click" and e.get("x") == rect["x"] + 10 for e in log)


def test_events_tell_requests_and_decisions(api: httpx.Client, agent: Any) -> None:
    since = api.get("/v1/desktop/events", params={"follow": "false", "types": "approval."})
    last = max([int(line[4:]) for line in since.text.splitlines() if line.startswith("id: ")], default=0)
    answer = agent("POST", "/v1/desktop/keyboard/type", json={"text": "hello"})
    [held] = pending(api)
    assert held["action"]["steps"] == [{"kind": "type", "type": "type", "text": "hello", "textLength": 5}]
    decide(api, held["id"], "approve")
    assert answer.result(WAIT_S).status_code == 200
    stream = api.get("/v1/desktop/events", params={"follow": "false", "types": "approval.", "since": last})
    events = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: ")]
    assert [(e["type"], e["id"]) for e in events] == [("approval.requested", held["id"]),
                                                      ("approval.decided", held["id"])]
    assert events[0]["action"]["summary"] == "type 'hello'" and events[0]["status"] == "pending"
    assert events[1]["status"] == "approved" and events[1]["decidedBy"] == "admin"


def test_prefer_wait_bounds_the_wait_and_expires(api: httpx.Client, agent: Any) -> None:
    started = time.monotonic()
    response = api.post("/v1/desktop/mouse/move", json={"x": 5, "y": 5}, headers={"Prefer": "wait=1"})
    elapsed = time.monotonic() - started
    problem = assert_problem(response, 403, "approval_expired")
    assert 0.9 < elapsed < 10, elapsed
    expired = api.get(f"/v1/approvals/{problem['approvalId']}").json()
    assert expired["status"] == "expired" and "decidedBy" not in expired
    assert_problem(api.post(f"/v1/approvals/{expired['id']}", json={"decision": "approve"}), 409,
                   "approval_already_decided")
    # Without a preference the server's --approval-timeout applies.
    answer = agent("POST", "/v1/desktop/mouse/move", json={"x": 6, "y": 6})
    [held] = pending(api)
    created, expires = (datetime.fromisoformat(held[k]) for k in ("createdAt", "expiresAt"))
    assert (expires - created).total_seconds() == TIMEOUT_S
    decide(api, held["id"], "approve")
    assert answer.result(WAIT_S).status_code == 200


def test_prefer_wait_parsing() -> None:
    assert prefer_wait([(b"prefer", b"wait=7")]) == 7
    assert prefer_wait([(b"prefer", b"respond-async, WAIT = 3 ; x=y")]) == 3
    assert prefer_wait([(b"prefer", b'wait="12"')]) == 12
    assert prefer_wait([(b"prefer", b"wait=" + b"9" * 5000)]) == PREFER_WAIT_MAX_S
    assert prefer_wait([(b"prefer", b"handling=lenient")]) is None
    assert prefer_wait([(b"prefer", b"wait=0007")]) == 7
    for ignored in (b"wait=-1", b"wait=1.5", b"wait=soon", b"wait=", b"wait=" + b"1" * 20 + b"x", b"wait=\xd9\xa1"):
        assert prefer_wait([(b"prefer", ignored)]) is None, ignored
    assert prefer_wait([(b"accept", b"wait=3")]) is None


def test_the_book_keeps_pending_ones_and_a_bounded_history() -> None:
    async def scenario() -> None:
        book, bus, log = ApprovalBook(history=2), EventBus(), ActionLog()
        events = bus.subscribe()
        venue = Venue("default", bus, log)
        action = ProposedAction(operation="POST /v1/desktop/keyboard/press", kinds=[ActionKind.KEY],
                                steps=[ProposedStep(kind=ActionKind.KEY, type="key", keys="a")], summary="press a")
        waiting = [asyncio.create_task(book.hold(venue, action, ActionSource.REST, 30)) for _ in range(5)]
        for _ in range(100):
            if len(book.list(ApprovalStatus.PENDING)) == 5:
                break
            await asyncio.sleep(0.01)
        ids = [r.id for r in book.list(ApprovalStatus.PENDING)]
        assert len(ids) == 5
        for approval_id in ids[:4]:
            book.decide(approval_id, Decision.APPROVE, None, "tester")
        await asyncio.gather(*waiting[:4])
        # The oldest decided are forgotten; the pending one stays, listed first.
        assert [r.id for r in book.list()] == [ids[4], ids[3], ids[2]]
        with pytest.raises(ApprovalNotFound):
            book.get(ids[0])
        waiting[4].cancel()  # the agent's request ended: its approval expires
        await asyncio.gather(waiting[4], return_exceptions=True)
        assert book.get(ids[4]).status is ApprovalStatus.EXPIRED and book.pending_count == 0
        seen = []
        while (event := await events.next(timeout=0.1)) is not None:
            seen.append((str(getattr(event, "type", "")), event.to_wire().get("id")))
        assert seen.count(("approval.requested", ids[0])) == 1 and seen.count(("approval.decided", ids[0])) == 1
        assert len(seen) == 10
        assert [e.action.decided_by for e in log.entries() if isinstance(e.action, logged.Approval)] == ["tester"] * 4

    asyncio.run(scenario())


# -- what is held ----------------------------------------------------------------------------------

def test_kinds_not_in_the_policy_run_at_once(api: httpx.Client) -> None:
    before = len(api.get("/v1/approvals").json()["approvals"])
    assert api.post("/v1/desktop/keyboard/press", json={"key": "shift"}, timeout=5).status_code == 200
    batch = api.post("/v1/desktop/actions", json={"actions": [{"type": "key", "keys": "shift"},
                                                              {"type": "wait", "durationMs": 1}]}, timeout=5)
    assert batch.status_code == 200 and "error" not in batch.json()
    assert len(api.get("/v1/approvals").json()["approvals"]) == before


def test_a_batch_is_held_once_listing_its_steps(api: httpx.Client, agent: Any) -> None:
    body = {"coordinates": {"space": "image", "width": 512, "height": 384},
            "actions": [{"type": "click", "x": 100, "y": 50}, {"type": "type", "text": "abc"},
                        {"type": "key", "keys": "ctrl+a BackSpace"}, {"type": "screenshot"}]}
    answer = agent("POST", "/v1/desktop/actions", json=body)
    [held] = pending(api)
    action = held["action"]
    assert held["source"] == "batch" and action["kinds"] == ["pointer", "type"]
    assert [s["type"] for s in action["steps"]] == ["click", "type", "key", "screenshot"]
    click = action["steps"][0]
    assert (click["x"], click["y"]) == (201, 101)  # the centre of image pixel 100,50 on the screen
    assert action["steps"][2] == {"kind": "key", "type": "key", "keys": "Control_L+a BackSpace"}
    assert "kind" not in action["steps"][3]
    assert action["summary"].startswith("4 actions: left click at 201,101; type 'abc'")
    decide(api, held["id"], "approve")
    response = answer.result(WAIT_S)
    assert response.status_code == 200 and len(response.json()["results"]) == 4
    assert pending_now(api) == []


def pending_now(api: httpx.Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get("/v1/approvals", params={"status": "pending"}).json()["approvals"]
    return found


def test_a_bad_batch_is_refused_before_anyone_is_asked(api: httpx.Client) -> None:
    response = api.post("/v1/desktop/actions", json={"actions": [{"type": "click", "x": 5000, "y": 1}]}, timeout=5)
    assert_problem(response, 400)
    assert response.json()["errors"][0]["field"] == "actions[0].x"
    assert pending_now(api) == []


def test_vendor_endpoints_are_held(api: httpx.Client, agent: Any) -> None:
    tool = {"type": "computer_20250124", "name": "computer", "display_width_px": 512, "display_height_px": 384}
    answer = agent("POST", "/v1/desktop/anthropic/computer",
                   json={"tool": tool, "input": {"action": "left_click", "coordinate": [10, 20]}})
    [held] = pending(api)
    step = held["action"]["steps"][0]
    assert held["source"] == "anthropic" and (step["x"], step["y"]) == (21, 41)  # display pixel 10,20's centre
    decide(api, held["id"], "deny", "not now")
    assert_problem(answer.result(WAIT_S), 403, "action_denied")

    screenshot = api.post("/v1/desktop/anthropic/computer", json={"tool": tool, "input": {"action": "screenshot"}},
                          timeout=10)
    assert screenshot.status_code == 200  # nothing to hold

    # The toolset: every call of a turn in one proposal, in screen pixels (a 1024x768 screen is shown unscaled).
    toolset = {"type": "computer_toolset_20260801"}
    uses = [{"type": "tool_use", "id": "t1", "name": "left_click", "input": {"coordinate": [30, 40]}},
            {"type": "tool_use", "id": "t2", "name": "type", "input": {"text": "hi"}}]
    answer = agent("POST", "/v1/desktop/anthropic/computer", json={"tool": toolset, "tool_uses": uses})
    [held] = pending(api)
    assert held["source"] == "anthropic" and [s["type"] for s in held["action"]["steps"]] == ["click", "type"]
    assert (held["action"]["steps"][0]["x"], held["action"]["steps"][0]["y"]) == (30, 40)
    decide(api, held["id"], "approve")
    assert [r["tool_use_id"] for r in answer.result(WAIT_S).json()["tool_results"]] == ["t1", "t2"]
    shot = api.post("/v1/desktop/anthropic/computer", json={"tool": toolset, "name": "screenshot"}, timeout=10)
    assert shot.status_code == 200  # nothing to hold

    call = {"call_id": "c1", "actions": [{"type": "type", "text": "hi"}, {"type": "keypress", "keys": ["ENTER"]}]}
    answer = agent("POST", "/v1/desktop/openai/computer", json={"call": call})
    [held] = pending(api)
    assert held["source"] == "openai" and held["action"]["kinds"] == ["type"]
    assert [s["type"] for s in held["action"]["steps"]] == ["type", "key"]
    decide(api, held["id"], "approve")
    assert answer.result(WAIT_S).json()["type"] == "computer_call_output"


def test_open_model_outputs_are_held(api: httpx.Client, agent: Any) -> None:
    # Qwen2.5-VL sees 1024x768 as 1036x756; its pixel (518, 378) is the screen's (512, 384).
    output = "".join(f'<tool_call>{{"name": "computer_use", "arguments": {a}}}</tool_call>' for a in (
        '{"action": "left_click", "coordinate": [518, 378]}', '{"action": "type", "text": "hi"}'))
    answer = agent("POST", "/v1/desktop/models/act", json={"family": "qwen2.5-vl", "text": output})
    [held] = pending(api)
    assert held["source"] == "open-model" and [s["type"] for s in held["action"]["steps"]] == ["click", "type"]
    assert (held["action"]["steps"][0]["x"], held["action"]["steps"][0]["y"]) == (512, 384)
    decide(api, held["id"], "deny")
    assert_problem(answer.result(WAIT_S), 403, "action_denied")
    # Refused output is refused before anyone is asked; a final answer has nothing to hold.
    assert_problem(api.post("/v1/desktop/models/act", json={"family": "opencua", "text": "os.system('x')"},
                            timeout=5), 422)
    final = api.post("/v1/desktop/models/act", timeout=10,
                     json={"family": "ui-tars-1.0", "text": "Thought: ok\nAction: finished()"})
    assert final.status_code == 200 and final.json()["final"] == {"status": "success"}
    assert pending_now(api) == []


def test_decisions_on_unknown_or_bad_requests(api: httpx.Client) -> None:
    assert_problem(api.post("/v1/approvals/apr_none", json={"decision": "approve"}), 404, "approval_not_found")
    assert_problem(api.get("/v1/approvals/apr_none"), 404, "approval_not_found")
    bad = assert_problem(api.post("/v1/approvals/apr_none", json={"decision": "maybe"}), 422)
    assert bad["errors"][0]["field"] == "decision"  # type: ignore[index]
    assert_problem(api.post("/v1/approvals/apr_none", json={}), 422)
    assert_problem(api.get("/v1/approvals", params={"status": "later"}), 400)


def test_a_scoped_token_cannot_see_or_decide(api: httpx.Client, srv: ServerProcess) -> None:
    token = api.post("/v1/desktops/default/tokens", json={"role": "control"}).json()["token"]
    with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}) as scoped:
        assert_problem(scoped.get("/v1/approvals"), 403, "token_scope")
        assert_problem(scoped.post("/v1/approvals/apr_x", json={"decision": "approve"}), 403, "token_scope")


def test_a_desktop_has_its_own_policy(api: httpx.Client, agent: Any) -> None:
    bad = assert_problem(api.post("/v1/desktops", json={"approve": ["key", "mouse"]}), 400)
    assert bad["errors"][0]["field"] == "approve[1]"  # type: ignore[index]
    created = api.post("/v1/desktops", json={"approve": ["key"], "width": 640, "height": 480})
    assert created.status_code == 201, created.text
    desktop = created.json()
    assert desktop["approve"] == ["key"]
    base = f"/v1/desktops/{desktop['id']}"
    try:
        assert api.post(base + "/mouse/click", json={"x": 5, "y": 5}, timeout=5).status_code == 200  # not held here
        answer = agent("POST", base + "/keyboard/press", json={"key": "Return", "modifiers": {"ctrl": True}})
        [held] = pending(api, desktop=desktop["id"])
        assert held["desktopId"] == desktop["id"] and held["action"]["steps"][0]["keys"] == "ctrl+Return"
        assert held["action"]["operation"] == f"POST {base}/keyboard/press"
        decide(api, held["id"], "approve")
        assert answer.result(WAIT_S).status_code == 200
    finally:
        api.delete(base)


def test_process_runs_are_held(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory("--approve", "all")
    with server.client() as api, server.client(timeout=30) as agent_client, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(agent_client.post, "/v1/processes/run", json={"command": "echo", "args": ["held"]})
        [held] = pending(api)
        assert held["action"]["steps"] == [{"kind": "process", "type": "run", "command": "echo", "args": ["held"]}]
        assert held["desktopId"] == "default" and held["action"]["summary"] == "run echo held"
        decide(api, held["id"], "approve")
        assert answer.result(WAIT_S).json()["stdout"] == "held\n"


def test_mcp_tool_calls_are_held(srv: ServerProcess, api: httpx.Client) -> None:
    pytest.importorskip("mcp", reason="the `mcp` package is not installed")
    from tests.clients.mcp.test_mcp_http import over_http

    result: dict[str, Any] = {}

    def call() -> None:
        result["reply"] = over_http(srv, lambda s: s.call_tool("click", {"x": 3, "y": 4}))

    caller = threading.Thread(target=call)
    caller.start()
    try:
        [held] = pending(api)
        assert held["source"] == "mcp" and held["action"]["steps"][0]["x"] == 3
        decide(api, held["id"], "deny", "use the keyboard")
    finally:
        caller.join(WAIT_S)
    reply = result["reply"]
    assert reply.isError and "use the keyboard" in reply.content[0].text and "action_denied" in reply.content[0].text


# -- the inspector ---------------------------------------------------------------------------------

network, browser, page_url = shared.network, shared.browser, shared.page_url


@pytest.fixture(scope="module")
def page(browser: Browser, page_url: str, srv: ServerProcess) -> Page:
    return browser.new_page(f"{page_url}#token={srv.token}&live=0")


MARKER = "document.querySelector('#approvals-overlay .marker[data-approval-id=\"{id}\"]')"
ITEM = "document.querySelector('#approval-list li[data-approval-id=\"{id}\"]')"


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed: the inspector test drives a real one")
def test_inspector_shows_the_click_and_decides(page: Page, api: httpx.Client, agent: Any,
                                               probe: tuple[Probe, dict]) -> None:
    window, rect = probe
    x, y = rect["x"] + 60, rect["y"] + 40
    page.wait_for("document.getElementById('approvals-state')?.textContent.startsWith('No agent action')",
                  "the approvals panel to be connected")
    click_at(page, "document.getElementById('live-connect')")  # markers are drawn on the playing live view
    page.wait_for("document.getElementById('live-video').videoWidth > 0", "the live view's first frame", 20)
    answer = agent("POST", "/v1/desktop/mouse/click", json={"x": x, "y": y})
    [held] = pending(api)
    item = ITEM.format(id=held["id"])
    page.wait_for(f"!!{item}", "the pending click in the approvals panel")
    assert "left click at" in page.evaluate(f"{item}.querySelector('.summary').textContent")
    # The marker sits where the click would land on the live view: desktop pixels scaled to the video's box.
    marker = MARKER.format(id=held["id"])
    page.wait_for(f"{marker} && getComputedStyle({marker}).position === 'absolute'",
                  "the click marker on the live view, styled (approvals.css)")
    placed = page.evaluate(f"""(() => {{
        const v = document.getElementById('live-video').getBoundingClientRect();
        const m = {marker}.getBoundingClientRect();
        return [m.left + m.width / 2 - v.left, m.top + m.height / 2 - v.top, v.width, v.height]; }})()""")
    mx, my, vw, vh = placed
    frame_w, frame_h = page.evaluate("[document.getElementById('live-video').videoWidth,"
                                     " document.getElementById('live-video').videoHeight]")
    scale = min(vw / frame_w, vh / frame_h)  # the picture is letterboxed in the element (object-fit: contain)
    expected = ((vw - frame_w * scale) / 2 + (x + 0.5) * frame_w / 1024 * scale,
                (vh - frame_h * scale) / 2 + (y + 0.5) * frame_h / 768 * scale)
    assert abs(mx - expected[0]) < 2 and abs(my - expected[1]) < 2, (placed, expected)
    assert presses(window) == []

    click_at(page, f"{item}.querySelector('[data-decision=approve]')")
    assert answer.result(WAIT_S).status_code == 200
    window.wait_for(lambda e: e["type"] == "ButtonPress")
    assert api.get(f"/v1/approvals/{held['id']}").json()["decidedBy"] == "inspector"
    page.wait_for(f"!{item} && !{marker}", "the decided click to leave the panel and the view")

    # Typing is shown as text, and a denial carries the message typed in the page.
    answer = agent("POST", "/v1/desktop/keyboard/type", json={"text": "rm -rf ~"})
    [held] = pending(api)
    item = ITEM.format(id=held["id"])
    page.wait_for(f"!!{item}", "the pending typing in the approvals panel")
    shown = page.evaluate("document.querySelector('#approvals-overlay [data-typed]')?.textContent")
    assert shown == 'type "rm -rf ~"'
    page.evaluate(f"{item}.querySelector('input[name=message]').value = 'not in my home'")
    click_at(page, f"{item}.querySelector('[data-decision=deny]')")
    problem = assert_problem(answer.result(WAIT_S), 403, "action_denied")
    assert problem["message"] == "not in my home"
    click_at(page, "document.getElementById('live-disconnect')")
    assert page.errors() == []
