"""The command WebSocket against a real server: ops answered in order by id, many in flight, the HTTP answers
(problems, scopes, approvals, switched-off APIs) on each message, images as binary frames, a desktop's own socket.

JSON operations (mouse, keyboard, status, windows...) run directly through the request gate and the operation
(api/commands/direct.py), everything else through the whole app: the tests below hold both to the HTTP answer,
byte for byte where it is deterministic."""

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

from tests.api.observability.test_observability import scrape, value
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
        off = same_as_http(ws, api, {"op": "server.processes.get"}, "GET", "/v1/processes")
        assert off["status"] == 403 and off["body"]["code"] == "api_disabled"
        off_run = same_as_http(ws, api, {"op": "server.processes.run", "body": {"command": "true"}}, "POST",
                               "/v1/processes/run", json={"command": "true"})
        assert off_run["status"] == 403 and off_run["body"]["code"] == "api_disabled"
        # The held click ran directly (a JSON operation) and was held: so are a move and a scroll, refused when the
        # message lets them wait for no one, as over HTTP (each problem names its own approval).
        for op, body in (("mouse.move", {"x": 5, "y": 5}), ("mouse.scroll", {"x": 5, "y": 5, "deltaY": 1})):
            over_socket = ask(ws, op=op, body=body, headers={"prefer": "wait=0"})
            over_http = api.post("/v1/desktop/" + op.replace(".", "/"), json=body, headers={"prefer": "wait=0"})
            assert (over_socket["status"], over_socket["body"]["code"]) == \
                (over_http.status_code, over_http.json()["code"]) == (403, "approval_expired"), (op, over_socket)


def test_a_client_leaving_with_requests_queued_leaves_the_server_well(srv: ServerProcess, api: httpx.Client) -> None:
    with socket(srv) as ws:
        for i in range(50):
            ws.send(json.dumps({"id": i, "op": "mouse.move", "body": {"x": 10 + i, "y": 10}}))
    with socket(srv) as ws:  # gone without reading: the next socket is answered at once
        assert ask(ws, op="status")["status"] == 200
    assert api.get("/v1/desktop/status").status_code == 200
    assert "command socket failed" not in srv.log()


def same_as_http(ws: ClientConnection, http: httpx.Client, message: dict[str, Any], method: str, path: str,
                 **request: Any) -> dict[str, Any]:
    """The message's answer, checked to be the HTTP request's: status, content type and JSON body."""
    head = ask(ws, **message)
    response = http.request(method, path, **request)
    assert (head["status"], head["headers"]["content-type"]) == \
        (response.status_code, response.headers["content-type"]), (message, head, response.text)
    assert head["body"] == response.json(), (message, head, response.text)
    return head


def test_direct_answers_and_problems_are_the_http_ones(srv: ServerProcess, api: httpx.Client) -> None:
    with socket(srv) as ws:
        moved = same_as_http(ws, api, {"op": "mouse.move", "body": {"x": 64, "y": 48}}, "POST",
                             "/v1/desktop/mouse/move", json={"x": 64, "y": 48})
        assert (moved["status"], moved["body"]["x"], moved["body"]["y"]) == (200, 64, 48)
        same_as_http(ws, api, {"op": "display.info"}, "GET", "/v1/desktop/display/info")
        same_as_http(ws, api, {"op": "mouse.position"}, "GET", "/v1/desktop/mouse/position")
        wrong_type = same_as_http(ws, api, {"op": "mouse.click", "body": {"x": "ten", "y": 5}}, "POST",
                                  "/v1/desktop/mouse/click", json={"x": "ten", "y": 5})
        assert wrong_type["status"] == 422 and [e["field"] for e in wrong_type["body"]["errors"]] == ["x"]
        missing = same_as_http(ws, api, {"op": "mouse.click", "body": {"x": 5}}, "POST", "/v1/desktop/mouse/click",
                               json={"x": 5})
        assert missing["status"] == 422 and [e["field"] for e in missing["body"]["errors"]] == ["y"]
        off_screen = same_as_http(ws, api, {"op": "mouse.click", "body": {"x": 5000, "y": 5}}, "POST",
                                  "/v1/desktop/mouse/click", json={"x": 5000, "y": 5})
        assert off_screen["status"] == 400 and off_screen["body"]["code"] == "desktop_invalid_action"
        no_body = same_as_http(ws, api, {"op": "mouse.click"}, "POST", "/v1/desktop/mouse/click")
        assert no_body["status"] == 422
        not_json = same_as_http(ws, api, {"op": "mouse.click", "body": {"x": 5, "y": 5},
                                          "headers": {"content-type": "text/plain"}},
                                "POST", "/v1/desktop/mouse/click", content=b'{"x":5,"y":5}',
                                headers={"content-type": "text/plain"})
        assert not_json["status"] == 415
        gone = same_as_http(ws, api, {"op": "windows.{id}.focus", "path": {"id": "0x7ffffff0"}}, "POST",
                            "/v1/desktop/windows/0x7ffffff0/focus")
        assert gone["status"] == 404 and gone["body"]["code"] == "window_not_found"
        batch = {"actions": [{"type": "move", "x": 70, "y": 50}, {"type": "click", "x": 10}]}
        half_bad = same_as_http(ws, api, {"op": "actions", "body": batch}, "POST", "/v1/desktop/actions", json=batch)
        assert half_bad["status"] == 400 and [e["field"] for e in half_bad["body"]["errors"]] == ["actions[1].y"]
        ran = ask(ws, op="actions", body={"actions": [{"type": "move", "x": 70, "y": 50}]})
        assert ran["status"] == 200, ran
        same_as_http(ws, api, {"method": "GET", "target": "/v1/desktops/nobody/status"}, "GET",
                     "/v1/desktops/nobody/status")
        wrong_method = same_as_http(ws, api, {"method": "GET", "target": "/v1/desktop/mouse/click"}, "GET",
                                    "/v1/desktop/mouse/click")
        assert wrong_method["status"] == 405


def test_direct_and_whole_app_messages_in_flight_are_answered_in_order(srv: ServerProcess) -> None:
    """Moves (run directly) between screenshots (images: the whole app), a bad message, the op listing and a
    problem, all sent before any answer is read."""
    with socket(srv) as ws:
        sent: list[tuple[str, int, bool]] = []  # id, status, a binary frame follows
        for i in range(12):
            ws.send(json.dumps({"id": f"move{i}", "op": "mouse.move", "body": {"x": 20 + i, "y": 30}}))
            sent.append((f"move{i}", 200, False))
            if i % 4 == 0:
                ws.send(json.dumps({"id": f"shot{i}", "op": "screenshot", "query": {"format": "png"}}))
                sent.append((f"shot{i}", 200, True))
            if i % 4 == 1:
                ws.send(json.dumps({"id": f"bad{i}", "op": "mouse.click", "body": {"x": "no", "y": 1}}))
                sent.append((f"bad{i}", 422, False))
            if i % 4 == 2:
                ws.send(json.dumps({"id": f"ops{i}", "op": "ops"}))
                sent.append((f"ops{i}", 200, False))
        ws.send(json.dumps({"id": "where", "op": "mouse.position"}))
        sent.append(("where", 200, False))
        answers = [answer(ws) for _ in sent]
    assert [(head["id"], head["status"], image is not None) for head, image in answers] == sent
    assert (answers[-1][0]["body"]["x"], answers[-1][0]["body"]["y"]) == (31, 30)


def test_a_view_token_is_refused_a_click_with_the_http_problem(srv: ServerProcess, api: httpx.Client) -> None:
    view = api.post("/v1/desktops/default/tokens", json={"role": "view"}).json()["token"]
    with socket(srv, token=view) as ws, httpx.Client(base_url=srv.url, timeout=30,
                                                     headers={"Authorization": f"Bearer {view}"}) as viewer:
        refused = same_as_http(ws, viewer, {"op": "mouse.click", "body": {"x": 10, "y": 10}}, "POST",
                               "/v1/desktop/mouse/click", json={"x": 10, "y": 10})
        assert refused["status"] == 403 and refused["body"]["code"] == "token_scope"
        same_as_http(ws, viewer, {"op": "display.info"}, "GET", "/v1/desktop/display/info")


def test_messages_run_directly_are_counted_as_requests(srv: ServerProcess, api: httpx.Client) -> None:
    before = scrape(api)
    with socket(srv) as ws:
        for i in range(5):
            assert ask(ws, op="mouse.move", body={"x": 40 + i, "y": 40})["status"] == 200
        assert ask(ws, op="mouse.click", body={"x": "no", "y": 1})["status"] == 422
    after = scrape(api)
    move = {"method": "POST", "route": "/v1/desktop/mouse/move"}
    click = {"method": "POST", "route": "/v1/desktop/mouse/click"}
    total = "sandbox_desktop_http_requests_total"
    assert value(after, total, status="200", **move) - value(before, total, status="200", **move) == 5
    assert value(after, total, status="422", **click) - value(before, total, status="422", **click) == 1


def test_messages_go_uncompressed_though_the_client_offers_deflate(srv: ServerProcess) -> None:
    """websockets' client offers permessage-deflate, as browsers do; the server answers as HTTP does, uncompressed
    (api/cli/main.py WS_DEFLATE): a deflated move or screenshot cost CPU on both ends for nothing."""
    with socket(srv) as ws:
        assert ws.request is not None and "permessage-deflate" in ws.request.headers["Sec-WebSocket-Extensions"]
        assert ws.response is not None and "Sec-WebSocket-Extensions" not in ws.response.headers
        assert ws.protocol.extensions == []
        assert ask(ws, op="mouse.move", body={"x": 10, "y": 10})["status"] == 200
