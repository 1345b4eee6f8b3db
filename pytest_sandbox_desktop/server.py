"""The server the `desktop_server` fixture hands out: one this plugin starts, or one at `--desktop-url`.

A started server is a `sandbox-desktop server` subprocess of this Python (the distribution that holds
this plugin holds the server too) on a free loopback port, with a random token passed in its environment
(never on its command line, where `ps` shows it), its own state directory (HOME, logs and recordings of
its desktops) and its own `$XDG_STATE_HOME`, so it never announces itself in the user's.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox_desktop_client import Client

TOKEN_ENV = "SANDBOX_DESKTOP_TOKEN"
START_TIMEOUT = 60.0
"""Seconds a started server may take to answer `/v1/health` (about 2 s on a loaded 2-core machine)."""
STOP_TIMEOUT = 15.0
LOG_TAIL_LINES = 30
PORT_ATTEMPTS = 3
"""A free port can be taken by someone else between choosing it and the server binding it: try again."""


class ServerStartError(RuntimeError):
    """The server this plugin started exited or did not answer; the message ends with its log."""


@dataclass(frozen=True)
class DesktopServer:
    """A sandbox-desktop server: where it is and its token (None: the client finds it, docs/security.md).
    `process` is set in the process that started it."""

    url: str
    token: str | None
    state_dir: Path | None = None
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    started_by_plugin: bool = False
    """This run started it (this process, another worker or the controller) and stops it at its end, which
    deletes its desktops; a server at `--desktop-url` is someone else's."""

    def client(self, *, timeout: float = 60.0) -> Client:
        """A new `Client` on this server (close it, or use it in a `with`)."""
        from sandbox_desktop_client import Client

        return Client(self.url, token=self.token, timeout=timeout)

    def log(self) -> str:
        """What a started server has written so far ("" for one given by URL)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The end of `log()`, for an error message (the whole log stays in `log_path`)."""
        if self.log_path is None:
            return ""
        tail = self.log().splitlines()[-lines:]
        return "\n".join(tail) + f"\n(the whole log: {self.log_path})"

    def stop(self) -> None:
        """SIGTERM a started server (it deletes its desktops and finalises their recordings), then SIGKILL
        after `STOP_TIMEOUT`; nothing for a server given by URL."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(directory: Path, *, extra_args: tuple[str, ...] = ()) -> DesktopServer:
    """Start `sandbox-desktop server` with its state and log in `directory`; returns once it answers.
    Raises `ServerStartError` (with its log) when it exits or does not answer in `START_TIMEOUT`."""
    last_error: ServerStartError | None = None
    for attempt in range(PORT_ATTEMPTS):
        server = _spawn(directory / f"server-{attempt}", extra_args)
        try:
            _wait_healthy(server)
            return server
        except ServerStartError as error:
            server.stop()
            last_error = error
            if "address already in use" not in server.log().lower():
                break
    assert last_error is not None
    raise last_error


def _spawn(directory: Path, extra_args: tuple[str, ...]) -> DesktopServer:
    directory.mkdir(parents=True, exist_ok=True)
    port, token = _free_port(), secrets.token_urlsafe(32)
    state_dir, log_path = directory / "state", directory / "server.log"
    env = {**os.environ, TOKEN_ENV: token, "XDG_STATE_HOME": str(directory / "xdg-state")}
    command = [sys.executable, "-m", "api.cli.main", "server", "--host", "127.0.0.1", "--port", str(port),
               "--state-dir", str(state_dir), "--log-level", "warning", *extra_args]
    with open(log_path, "wb") as log:
        # A session of its own: a Ctrl-C in the terminal reaches pytest, which then stops the server
        # politely, instead of killing it mid-way through finalising a recording.
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
    return DesktopServer(f"http://127.0.0.1:{port}", token, state_dir, log_path, process, started_by_plugin=True)


def _healthy(url: str) -> bool:
    """Whether the server at `url` answers `GET /v1/health` with 200. The standard library's HTTP: waiting for
    a server (the controller does, for a shared one) loads no HTTP client; the client loads with the first
    `desktop` fixture. Raises OSError or http.client.HTTPException when no answer comes."""
    where = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=2.0)
    try:
        connection.request("GET", "/v1/health")
        return connection.getresponse().status == 200
    finally:
        connection.close()


def _wait_healthy(server: DesktopServer) -> None:
    assert server.process is not None
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerStartError(f"sandbox-desktop server exited with {server.process.returncode}:\n"
                                   f"{server.log_tail()}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            if _healthy(server.url):
                return
        time.sleep(0.02)
    raise ServerStartError(f"sandbox-desktop server did not answer at {server.url} in {START_TIMEOUT:.0f} s:\n"
                           f"{server.log_tail()}")
