"""`sandbox-desktop mcp` with many desktops: the management tools, `desktop_id`, and `--desktop ID`."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess

pytest.importorskip("mcp", reason="the `mcp` package is not installed (pip install 'sandbox-desktop[mcp]')")

from mcp import ClientSession, types

from tests.clients.mcp.test_mcp import (  # ALL_TOOLS: those on one desktop
    ALL_TOOLS,
    LAUNCH,
    images,
    mcp,
    png_size,
    texts,
)
from tests.support.paths import REPO

DESKTOP = {"displayNum": 347, "width": 800, "height": 600}  # the default desktop, to check isolation against
MANAGEMENT = {"create_desktop", "list_desktops", "delete_desktop"}


def schemas(listed: list[types.Tool]) -> dict[str, dict[str, Any]]:
    return {t.name: t.inputSchema for t in listed}


@pytest.fixture
def default_marked(api: httpx.Client) -> Iterator[None]:
    """The default desktop with a pointer position and a clipboard text no test sets on another desktop."""
    api.post("/v1/desktop/mouse/move", json={"x": 7, "y": 9}).raise_for_status()
    api.post("/v1/desktop/clipboard", json={"text": "default's own"}).raise_for_status()
    yield
    position = api.get("/v1/desktop/mouse/position").json()
    assert (position["x"], position["y"]) == (7, 9), "the default desktop's pointer moved"
    assert api.get("/v1/desktop/clipboard").json()["text"] == "default's own"


@pytest.fixture
def own(api: httpx.Client) -> Iterator[str]:
    """A desktop created over HTTP, for `--desktop ID`; deleted afterwards."""
    created = api.post("/v1/desktops", json={"width": 640, "height": 480, "tags": {"host": "given"}})
    assert created.status_code == 201, created.text
    yield created.json()["id"]
    api.delete(f"/v1/desktops/{created.json()['id']}")


def test_management_tools_are_listed_and_desktop_tools_take_desktop_id(srv: ServerProcess) -> None:
    listed = schemas(mcp(srv, lambda s: s.list_tools()).tools)
    assert set(listed) == ALL_TOOLS | MANAGEMENT
    for name in ALL_TOOLS:
        desktop_id = listed[name]["properties"]["desktop_id"]
        assert desktop_id["type"] == "string" and desktop_id["description"], name
        assert "desktop_id" not in listed[name].get("required", []), name
    for name in MANAGEMENT - {"delete_desktop"}:
        assert "desktop_id" not in listed[name]["properties"], name
    assert listed["delete_desktop"]["required"] == ["desktop_id"]
    assert {"width", "height", "tags", "ttl_seconds", "idle_timeout_seconds", "auto_pause_seconds",
            "auto_delete_seconds", "network", "limits"} <= set(listed["create_desktop"]["properties"])


def test_an_agent_creates_uses_and_deletes_its_desktop(srv: ServerProcess, api: httpx.Client,
                                                       default_marked: None) -> None:
    async def window_titles(s: ClientSession, **where: str) -> list[str]:
        return [w["title"] for w in json.loads(texts(await s.call_tool("windows", where))[0])]

    async def use(s: ClientSession) -> dict[str, Any]:
        made = await s.call_tool("create_desktop", {"width": 640, "height": 480, "tags": {"agent": "mcp-1"},
                                                    "ttl_seconds": 600, "idle_timeout_seconds": 300,
                                                    "auto_pause_seconds": 900, "auto_delete_seconds": 1800,
                                                    "network": {"egress": "none"}, "limits": {"pids": 512}})
        assert not made.isError, texts(made)
        [desktop_id] = texts(made)
        on = {"desktop_id": desktop_id}
        seen: dict[str, Any] = {"id": desktop_id, "resource": api.get(f"/v1/desktops/{desktop_id}").json()}
        seen["listed"] = json.loads(texts(await s.call_tool("list_desktops", {"tags": {"agent": "mcp-1"}}))[0])
        seen["shot"] = await s.call_tool("screenshot", on)
        for name, args in (("click", {"x": 50, "y": 60}), ("clipboard_set", {"text": "agent's text ✓"}),
                           ("key", {"chord": "Escape"}), ("scroll", {"x": 50, "y": 60, "dy": 1}),
                           ("launch", {"app": "xterm", "args": ["-T", "mcp-own-term"], "wait": True})):
            done = await s.call_tool(name, {**args, **on})
            assert not done.isError, (name, texts(done))
        seen["position"] = api.get(f"/v1/desktops/{desktop_id}/mouse/position").json()
        seen["clipboard"] = texts(await s.call_tool("clipboard_get", on))
        seen["batch"] = await s.call_tool("batch", {"actions": [{"type": "cursor_position"}],
                                                    "screenshot": {"scale": 0.5}, **on})
        seen["titles"] = await window_titles(s, **on)
        seen["default titles"] = await window_titles(s)
        deleted = await s.call_tool("delete_desktop", on)
        assert not deleted.isError and texts(deleted) == [f"deleted {desktop_id}"], texts(deleted)
        seen["after"] = await s.call_tool("screenshot", on)
        return seen

    seen = mcp(srv, use)
    desktop_id, resource = seen["id"], seen["resource"]
    assert resource["state"] == "active" and resource["tags"] == {"agent": "mcp-1"}
    assert (resource["resolution"]["width"], resource["resolution"]["height"]) == (640, 480)
    assert resource["expiresAt"] and resource["idleTimeoutSeconds"] == 300
    assert (resource["autoPauseSeconds"], resource["autoDeleteSeconds"]) == (900, 1800) and resource["autoPauseAt"]
    assert resource["network"]["egress"] == "none" and resource["limits"]["pids"] == 512
    assert [d["id"] for d in seen["listed"]] == [desktop_id]
    assert png_size(base64.b64decode(images(seen["shot"])[0].data)) == (640, 480)
    assert (seen["position"]["x"], seen["position"]["y"]) == (50, 60)
    assert seen["clipboard"] == ["agent's text ✓"]
    assert json.loads(texts(seen["batch"])[0])["results"][0]["x"] == 50
    assert png_size(base64.b64decode(images(seen["batch"])[0].data)) == (320, 240)
    assert "mcp-own-term" in seen["titles"] and "mcp-own-term" not in seen["default titles"]
    assert api.get(f"/v1/desktops/{desktop_id}").json()["state"] == "deleted"
    assert seen["after"].isError and "(code: desktop_not_found, HTTP 404)" in texts(seen["after"])[0]


def test_bad_desktop_ids_are_error_results(srv: ServerProcess, default_marked: None) -> None:
    async def use(s: ClientSession) -> list[types.CallToolResult]:
        return [await s.call_tool("click", {"x": 1, "y": 1, "desktop_id": "dsk_000000000000"}),
                await s.call_tool("clipboard_set", {"text": "x", "desktop_id": "a/b"}),
                await s.call_tool("delete_desktop", {"desktop_id": "default"}),
                await s.call_tool("delete_desktop", {})]

    unknown, malformed, default, missing = mcp(srv, use)
    assert unknown.isError and "(code: desktop_not_found, HTTP 404)" in texts(unknown)[0]
    assert malformed.isError and "does not match" in texts(malformed)[0]
    assert default.isError and "(code: desktop_is_default, HTTP 409)" in texts(default)[0]
    assert missing.isError and "'desktop_id' is a required property" in texts(missing)[0]


def test_a_fixed_desktop_offers_no_management_and_acts_on_it(srv: ServerProcess, api: httpx.Client, own: str,
                                                             default_marked: None) -> None:
    async def use(s: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"tools": schemas((await s.list_tools()).tools)}
        seen["shot"] = await s.call_tool("screenshot", {})
        assert not (await s.call_tool("clipboard_set", {"text": "host's desktop"})).isError
        assert not (await s.call_tool("click", {"x": 30, "y": 40})).isError
        seen["create"] = await s.call_tool("create_desktop", {})
        seen["elsewhere"] = await s.call_tool("screenshot", {"desktop_id": "default"})
        return seen

    seen = mcp(srv, use, "--desktop", own)
    assert set(seen["tools"]) == ALL_TOOLS
    assert all("desktop_id" not in schema.get("properties", {}) for schema in seen["tools"].values())
    assert png_size(base64.b64decode(images(seen["shot"])[0].data)) == (640, 480)
    assert api.get(f"/v1/desktops/{own}/clipboard").json()["text"] == "host's desktop"
    position = api.get(f"/v1/desktops/{own}/mouse/position").json()
    assert (position["x"], position["y"]) == (30, 40)
    assert seen["create"].isError and "unknown tool 'create_desktop'" in texts(seen["create"])[0]
    assert seen["elsewhere"].isError and "desktop_id" in texts(seen["elsewhere"])[0]
    assert [d["id"] for d in api.get("/v1/desktops").json()["desktops"]] == ["default", own]


def test_the_variable_fixes_the_desktop_too(srv: ServerProcess, api: httpx.Client, own: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_DESKTOP_DESKTOP", own)

    async def use(s: ClientSession) -> tuple[set[str], types.CallToolResult]:
        return {t.name for t in (await s.list_tools()).tools}, await s.call_tool("screenshot", {})

    names, shot = mcp(srv, use)
    assert names == ALL_TOOLS
    assert png_size(base64.b64decode(images(shot)[0].data)) == (640, 480)


def test_allow_list_and_timeout_cover_the_new_tools(srv: ServerProcess, api: httpx.Client, own: str) -> None:
    async def names(s: ClientSession) -> set[str]:
        return {t.name for t in (await s.list_tools()).tools}

    assert mcp(srv, names, "--allow", "screenshot,create_desktop") == {"screenshot", "create_desktop"}
    assert mcp(srv, names, "--allow", "screenshot,create_desktop", "--desktop", own) == {"screenshot"}

    async def slow(s: ClientSession) -> list[types.CallToolResult]:
        return [await s.call_tool("batch", {"actions": [{"type": "wait", "durationMs": 4000}], "desktop_id": own}),
                await s.call_tool("create_desktop", {"tags": {"suite": "mcp-timeout"}})]

    batch, create = mcp(srv, slow, "--timeout", "0.01")
    assert batch.isError and "batch timed out after 0.01 s" in texts(batch)[0]
    assert create.isError and "create_desktop timed out after 0.01 s" in texts(create)[0]
    # The server may still finish the create the timeout gave up on (docs/mcp.md), or may never have got it:
    # delete what it made, if anything, so later tests count only their own desktops.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for desktop in api.get("/v1/desktops", params={"tag": "suite=mcp-timeout"}).json()["desktops"]:
            api.delete(f"/v1/desktops/{desktop['id']}")
        time.sleep(0.2)


def test_a_malformed_desktop_option_is_a_usage_error() -> None:
    for argv in (["--desktop", "a/b"], ["--desktop", ""], ["--allow", "create_desktop,nope"]):
        done = subprocess.run([sys.executable, "-c", LAUNCH, *argv], cwd=REPO, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30)
        assert done.returncode == 2 and done.stdout == "", (argv, done)
