"""The transport of `/v1/mcp`'s tools (api/mcp/http.py): the server's own app as their HTTP server, in-process.

A module of its own so that the server loads httpx and the client only with the first MCP session."""

from __future__ import annotations

import asyncio
import contextvars

import httpx
from starlette.types import ASGIApp

from desktop.events.action_log import action_source
from sandbox_desktop_wire.enums import ActionSource


class InProcess(httpx.AsyncBaseTransport):
    """The app as the tools' HTTP server. A request outlives the tool call that sent it: a call that times out
    (--mcp-timeout) lets the action carry on to its end, as the server does when `sandbox-desktop mcp` stops
    waiting for an answer over the network (docs/mcp.md: "look before retrying")."""

    def __init__(self, app: ASGIApp) -> None:
        # A failing route is the 500 problem a network client gets, not an exception in the tool.
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._running: set[asyncio.Task[httpx.Response]] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # The tools' actions are the agent's, logged and held for approval as `mcp` (docs/action-log.md).
        context = contextvars.copy_context()
        context.run(action_source.set, ActionSource.MCP)
        task = asyncio.get_running_loop().create_task(self._asgi.handle_async_request(request), context=context)
        self._running.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[httpx.Response]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: nobody may be waiting for it any more

    async def aclose(self) -> None:
        """At shutdown: end the requests still running (the desktops are shut down next)."""
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
