"""The one ASGI layer in front of the routes: request metrics, the browser guard, CORS and the token, each decided
in its own module, run here in one call.

As four stacked layers, each a coroutine awaiting the next and two of them wrapping `send`, they took 10-14 us of CPU
a request in process; composed (one coroutine, one wrapped `send`) and with the requests in flight a plain count,
6-8 us (docs/benchmarks.md, "Peers"), most of it the request counter and latency histogram.

What each answers, and in which order, is what the stack answered: the guard first (its refusals are counted but
carry no CORS headers), then CORS (a preflight is answered there), then the token (its refusals, like every later
answer, carry the CORS headers).
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http.problems import send_refusal
from api.middleware.auth import TokenCheck
from api.middleware.browser_guard import BrowserGuard
from api.middleware.cors import Cors
from api.middleware.request_metrics import RequestMetrics


class Gate:
    """The four checks and the request metrics, run around an app: the middleware's (`RequestGate`) and the command
    socket's direct run of an operation (api/commands/direct.py), which passes each message through the very same
    checks without the rest of the ASGI stack."""

    def __init__(self, metrics: RequestMetrics, guard: BrowserGuard, cors: Cors, auth: TokenCheck) -> None:
        self.metrics = metrics
        self.guard = guard
        self.cors = cors
        self.auth = auth

    async def websocket(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """A handshake: neither counted nor CORS'd, the guard and the token only."""
        refusal = self.guard.refusal(scope) or self.auth.refusal(scope)
        if refusal is not None:
            await send_refusal(scope, receive, send, refusal)
            return
        await app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """An HTTP request: counted and timed, refused by the first check that refuses it, else run by `app`."""
        began = time.perf_counter()
        status = 500  # what the server answers when the app raises before starting a response
        headers_sent = 0.0
        cors, decorated, allowed = self.cors, False, None

        async def send_timed(message: Message) -> None:
            nonlocal status, headers_sent
            if message["type"] == "http.response.start":
                if decorated:
                    cors.decorate(message, allowed)
                status, headers_sent = message["status"], time.perf_counter()
            await send(message)

        self.metrics.begin(scope)
        try:
            refusal = self.guard.refusal(scope)
            if refusal is None:
                refusal, allowed = cors.read(scope)
                if refusal is None:
                    decorated = True
                    refusal = self.auth.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send_timed)
            else:
                await app(scope, receive, send_timed)
        finally:
            self.metrics.end(scope, status, (headers_sent or time.perf_counter()) - began)


class RequestGate:
    """Every HTTP request and WebSocket handshake passes here before the router (api/app.py adds it)."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.gate.http(scope, receive, send, self.app)
        elif kind == "websocket":
            await self.gate.websocket(scope, receive, send, self.app)
        else:
            await self.app(scope, receive, send)
