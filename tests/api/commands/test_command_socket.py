"""The command WebSocket against a real server: ops answered in order by id, many in flight, the HTTP answers
(problems, scopes, approvals, switched-off APIs) on each message, images as binary frames, a desktop's own socket."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image
from websockets.sync.client import ClientConnection, connect

from tests.conftest import ServerProcess, running_server, wait_for

DESKTOP = {"displayNum": 541, "width": 800, "height": 600}


def socket(server: ServerProcess, path: str = "/v1/desktop/ws", token: str | None = None) -> ClientConnection:
    token = token if token is not None else server.token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(server.url.replace("http://", "ws://") + path, additional_headers=headers, max_size=None,
                   open_timeout=10)


def answer(ws: ClientConnection) -> tuple[dict[str, Any], bytes | None]:
    """One answer: its JSON, and the binary frame after it when it says `binary`."""
    head = json.loads(ws.recv(30))
    binary = ws.recv(30) if "binary" in head else None
    assert binary is None or (isinstance(binary, bytes) and len(binary) == head["binary"]), head
    return head, binary if isinstance(binary, bytes) else None


def ask(ws: ClientConnection, **message: Any) -> dict[str, Any]:
    ws.send(json.dumps({"id": 1, **message}))
    head, _ = answer(ws)
    assert head["id"] == 1
    return head


def test_ops_are_answered_in_order_with_their_ids_many_in_flight(srv: ServerProcess, api: httpx.Client) -> None:
    points = [(100 + 10 * i, 50 + 5 * i) for i in range(40)]
    with socket(srv) as ws:
        for i, (x, y) in enumerate(points):  # all sent before any answer is read
            ws.send(json.dumps({"id": f"m{i}", "op": "mouse.move", "body": {"x": x, "y": y}}))
        ws.send(json.dumps({"id": "last", "op": "mouse.position"}))
        answers = [answer(ws)[0] for _ in range(len(points) + 1)]
    assert [a["id"] for a in answers] == [f"m{i}" for i in range(len(points))] + ["last"]
    assert all(a["status"] == 200 and a["headers"]["content-type"] == "application/json" for a in answers)
    assert [(a["body"]["x"], a["body"]["y"]) for a in answers[:-1]] == points
    assert (answers[-1]["body"]["x"], answers[-1]["body"]["y"]) == points[-1]  # ran in the order sent
    assert api.get("/v1/desktop/mouse/position").json()["x"] == points[-1][0]


def test_answers_are_the_http_ones(srv: ServerProcess, api: httpx.Client) -> None:
    with socket(srv) as ws:
        over_socket = ask(ws, op="display.info")
        assert over_socket["body"] == api.get("/v1/desktop/display/info").json()
        raw = ask(ws, method="GET", target="/v1/desktop/display/info")  # the method-and-target form
        assert raw["body"] == over_socket["body"]
        listing = ask(ws, op="ops")["body"]["ops"]
        assert {"op": "mouse.click", "method": "POST", "path": "/v1/desktop/mouse/click"}.items() <= \
            next(o for o in listing if o["op"] == "mouse.click").items()
        assert not [o for o in listing if o["path"].endswith(("/ws", "/signaling", "/events"))]


def test_problems_bad_body_unknown_op_and_bad_messages(srv: ServerProcess) -> None:
    with socket(srv) as ws:
        bad = ask(ws, op="mouse.click", body={"x": "ten", "y": 5})
        assert bad["status"] == 422 and bad["headers"]["content-type"] == "application/problem+json"
        assert bad["body"]["status"] == 422 and [e["field"] for e in bad["body"]["errors"]] == ["x"]
        unknown = ask(ws, op="mouse.teleport")
        assert unknown["status"] == 404 and unknown["body"]["code"] == "not_found"
        assert "mouse.teleport" in unknown["body"]["detail"]
        missing = ask(ws, op="windows.{id}.focus")
        assert missing["status"] == 422 and missing["body"]["errors"][0]["field"] == "path.id"
        no_window = ask(ws, op="windows.{id}.focus", path={"id": "0x7ffffff0"})
        assert no_window["status"] == 404 and no_window["body"]["code"] == "window_not_found"
        events = ask(ws, method="GET", target="/v1/desktop/events")
        assert events["status"] == 400 and "streams" in events["body"]["detail"]
        ws.send("{not json")
        head, _ = answer(ws)
        assert head["id"] is None and head["status"] == 400 and head["body"]["errors"][0]["type"] == "json_invalid"
        ws.send(json.dumps({"op": "status"}))
        head, _ = answer(ws)
        assert head["status"] == 422 and head["body"]["errors"][0]["field"] == "id"
        assert ask(ws, op="status")["status"] == 200  # the socket goes on after each


def test_a_screenshot_is_a_binary_frame_with_the_http_headers(srv: ServerProcess) -> None:
    with socket(srv) as ws:
        ws.send(json.dumps({"id": 7, "op": "screenshot", "query": {"format": "png", "showCursor": True}}))
        head, image = answer(ws)
    assert head["id"] == 7 and head["status"] == 200 and head["headers"]["content-type"] == "image/png"
    assert head["headers"]["x-screen-width"] == "800" and image is not None
    picture = Image.open(io.BytesIO(image))
    assert picture.format == "PNG" and picture.size == (800, 600)


def test_a_view_token_may_look_but_not_touch(srv: ServerProcess, api: httpx.Client) -> None:
    view = api.post("/v1/desktops/default/tokens", json={"role": "view"}).json()["token"]
    with socket(srv, token=view) as ws:
        assert ask(ws, op="status")["status"] == 200
        refused = ask(ws, op="mouse.click", body={"x": 10, "y": 10})
        assert refused["status"] == 403 and refused["body"]["code"] == "token_scope"
        other = ask(ws, op="server.desktops.get")
        assert other["status"] == 403 and other["body"]["code"] == "token_scope"
    with pytest.raises(Exception, match="401"), socket(srv, token="wrong"):
        pass


def test_a_desktops_socket_acts_on_that_desktop_only(srv: ServerProcess, api: httpx.Client) -> None:
    made = api.post("/v1/desktops", json={"width": 640, "height": 480})
    assert made.status_code == 201, made.text
    desktop_id = made.json()["id"]
    try:
        before = api.get("/v1/desktop/mouse/position").json()
        with socket(srv, f"/v1/desktops/{desktop_id}/ws") as ws:
            moved = ask(ws, op="mouse.move", body={"x": 321, "y": 123})
            assert moved["status"] == 200, moved
            info = ask(ws, op="display.info")["body"]
            assert (info["resolution"]["width"], info["resolution"]["height"]) == (640, 480)
            assert ask(ws, method="GET", target=f"/v1/desktops/{desktop_id}/status")["status"] == 200
            for message in ({"method": "GET", "target": "/v1/desktops/default/status"},
                            {"op": "server.desktops.get"}, {"op": "server.health"}):
                refused = ask(ws, **message)
                assert refused["status"] == 400 and desktop_id in refused["body"]["detail"], (message, refused)
        there = api.get(f"/v1/desktops/{desktop_id}/mouse/position").json()
        assert (there["x"], there["y"]) == (321, 123)
        assert api.get("/v1/desktop/mouse/position").json() == before
    finally:
        api.delete(f"/v1/desktops/{desktop_id}")


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server holding pointer actions for approval, its process API switched off."""
    with running_server(tmp_path_factory.mktemp("gated"), "--approve", "pointer", "--approval-timeout", "30",
                        "--no-process-api", desktop={"displayNum": 543, "width": 640, "height": 480}) as server:
        yield server


def test_the_approval_gate_and_switched_off_apis_hold_on_the_socket(gated: ServerProcess) -> None:
    with gated.client() as api, socket(gated) as ws:
        ws.send(json.dumps({"id": 1, "op": "mouse.click", "body": {"x": 20, "y": 30}}))
        ws.send(json.dumps({"id": 2, "op": "mouse.position"}))  # queued behind the held click
        [held] = wait_for(lambda: api.get("/v1/approvals", params={"status": "pending"}).json()["approvals"] or None,
                          "a pending approval")
        assert held["action"]["operation"] == "POST /v1/desktop/mouse/click"
        time.sleep(0.3)
        assert api.post(f"/v1/approvals/{held['id']}", json={"decision": "approve"}).status_code == 200
        first, _ = answer(ws)
        assert (first["id"], first["status"], first["body"]["x"]) == (1, 200, 20)
        assert answer(ws)[0]["id"] == 2
        denied_soon = ask(ws, op="mouse.click", body={"x": 5, "y": 5}, headers={"prefer": "wait=0"})
        assert denied_soon["status"] == 403 and denied_soon["body"]["code"] == "approval_expired"
        off = ask(ws, op="server.processes.get")
        assert off["status"] == 403 and off["body"]["code"] == "api_disabled"


def test_a_client_leaving_with_requests_queued_leaves_the_server_well(srv: ServerProcess, api: httpx.Client) -> None:
    with socket(srv) as ws:
        for i in range(50):
            ws.send(json.dumps({"id": i, "op": "mouse.move", "body": {"x": 10 + i, "y": 10}}))
    with socket(srv) as ws:  # gone without reading: the next socket is answered at once
        assert ask(ws, op="status")["status"] == 200
    assert api.get("/v1/desktop/status").status_code == 200
    assert "command socket failed" not in srv.log()
