"""`/v1/mcp`: the server's own MCP endpoint (streamable HTTP), driven by the official `mcp` client SDK."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem, run, running_server
from tests.support.paths import REPO

pytest.importorskip("mcp", reason="the `mcp` package is not installed (pip install 'sandbox-desktop[mcp]')")

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from api.mcp import desktops as mcp_desktops
from api.mcp import server as mcp_server
from tests.clients.mcp.test_mcp import assert_errors, call_erring, images, png_size, texts

DESKTOP = {"displayNum": 361, "width": 800, "height": 600}
ALL_TOOLS = set(mcp_server.TOOL_NAMES)
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}
T = TypeVar("T")


def over_http(srv: ServerProcess, use: Callable[[ClientSession], Awaitable[T]], token: str | None = None,
              **headers: str) -> T:
    """Open a session on `srv`'s /v1/mcp (with its token, or `token`) and run `use` in it."""
    async def session() -> T:
        async with connect(srv, token, **headers) as s:
            return await use(s)

    return run(session, 40)


@contextlib.asynccontextmanager
async def connect(srv: ServerProcess, token: str | None = None, **headers: str) -> AsyncIterator[ClientSession]:
    """An initialized session on `srv`'s /v1/mcp, as docs/mcp.md opens one."""
    headers["Authorization"] = f"Bearer {token or srv.token}"
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http, \
            streamable_http_client(srv.url + "/v1/mcp", http_client=http) as (read, write, _), \
            ClientSession(read, write) as s:
        await s.initialize()
        yield s


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def names(s: ClientSession) -> set[str]:
    return {t.name for t in (await s.list_tools()).tools}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with an allow-list, a short timeout and one allowed browser origin, and a desktop."""
    with running_server(tmp_path_factory.mktemp("limited"), "--mcp-allow", "screenshot,batch",
                        "--mcp-allow", "create_desktop", "--mcp-timeout", "0.5", "-O", "http://agent.example",
                        desktop={"displayNum": 362, "width": 640, "height": 480}) as server:
        yield server


def test_the_tools_are_the_stdio_servers(srv: ServerProcess) -> None:
    listed = over_http(srv, lambda s: s.list_tools()).tools
    assert {t.name for t in listed} == ALL_TOOLS
    served = {t.name: t.schema for t in mcp_desktops.offered(mcp_server.TOOLS, None)}
    assert {t.name: t.inputSchema for t in listed} == served


def test_screenshot_and_click(srv: ServerProcess, api: httpx.Client) -> None:
    async def use(s: ClientSession) -> tuple[types.CallToolResult, types.CallToolResult]:
        return await s.call_tool("screenshot", {}), await s.call_tool("click", {"x": 21, "y": 34})

    shot, clicked = over_http(srv, use)
    assert not shot.isError, texts(shot)
    [image] = images(shot)
    assert image.mimeType == "image/png" and png_size(base64.b64decode(image.data)) == (800, 600)
    assert texts(shot) == ["screen 800x600, image 800x600, scale 1"]
    assert texts(clicked) == ["clicked at 21,34"]
    position = api.get("/v1/desktop/mouse/position").json()
    assert (position["x"], position["y"]) == (21, 34)


def test_an_agent_creates_lists_and_deletes_a_desktop(srv: ServerProcess, api: httpx.Client) -> None:
    async def use(s: ClientSession) -> dict[str, Any]:
        made = await s.call_tool("create_desktop", {"width": 320, "height": 240, "tags": {"agent": "http-1"}})
        assert not made.isError, texts(made)
        [desktop_id] = texts(made)
        listed = json.loads(texts(await s.call_tool("list_desktops", {"tags": {"agent": "http-1"}}))[0])
        shot = await s.call_tool("screenshot", {"desktop_id": desktop_id})
        deleted = await s.call_tool("delete_desktop", {"desktop_id": desktop_id})
        return {"id": desktop_id, "listed": listed, "shot": shot, "deleted": deleted}

    seen = over_http(srv, use)
    assert [d["id"] for d in seen["listed"]] == [seen["id"]]
    assert png_size(base64.b64decode(images(seen["shot"])[0].data)) == (320, 240)
    assert texts(seen["deleted"]) == [f"deleted {seen['id']}"]
    assert api.get(f"/v1/desktops/{seen['id']}").json()["state"] == "deleted"


def test_errors_are_the_stdio_servers(srv: ServerProcess) -> None:
    assert_errors(over_http(srv, call_erring))


def test_the_token_is_required(srv: ServerProcess, api: httpx.Client) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = httpx.post(srv.url + "/v1/mcp", json=INITIALIZE, headers={**ACCEPT, **headers})
        assert_problem(refused, 401, "token_invalid")
        assert refused.headers["www-authenticate"] == 'Bearer realm="sandbox-desktop"'
    with pytest.raises(BaseExceptionGroup) as failed:
        over_http(srv, names, token="wrong")
    assert any(isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 401 for e in leaves(failed.value))
    # A token scoped to one desktop is refused: the endpoint's tools reach every desktop (docs/mcp.md).
    issued = api.post("/v1/desktops/default/tokens", json={"role": "control"})
    assert issued.status_code == 201, issued.text
    scoped = httpx.post(srv.url + "/v1/mcp", json=INITIALIZE,
                        headers={**ACCEPT, "Authorization": f"Bearer {issued.json()['token']}"})
    assert_problem(scoped, 403, "token_scope")


def test_origins(srv: ServerProcess, limited: ServerProcess) -> None:
    assert over_http(srv, names, Origin=srv.url) == ALL_TOOLS  # the server's own origin
    assert over_http(limited, names, Origin="http://agent.example") == {"screenshot", "batch", "create_desktop"}
    for server in (srv, limited):
        refused = httpx.post(server.url + "/v1/mcp", json=INITIALIZE, headers={
            **ACCEPT, "Authorization": f"Bearer {server.token}", "Origin": "http://evil.example"})
        assert_problem(refused, 403, "origin_not_allowed")


def test_allow_list_and_timeout(limited: ServerProcess) -> None:
    async def use(s: ClientSession) -> tuple[set[str], list[types.CallToolResult], float]:
        offered = await names(s)
        refused = await s.call_tool("click", {"x": 1, "y": 1})
        began = time.monotonic()
        # The call gives up after 0.5 s; the server carries the batch on to its end (the move), as it does for
        # `sandbox-desktop mcp` over the network.
        slow = await s.call_tool("batch", {"actions": [{"type": "wait", "durationMs": 1000},
                                                       {"type": "move", "x": 33, "y": 44}]})
        return offered, [refused, slow], time.monotonic() - began

    offered, (refused, slow), took = over_http(limited, use)
    assert offered == {"screenshot", "batch", "create_desktop"}
    assert refused.isError and "unknown tool 'click'" in texts(refused)[0]
    assert slow.isError and texts(slow)[0].startswith("batch timed out after 0.5 s (the server's --mcp-timeout)")
    assert took < 1
    time.sleep(1.5)
    with limited.client() as api:
        position = api.get("/v1/desktop/mouse/position").json()
    assert (position["x"], position["y"]) == (33, 44)


def test_the_api_document_has_the_endpoint(api: httpx.Client) -> None:
    item = api.get("/v1/openapi.json").json()["paths"]["/v1/mcp"]
    assert set(item) == {"post", "get", "delete"}
    assert all(op["security"] == [{"bearer": []}] and "401" in op["responses"] for op in item.values())
    assert "text/event-stream" in item["post"]["responses"]["200"]["content"]


def test_junk_gets_4xx(srv: ServerProcess) -> None:
    auth = {"Authorization": f"Bearer {srv.token}"}
    for method, headers, body in (("POST", ACCEPT, b"{"), ("POST", {}, json.dumps(INITIALIZE).encode()),
                                  ("POST", ACCEPT, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'),
                                  ("GET", ACCEPT, b""), ("GET", {"Accept": "text/event-stream", "Mcp-Session-Id": "x"},
                                                         b""),
                                  ("DELETE", {"Mcp-Session-Id": "nope"}, b""), ("PUT", {}, b"")):
        answer = httpx.request(method, srv.url + "/v1/mcp", content=body,
                               headers={**auth, "Content-Type": "application/json", **headers})
        assert 400 <= answer.status_code < 500, (method, headers, body, answer.status_code, answer.text)


def test_switched_off(tmp_path: Path) -> None:
    with running_server(tmp_path, "--no-mcp-api") as server:
        answer = httpx.post(server.url + "/v1/mcp", json=INITIALIZE,
                            headers={**ACCEPT, "Authorization": f"Bearer {server.token}"})
        assert "--no-mcp-api" in str(assert_problem(answer, 403, "api_disabled")["detail"])
        with server.client() as api:
            assert "/v1/mcp" not in api.get("/v1/openapi.json").json()["paths"]


def test_sigterm_ends_open_sessions_and_calls(tmp_path: Path) -> None:
    with running_server(tmp_path, "--log-level", "info",
                        desktop={"displayNum": 363, "width": 320, "height": 240}) as server:
        async def scenario() -> float:
            async def use(s: ClientSession) -> None:
                call = asyncio.create_task(s.call_tool("batch", {"actions": [{"type": "wait", "durationMs": 20000}]}))
                await asyncio.sleep(0.5)  # the call is running, the session's GET stream open
                began = time.monotonic()
                server.proc.terminate()
                await asyncio.to_thread(server.proc.wait, 10)
                took.append(time.monotonic() - began)
                call.cancel()

            took: list[float] = []
            try:
                async with connect(server) as s:
                    await use(s)
            except Exception:  # the server is gone: closing the session may fail, whichever way
                pass
            return took[0]

        took = run(scenario, 40)
        print(f"\nSIGTERM -> exited in {took * 1000:.0f} ms with an MCP session and a tool call open")
        assert took < 5, f"SIGTERM took {took:.1f} s with an MCP session open"
        assert "Traceback" not in server.log() and "without completing response" not in server.log(), server.log()


def test_sessions_end_quietly(srv: ServerProcess) -> None:
    """Every session above ended with the client's DELETE while its GET stream was open: nothing logged."""
    assert "Traceback" not in srv.log() and "ERROR" not in srv.log(), srv.log()


def test_the_server_starts_without_the_client_or_the_mcp_sdk() -> None:
    """httpx, the Python client and the SDK are loaded with the first MCP session, not by every server start (about
    a tenth of its start-up CPU)."""
    import subprocess
    import sys
    code = ("import sys, api.cli.main; from api.app import create_app; from api.server.config import ServerConfig; "
            "api.cli.main.build_parser().parse_args(['server']); create_app(ServerConfig()); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'httpx', 'mcp', 'rich'}), "
            "[m for m in sys.modules if m.startswith('sandbox_desktop_client.') and m.endswith('client')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[] []", out.stdout + out.stderr
