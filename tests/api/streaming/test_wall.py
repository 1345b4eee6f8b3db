"""The wall's socket (`/v1/wall/ws`, api/routes/wall.py) against a real server and real Xvfb desktops.

Two Python clients watch the same desktops: each picture of a desktop is encoded once for both (the server's
encode counter, /v1/metrics, against the distinct pictures the two received, which are the same bytes), a window
our own X client paints shows in the next picture, nothing is encoded once both left, desktops created and
deleted come and go on an open wall, and a view-scoped token's wall shows its desktop only.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from PIL import Image
from websockets.asyncio.client import ClientConnection, connect

from api.routes.wall import ID_LENGTH
from sandbox_desktop_wire.wall import WALL_SOCKET_PATH
from tests.conftest import ServerProcess, poll, run
from tests.support.colour_window import ColourWindow

SMALL = {"width": 320, "height": 240}
PATCH = (40, 40, 200, 120)  # x, y, width, height of the painted window
MAX_MESSAGES = 10_000


@pytest.fixture(scope="module")
def desktops(api: httpx.Client) -> Iterator[list[dict[str, Any]]]:
    made = []
    for n in range(2):
        response = api.post("/v1/desktops", json={**SMALL, "tags": {"wall": str(n)}})
        assert response.status_code == 201, response.text
        made.append(response.json())
    yield made
    for desktop in made:
        api.delete(f"/v1/desktops/{desktop['id']}")


@dataclass
class WallClient:
    """One wall: the newest tile list, and every picture by desktop id, in order."""

    ws: ClientConnection
    tiles: list[dict[str, Any]] = field(default_factory=list)
    scope: str | None = None
    pictures: dict[str, list[bytes]] = field(default_factory=dict)

    async def read(self) -> None:
        for _ in range(MAX_MESSAGES):
            message = await self.ws.recv()
            if isinstance(message, str):
                body = json.loads(message)
                assert body["type"] == "wall/desktops"
                self.tiles, self.scope = body["desktops"], body.get("scope")
                continue
            (length,) = ID_LENGTH.unpack_from(message)
            desktop_id = message[ID_LENGTH.size:ID_LENGTH.size + length].decode()
            self.pictures.setdefault(desktop_id, []).append(message[ID_LENGTH.size + length:])

    def ids(self) -> set[str]:
        return {t["id"] for t in self.tiles}


def wall_url(srv: ServerProcess, token: str | None = None) -> str:
    return srv.url.replace("http://", "ws://") + f"{WALL_SOCKET_PATH}?access_token={token or srv.token}"


def metric(api: httpx.Client, name: str, desktop_id: str) -> float:
    text = api.get("/v1/metrics").text
    found = re.search(rf'^{name}{{desktop="{re.escape(desktop_id)}"}} (\S+)$', text, re.M)
    assert found, f"no {name} for {desktop_id}"
    return float(found.group(1))


def centre_colour(jpeg: bytes) -> tuple[int, int, int]:
    picture = Image.open(io.BytesIO(jpeg)).convert("RGB")
    x, y, w, h = PATCH
    red, green, blue = picture.getpixel(((x + w // 2) * picture.width // SMALL["width"],
                                         (y + h // 2) * picture.height // SMALL["height"]))  # type: ignore[misc]
    return int(red), int(green), int(blue)


def test_two_walls_share_one_encode_per_picture_and_nothing_is_encoded_unwatched(
        srv: ServerProcess, api: httpx.Client, desktops: list[dict[str, Any]]) -> None:
    first = desktops[0]
    target = first["id"]
    window = ColourWindow(first["display"], PATCH, (255, 0, 0))

    async def scenario() -> tuple[list[bytes], list[bytes], float]:
        async with connect(wall_url(srv), max_size=None) as a, connect(wall_url(srv), max_size=None) as b:
            walls = [WallClient(a), WallClient(b)]
            readers = [asyncio.ensure_future(w.read()) for w in walls]
            await poll(lambda: all({d["id"] for d in desktops} <= w.ids() for w in walls), "both walls list both")
            await poll(lambda: all(len(w.pictures.get(d["id"], [])) >= 1 for w in walls for d in desktops),
                       "a picture of each desktop on each wall")
            assert metric(api, "sandbox_desktop_wall_viewers", target) == 2
            assert centre_colour(walls[0].pictures[target][-1])[0] > 180  # red
            for rgb in ((0, 255, 0), (0, 0, 255), (255, 255, 0)):
                window.fill(rgb)
                await poll(lambda rgb=rgb: all(_close(centre_colour(w.pictures[target][-1]), rgb) for w in walls),
                           f"the painted {rgb} on both walls")
            encoded = metric(api, "sandbox_desktop_wall_thumbnails_total", target)
            for reader in readers:
                reader.cancel()
            return walls[0].pictures[target], walls[1].pictures[target], encoded

    try:
        got_a, got_b, encoded = run(scenario)
        # One encode per picture, shared: both walls got the same bytes, and the server encoded no more pictures than
        # one wall received (each encode reached both; two encodes per picture would be twice as many).
        assert set(got_a) & set(got_b), "the two walls got no picture in common"
        distinct, received = len(set(got_a) | set(got_b)), max(len(got_a), len(got_b))
        assert distinct <= encoded <= received, f"{encoded} encodes for {distinct} pictures ({received} received)"
        # Both left: the source stops, and a screen that changes is encoded no more.
        wait_metric = lambda: metric(api, "sandbox_desktop_wall_viewers", target) == 0  # noqa: E731
        run(lambda: poll(wait_metric, "no wall watching"))
        stopped_at = metric(api, "sandbox_desktop_wall_thumbnails_total", target)
        for rgb in ((255, 0, 255), (0, 255, 255), (255, 255, 255)):
            window.fill(rgb)
            run(lambda: asyncio.sleep(0.6))
        assert metric(api, "sandbox_desktop_wall_thumbnails_total", target) == stopped_at
    finally:
        window.close()


def _close(rgb: tuple[int, int, int], wanted: tuple[int, int, int]) -> bool:
    return all(abs(a - b) < 48 for a, b in zip(rgb, wanted, strict=True))


def test_desktops_come_and_go_on_an_open_wall(srv: ServerProcess, api: httpx.Client,
                                              desktops: list[dict[str, Any]]) -> None:
    async def scenario() -> None:
        async with connect(wall_url(srv), max_size=None) as ws:
            wall = WallClient(ws)
            reader = asyncio.ensure_future(wall.read())
            await poll(lambda: {d["id"] for d in desktops} <= wall.ids(), "the wall's desktops")
            response = await asyncio.to_thread(api.post, "/v1/desktops", json={**SMALL, "tags": {"new": "yes"}})
            assert response.status_code == 201, response.text
            new = response.json()["id"]
            await poll(lambda: new in wall.ids(), "the new desktop on the wall")
            tile = next(t for t in wall.tiles if t["id"] == new)
            assert tile["tags"] == {"new": "yes"} and tile["state"] == "active" and tile["width"] == SMALL["width"]
            await poll(lambda: new in wall.pictures, "a picture of the new desktop")
            await asyncio.to_thread(api.delete, f"/v1/desktops/{new}")
            await poll(lambda: new not in wall.ids(), "the deleted desktop gone from the wall")
            reader.cancel()

    run(scenario)


def test_a_view_scoped_tokens_wall_shows_its_desktop_only(srv: ServerProcess, api: httpx.Client,
                                                          desktops: list[dict[str, Any]]) -> None:
    mine = desktops[1]["id"]
    issued = api.post(f"/v1/desktops/{mine}/tokens", json={"role": "view", "ttlSeconds": 600})
    assert issued.status_code == 201, issued.text
    token = issued.json()["token"]

    async def scenario() -> WallClient:
        async with connect(wall_url(srv, token), max_size=None) as ws:
            wall = WallClient(ws)
            reader = asyncio.ensure_future(wall.read())
            await poll(lambda: wall.tiles and mine in wall.pictures, "the scoped wall's tile and picture")
            await asyncio.sleep(1.5)  # a few polls and pictures more: still this desktop only
            reader.cancel()
            return wall

    wall = run(scenario)
    assert wall.ids() == {mine} and set(wall.pictures) == {mine} and wall.scope == mine
    # The listing itself stays refused to it (api/server/scoped_tokens.py): the wall is its one way to see tiles.
    assert httpx.get(srv.url + "/v1/desktops", headers={"Authorization": f"Bearer {token}"}).status_code == 403
