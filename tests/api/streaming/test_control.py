"""Shared control of the live view (docs/control.md): roles, request/give/take/release, view-only tokens and
the clipboard between a viewer and the desktop, with real aiortc viewers against a real server.

The rules are checked once on `Control` itself, then end to end: what each viewer is told over its own
socket, what the server's status, event bus and action log say, and the desktop's real clipboard (read
back through the REST API, which reads the X selection).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from streaming.control import Access, Control, ControlChange, ControlRefused, Reason
from streaming.viewer import Viewer, signaling_url
from tests.conftest import ServerProcess, poll, run

PORTS = (59510, 59525)
DESKTOP = {"displayNum": 612, "width": 800, "height": 600, "streamVideoCodec": "h264",
           "webrtcPortRange": f"{PORTS[0]}-{PORTS[1]}"}


# -- the rules, on Control alone -----------------------------------------------------------------

def make_control(access: dict[str, Access]) -> tuple[Control, list[ControlChange]]:
    changes: list[ControlChange] = []
    return Control(changes.append, access.get), changes


def test_request_give_take_release_follow_the_roles() -> None:
    control, changes = make_control({"admin": Access.ADMIN, "bob": Access.CONTROL, "eve": Access.CONTROL,
                                     "watcher": Access.VIEW})
    assert control.request("bob") and control.host == "bob" and not control.takeover  # the SDK's request at connect
    assert not control.request("eve") and control.waiting == ("eve",)
    control.touched("eve")  # a waiting viewer's input changes nothing
    control.touched("bob")  # the controller's first key or click: they hold the desktop now
    assert control.takeover
    with pytest.raises(ControlRefused, match="view-only"):
        control.request("watcher")
    with pytest.raises(ControlRefused, match="only the controller or an admin"):
        control.give("eve", "eve")
    with pytest.raises(ControlRefused, match="view-only"):
        control.give("bob", "watcher")
    with pytest.raises(ControlRefused, match="no viewer"):
        control.give("bob", "nobody")
    control.give("bob", "eve")
    assert (control.host, control.takeover, control.waiting) == ("eve", True, ())
    with pytest.raises(ControlRefused, match="only an admin"):
        control.take("bob")
    control.take("admin")  # eve goes first in line
    assert (control.host, control.waiting) == ("admin", ("eve",))
    control.release("admin")  # and gets control back, not holding the desktop until she acts
    assert (control.host, control.takeover) == ("eve", False)
    control.leave("eve")
    assert control.host is None and not control.takeover
    assert [(c.controller, c.previous, c.cause, c.reason, c.takeover) for c in changes] == [
        ("bob", None, "bob", Reason.REQUEST, False),
        ("bob", "bob", "bob", Reason.INPUT, True),
        ("eve", "bob", "bob", Reason.GIVE, True),
        ("admin", "eve", "admin", Reason.TAKE, True),
        ("eve", "admin", "admin", Reason.RELEASE, False),
        (None, "eve", "eve", Reason.LEAVE, False),
    ]


def test_an_explicit_request_holds_the_desktop_at_once() -> None:
    control, changes = make_control({"a": Access.CONTROL})
    control.request("a", takeover=True)
    assert control.takeover
    control.request("a", takeover=True)  # no change, nothing reported
    assert len(changes) == 1


# -- end to end ----------------------------------------------------------------------------------

def scoped_token(api: httpx.Client, role: str) -> str:
    issued = api.post("/v1/desktops/default/tokens", json={"role": role, "ttlSeconds": 600})
    assert issued.status_code == 201, issued.text
    return str(issued.json()["token"])




def host_event(viewer: Viewer, cause: str, host: str | None) -> bool:
    wanted = {"id": cause, "has_host": host is not None, **({"host_id": host} if host else {})}
    return wanted in viewer.events_named("control/host")


def errors(viewer: Viewer) -> list[dict[str, Any]]:
    return viewer.events_named("system/error")


def test_two_viewers_pass_control_and_everyone_sees_who_holds_it(srv: ServerProcess, api: httpx.Client,
                                                                 streaming: None) -> None:
    control_token = scoped_token(api, "control")

    async def scenario() -> None:
        alice = Viewer(srv.url, srv.token, name="alice", request_control=False)  # the server token: admin
        bob = Viewer(srv.url, control_token, name="bob", request_control=False)
        try:
            await alice.connect()
            await bob.connect()
            # Names and roles: bob's init lists both, alice is told bob arrived.
            [init] = bob.events_named("system/init")
            sessions = init["sessions"]
            assert set(sessions) == {"alice", "bob"}
            assert (sessions["alice"]["access"], sessions["bob"]["access"]) == ("admin", "control")
            assert sessions["alice"]["profile"]["is_admin"] and not sessions["bob"]["profile"]["is_admin"]
            assert {s["role"] for s in sessions.values()} == {"watcher"}
            assert init["control_takeover"] == {"active": False, "mode": "refuse"}
            await poll(lambda: any(p["id"] == "bob" for p in alice.events_named("session/created")), "bob's arrival")

            await bob.request()
            await poll(lambda: host_event(alice, "bob", "bob"), "bob in control, told to alice")
            await alice.request()  # taken: bob is told alice asked
            await poll(lambda: {"id": "alice"} in bob.events_named("control/request"), "alice's request, told to bob")
            assert api.get("/v1/desktop/stream/status").json()["controller"] == "bob"

            await bob.give("alice")
            await poll(lambda: host_event(bob, "bob", "alice") and host_event(alice, "bob", "alice"), "the hand-over")
            await poll(lambda: {"active": True, "mode": "refuse", "host_id": "alice"}
                       in bob.events_named("control/takeover"), "alice holding the desktop")

            await bob.take()  # not an admin
            await poll(lambda: errors(bob), "bob's take refused")
            assert errors(bob)[-1]["event"] == "control/take" and "admin" in errors(bob)[-1]["message"]
            await bob.give("bob")  # no longer the controller
            await poll(lambda: len(errors(bob)) == 2, "bob's give refused")

            await alice.release()
            await poll(lambda: host_event(bob, "alice", None), "control released")
            await bob.request()
            await poll(lambda: host_event(alice, "bob", "bob"), "bob in control again")
            await alice.take()  # the admin takes it; bob is first in line
            await poll(lambda: host_event(bob, "alice", "alice"), "alice took control")
            await alice.release()
            await poll(lambda: host_event(alice, "alice", "bob"), "control back with bob")
            assert api.get("/v1/desktop/stream/status").json()["controller"] == "bob"

            await bob.close()
            await poll(lambda: {"id": "bob"} in alice.events_named("session/deleted"), "bob leaving")
            await poll(lambda: host_event(alice, "bob", None), "nobody in control")
        finally:
            await alice.close()
            await bob.close()
    run(scenario)

    # Every change is on the desktop's event bus and in the action log, with who caused it.
    events = api.get("/v1/desktop/events", params={"types": "control.changed", "follow": "false"}).text
    changes = [json.loads(line[5:]) for line in events.splitlines() if line.startswith("data:")]
    moves = [(c["controller"], c["previous"], c["reason"]) for c in changes if c["controller"] != c["previous"]]
    assert moves == [("bob", None, "request"), ("alice", "bob", "give"), (None, "alice", "release"),
                     ("bob", None, "request"), ("alice", "bob", "take"), ("bob", "alice", "release"),
                     (None, "bob", "leave")]
    logged = [e for e in api.get("/v1/desktop/actions/log").json()["entries"] if e["kind"] == "control"]
    assert [(e["controller"], e["source"]) for e in logged][:2] == [("bob", "stream"), ("alice", "stream")]


def test_a_view_only_viewer_never_controls(srv: ServerProcess, api: httpx.Client, streaming: None) -> None:
    view_token = scoped_token(api, "view")

    async def scenario() -> None:
        watcher = Viewer(srv.url, view_token, name="watcher")  # asks for control at connect, as the SDK does
        admin = Viewer(srv.url, srv.token, name="admin", request_control=False)
        try:
            await watcher.connect()
            await admin.connect()
            await poll(lambda: errors(watcher), "the connect-time request refused")
            assert errors(watcher)[0] == {"event": "control/request",
                                          "message": "this viewer watches with a view-only token and cannot control"}
            [init] = admin.events_named("system/init")
            assert init["sessions"]["watcher"]["profile"]["can_host"] is False
            await admin.give("watcher")  # not even an admin can hand it control
            await poll(lambda: errors(admin), "the give refused")
            await watcher.set_clipboard("from a watcher")
            await poll(lambda: len(errors(watcher)) == 2, "its clipboard refused")
            watcher.key(ord("x"), True)
            watcher.key(ord("x"), False)
            await asyncio.sleep(0.3)
            assert api.get("/v1/desktop/stream/status").json().get("controller") is None
            assert not [e for e in api.get("/v1/desktop/actions/log").json()["entries"] if e["kind"] == "key_down"]
        finally:
            await watcher.close()
            await admin.close()
    run(scenario)


def test_names_are_unique_and_checked(srv: ServerProcess, streaming: None) -> None:
    async def scenario() -> None:
        first = await connect(signaling_url(srv.url, srv.token, "sam"))
        second = await connect(signaling_url(srv.url, srv.token, "sam"))
        anonymous = await connect(signaling_url(srv.url, srv.token))
        try:
            ids = [json.loads(await ws.recv())["payload"]["session_id"] for ws in (first, second, anonymous)]
            assert ids[:2] == ["sam", "sam_2"] and ids[2].startswith("viewer_")
        finally:
            for ws in (first, second, anonymous):
                await ws.close()
        with pytest.raises(InvalidStatus) as refused:
            await connect(signaling_url(srv.url, srv.token, "<script>"))
        body = json.loads(refused.value.response.body or b"{}")
        assert refused.value.response.status_code == 400 and body["errors"][0]["field"] == "name", body
    run(scenario)


def test_clipboard_flows_between_the_controller_and_the_desktop(srv: ServerProcess, api: httpx.Client,
                                                                streaming: None) -> None:
    async def scenario() -> None:
        controller = Viewer(srv.url, srv.token, name="ctl")
        watcher = Viewer(srv.url, srv.token, name="w", request_control=False)
        try:
            await controller.connect()
            await watcher.connect()
            # Desktop → the controller's browser, when anything on the desktop copies.
            text = "copied on the desktop ✓"
            answer = await asyncio.to_thread(api.post, "/v1/desktop/clipboard", json={"text": text})
            assert answer.status_code == 200, answer.text
            await poll(lambda: {"text": text} in controller.events_named("clipboard/updated"), "clipboard/updated")
            # Viewer → desktop: the controller's browser clipboard becomes the desktop's CLIPBOARD.
            await controller.set_clipboard("pasted from the browser")
            await poll(lambda: api.get("/v1/desktop/clipboard").json()["text"] == "pasted from the browser",
                       "the desktop's clipboard")
            await asyncio.sleep(0.3)  # its own change must not come back to it
            assert [p["text"] for p in controller.events_named("clipboard/updated")] == [text]
            assert not watcher.events_named("clipboard/updated"), "only the controller gets the desktop's clipboard"
            await watcher.set_clipboard("not the controller")
            await poll(lambda: errors(watcher), "the watcher's clipboard/set refused")
            assert api.get("/v1/desktop/clipboard").json()["text"] == "pasted from the browser"
            # A viewer that becomes controller gets what is on the clipboard now.
            await controller.give("w")
            await poll(lambda: {"text": "pasted from the browser"} in watcher.events_named("clipboard/updated"),
                       "the clipboard sent to the new controller")
        finally:
            await controller.close()
            await watcher.close()
    run(scenario)
    logged = [e for e in api.get("/v1/desktop/actions/log").json()["entries"] if e["kind"] == "clipboard"]
    assert logged and logged[-1]["source"] == "stream" and logged[-1]["viewer"] == "ctl"
