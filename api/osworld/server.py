"""A desktop's OSWorld guest API on a port of its own (docs/osworld.md): a second uvicorn server in the same
process and event loop as the main one, listening on the server's own address, started and stopped with the
desktop's `osworld` setting and closed when the desktop is deleted."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Callable, Generator
from urllib.parse import urlsplit

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from desktop.lifecycle.vm_image import CDP_PORT, VLC_PORT
from desktop.sandbox.portforward import InboundPort, Namespace

logger = logging.getLogger("sandbox_desktop.osworld")

STOP_TIMEOUT_S = 5
"""How long a stop waits for the guest's requests in flight (a `/setup/open_file` may wait minutes) before it
cancels them."""


class _QuietServer(uvicorn.Server):
    """uvicorn's server without its signal capture: the main server owns SIGINT and SIGTERM, and a guest
    server that took them would swallow the main one's shutdown for as long as it runs."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


Authorize = Callable[[str], bool]
"""Whether a bearer token grants control of the guest's desktop (the server's token, or a `control` token scoped
to that desktop)."""


class GuestGuard:
    """The guest API has no auth by default (OSWorld's harness sends none): a web page must not reach it by DNS
    rebinding, so only IP literals and `localhost` are accepted as Host (a 403 otherwise); a desktop that asked
    for it (`osworldToken`) also wants a token that controls it (a 401 otherwise)."""

    def __init__(self, app: ASGIApp, guest: GuestServer) -> None:
        self.app = app
        self.guest = guest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = urlsplit(f"//{host}").hostname or ""
            if not (_is_ip(name) or name == "localhost"):
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send({"type": "http.response.body", "body": b"the guest API answers only to an IP address "
                                                                  b"or localhost as Host"})
                return
            if self.guest.require_token:
                scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1").partition(" ")
                if scheme.lower() != "bearer" or not given.strip() or not self.guest.authorize(given.strip()):
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"application/json"),
                                            (b"www-authenticate", b"Bearer")]})
                    await send({"type": "http.response.body",
                                "body": b'{"status": "error", "message": "this desktop\'s guest API wants '
                                        b'Authorization: Bearer with the server\'s token or a control token of '
                                        b'the desktop"}'})
                    return
        await self.app(scope, receive, send)


class GuestServer:
    """One desktop's guest API listener; `start`/`stop` may be called any number of times."""

    def __init__(self, app: Callable[[], ASGIApp], host: str, public_host: str,
                 authorize: Authorize = lambda token: False, namespace: Namespace | None = None) -> None:
        self._app = app
        # The VM's other ports, as upstream's Docker provider maps them: Chrome's DevTools and VLC's HTTP interface
        # inside the desktop, each on a port of the server's address of its own (docs/osworld.md).
        self.cdp = InboundPort(host, CDP_PORT, namespace or _host_loopback)
        self.vlc = InboundPort(host, VLC_PORT, namespace or _host_loopback)
        self.authorize = authorize
        self.require_token = False
        """Whether a request needs a token that controls the desktop (`osworldToken`); read at each request."""
        self.host = host
        """Where it listens: the server's own address (`--host`)."""
        self.public_host = public_host
        """The host of the URL it reports (the server's URL's: a wildcard bind is reached at loopback)."""
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port: int | None = None
        self._lock = asyncio.Lock()

    @property
    def url(self) -> str | None:
        if self.port is None:
            return None
        host = f"[{self.public_host}]" if ":" in self.public_host else self.public_host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        async with self._lock:
            if self._server is not None:
                return
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.host, 0))  # a port of its own, free now: the kernel picks it
            except OSError:
                sock.close()
                raise
            # log_level None: uvicorn's loggers are the main server's too and keep the level it set.
            config = uvicorn.Config(GuestGuard(self._app(), self), lifespan="off", log_config=None, log_level=None,
                                    access_log=False, loop="asyncio", http="httptools",
                                    timeout_graceful_shutdown=STOP_TIMEOUT_S)
            server = _QuietServer(config)
            self._task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name="osworld-guest")
            while not server.started and not self._task.done():
                await asyncio.sleep(0.01)
            if self._task.done():
                sock.close()
                self._task.result()  # raises why it could not start
                raise OSError("the OSWorld guest server ended as it started")
            try:
                for relay in (self.cdp, self.vlc):
                    await relay.start()
            except OSError:
                await self._stop(server, self._task)
                self._task = None
                raise
            self._server, self.port = server, sock.getsockname()[1]
            logger.info("OSWorld guest API on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        async with self._lock:
            server, task = self._server, self._task
            self._server = self._task = None
            self.port = None
            if server is None or task is None:
                return
            await self._stop(server, task)

    async def _stop(self, server: _QuietServer, task: asyncio.Task[None]) -> None:
        for relay in (self.cdp, self.vlc):
            await relay.close()
        server.should_exit = True
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S + 2):
                await task
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        except Exception:
            logger.exception("the OSWorld guest server failed while stopping")

def _host_loopback() -> str | None:
    return None
