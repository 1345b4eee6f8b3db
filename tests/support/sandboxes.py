"""Desktops in sandboxes as an agent meets them (tests/api/security, tests/api/files): the admin of a server that
made its own token, desktops made and deleted, and one desktop's agent, which has only that desktop's token."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ServerProcess, launch_server

SIZE = {"width": 640, "height": 400}


def admin_client(server: ServerProcess) -> httpx.Client:
    """The admin's client: the token the server made and keeps in its state (which no desktop may read)."""
    token = (server.state_dir / "token").read_text().strip()
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


@contextlib.contextmanager
def made_desktops(admin: httpx.Client, count: int) -> Iterator[list[dict[str, Any]]]:
    """`count` new desktops (their creation answers), deleted on leaving."""
    made = [admin.post("/v1/desktops", json=SIZE) for _ in range(count)]
    try:
        assert all(m.status_code == 201 for m in made), [m.text for m in made]
        yield [m.json() for m in made]
    finally:
        for answer in made:
            if answer.status_code == 201:
                admin.delete(f"/v1/desktops/{answer.json()['id']}")


def agent_client(server: ServerProcess, admin: httpx.Client, desktop: dict[str, Any]) -> httpx.Client:
    """The desktop's agent: a client of `/v1/desktops/{id}` with only the desktop's control token."""
    token = admin.post(f"/v1/desktops/{desktop['id']}/tokens", json={"role": "control"}).json()["token"]
    return httpx.Client(base_url=f"{server.url}/v1/desktops/{desktop['id']}",
                        headers={"Authorization": f"Bearer {token}"}, timeout=60)


def home_of(admin: httpx.Client, desktop: dict[str, Any]) -> Path:
    """The desktop's HOME on the machine (and, bound at the same path, in its sandbox)."""
    return Path(admin.get(f"/v1/desktops/{desktop['id']}/status").json()["stateDir"]) / "home"


@dataclass(frozen=True)
class Pair:
    """Two desktops in sandboxes on one server, and A's agent."""

    server: ServerProcess
    admin: httpx.Client
    a: dict[str, Any]
    b: dict[str, Any]
    agent: httpx.Client
    """A's agent, at `/v1/desktops/{A}`: only A's control token."""


@contextlib.contextmanager
def sandboxed_pair(tmp: Path) -> Iterator[Pair]:
    """A server started the default way (the token it makes, in its state), desktops A and B, and A's agent;
    all stopped on leaving."""
    server = launch_server(tmp, token=None)
    try:
        with admin_client(server) as admin, made_desktops(admin, 2) as (a, b), agent_client(server, admin, a) as agent:
            yield Pair(server, admin, a, b, agent)
    finally:
        server.stop()
