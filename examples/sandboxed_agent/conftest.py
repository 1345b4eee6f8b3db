"""What the agent's tests share: a server as a person runs it, and one agent desktop on it.

The plugin (installed with sandbox-desktop) starts its server with a token passed in the environment, so that
server keeps no token file. These tests need one, to show the agent cannot read it: `desktop_server` is
overridden here to start the server without a token, which then makes one and keeps it in `<state dir>/token`
(its default, docs/security.md). With `--desktop-url`, the plugin's own behaviour applies (no file is known).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent import create_desktop

from pytest_sandbox_desktop.server import TOKEN_ENV, DesktopServer
from sandbox_desktop_client import Client, DesktopClient

START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def desktop_server(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesktopServer]:
    """The server: the one at `--desktop-url`, else `sandbox-desktop server` on a free loopback port with the
    token it generates (read from its file by this process, the server's user), stopped at the end."""
    url: str | None = pytestconfig.getoption("desktop_url")
    if url:
        yield DesktopServer(url.rstrip("/"), pytestconfig.getoption("desktop_token"))
        return
    directory = tmp_path_factory.mktemp("sandbox-desktop")
    port, state_dir, log_path = _free_port(), directory / "state", directory / "server.log"
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["XDG_STATE_HOME"] = str(directory / "xdg-state")  # its announcement stays out of the user's
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "api.cli.main", "server", "--host", "127.0.0.1",
                                    "--port", str(port), "--state-dir", str(state_dir), "--log-level", "warning"],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    token_file = state_dir / "token"
    server = DesktopServer(f"http://127.0.0.1:{port}", None, state_dir, log_path, process, started_by_plugin=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(server.url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{server.log()}")
            time.sleep(0.05)
        yield DesktopServer(server.url, token_file.read_text().strip(), state_dir, log_path, process,
                            started_by_plugin=True)
    finally:
        server.stop()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/v1/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="session")
def client(desktop_server: DesktopServer) -> Iterator[Client]:
    with desktop_server.client(timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def agent_desktop(client: Client) -> Iterator[DesktopClient]:
    """The desktop the example's agent gets (`agent.create_desktop`: no network, limits), deleted at the end."""
    with create_desktop(client, tags={"test": "sandboxed_agent"}) as desktop:
        yield desktop


@pytest.fixture
def token_file(desktop_server: DesktopServer) -> Path:
    if desktop_server.state_dir is None or not (desktop_server.state_dir / "token").is_file():
        pytest.skip("a server at --desktop-url: its token file is not known")
    return desktop_server.state_dir / "token"
