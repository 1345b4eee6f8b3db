"""The Python clients' `transport="websocket"` option against a real server, sync and async: the same methods and
return types as over HTTP, errors included, the calls sent over the command socket (docs/websocket.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sandbox_desktop_client import AsyncClient, Client, ClientError, NotFoundError
from sandbox_desktop_client._websocket import AsyncWebSocketTransport, WebSocketTransport
from tests.conftest import ServerProcess

DESKTOP = {"displayNum": 545, "width": 800, "height": 600}


def test_the_client_option_sync(srv: ServerProcess, tmp_path: Path) -> None:
    with Client(srv.url, token=srv.token, transport="websocket") as client:
        assert client.move(200, 100).x == 200
        assert client.click(201, 101).x == 201
        shot = client.screenshot()
        assert (shot.screen_width, shot.image_width) == (800, 800) and shot.data.startswith(b"\x89PNG")
        with pytest.raises(ClientError) as refused:
            client.click(-5, 10**7)
        assert refused.value.status == 400 and refused.value.code == "desktop_invalid_action"
        assert client.health() == "ok"
        assert client.desktops.attach("default").mouse_position().x == 201
        client.write_file("~/ws.txt", b"over the socket\x00\xff")  # a raw body: the binary frame after its message
        assert client.read_file("~/ws.txt") == b"over the socket\x00\xff"
        with pytest.raises(NotFoundError):  # a download: through httpx and the transport, not `send_call`
            client.download_recording("rec_missing", tmp_path / "missing.mp4")
        assert not (tmp_path / "missing.mp4").exists()
        # The one stream goes over HTTP: the first event replayed arrives as over HTTP.
        assert next(iter(client.events(since=0))).seq >= 1
        transport = client._http._transport
        assert isinstance(transport, WebSocketTransport) and transport._socket is not None
        assert next(transport._ids) > 7  # every call above but the stream went over the socket


def test_the_client_option_async(srv: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncClient(srv.url, token=srv.token, transport="websocket") as client:
            moved = await asyncio.gather(*(client.move(300 + i, 200) for i in range(20)))  # in flight together
            assert sorted(m.x for m in moved) == list(range(300, 320))
            shot = await client.screenshot(format="jpeg")
            assert shot.media_type == "image/jpeg" and shot.screen_height == 600
            with pytest.raises(ClientError):
                await client.click(-5, 10**7)
            assert (await client.status()).state == "active"
            transport = client._http._transport
            assert isinstance(transport, AsyncWebSocketTransport) and transport._socket is not None
            assert next(transport._ids) == 24
    asyncio.run(scenario())


def test_the_default_is_http(srv: ServerProcess) -> None:
    with Client(srv.url, token=srv.token) as client:
        assert not isinstance(client._http._transport, WebSocketTransport) and client.status().state == "active"
