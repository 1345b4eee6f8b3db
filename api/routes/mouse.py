"""`/v1/desktop/mouse/*`: translates HTTP to calls of `desktop.input.mouse.Mouse`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from api.convert.effects import observed
from api.http.operations import Handler, Operation
from api.server.services import desktop_of
from desktop.input.mouse import PointerState
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.effects import Effect
from sandbox_desktop_wire.mouse import (
    MouseButtonRequest,
    MouseClickRequest,
    MouseDragRequest,
    MouseMoveRequest,
    MousePositionResponse,
    MouseScrollRequest,
)
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (409, 502, 503)
CLIENT_CLOSED_REQUEST = 499
T = TypeVar("T")


def position_model(state: PointerState, effect: Effect | None = None) -> MousePositionResponse:
    window = str(state.window) if state.window is not None else None
    return MousePositionResponse(x=state.x, y=state.y, screen=state.screen, window=window, effect=effect)


async def position(request: Request) -> MousePositionResponse:
    desktop = desktop_of(request)
    return position_model(await desktop.mouse.position(desktop.session()))


async def move(request: Request, body: MouseMoveRequest) -> MousePositionResponse:
    desktop = desktop_of(request)
    return position_model(*await observed(desktop, body.report_effect,
                                          lambda: desktop.mouse.move(desktop.session(), body.x, body.y)))


async def click(request: Request, body: MouseClickRequest) -> MousePositionResponse:
    desktop = desktop_of(request)
    return position_model(*await observed(desktop, body.report_effect, lambda: desktop.mouse.click(
        desktop.session(), body.x, body.y, body.button, body.click_count)))


async def down(request: Request, body: MouseButtonRequest) -> MousePositionResponse:
    return await _button(request, body, down=True)


async def up(request: Request, body: MouseButtonRequest) -> MousePositionResponse:
    return await _button(request, body, down=False)


async def _button(request: Request, body: MouseButtonRequest, down: bool) -> MousePositionResponse:
    desktop = desktop_of(request)
    return position_model(*await observed(desktop, body.report_effect, lambda: desktop.mouse.button(
        desktop.session(), body.x, body.y, body.button, down=down)))


async def drag(request: Request, body: MouseDragRequest) -> MousePositionResponse | Response:
    desktop = desktop_of(request)
    dragging = desktop.mouse.drag(desktop.session(), (body.start_x, body.start_y), (body.end_x, body.end_y),
                                  body.button, body.steps, body.duration_ms)
    state, effect = await observed(desktop, body.report_effect, lambda: unless_client_leaves(request, dragging))
    if state is None:  # nobody to answer; the status is for the access log and metrics
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return position_model(state, effect)


async def unless_client_leaves(request: Request, work: Coroutine[Any, Any, T]) -> T | None:
    """`await work`, or cancel it when the client disconnects first (None then).

    A drag may last a minute and holds the desktop's input lock all along (docs/mouse.md): one whose
    client is gone stops where it is and releases its button rather than keep every other input
    waiting.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
        if task not in done and watcher.exception() is not None:  # no way to watch: let the work finish
            await asyncio.wait((task,))
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))  # its clean-up (the button's release) has run when this returns
    return None if task.cancelled() else task.result()


async def _disconnected(request: Request) -> None:
    # The body has been read: the next message the server delivers is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def scroll(request: Request, body: MouseScrollRequest) -> MousePositionResponse:
    desktop = desktop_of(request)
    return position_model(*await observed(desktop, body.report_effect, lambda: desktop.mouse.scroll(
        desktop.session(), body.x, body.y, body.delta_x, body.delta_y)))


def _op(method: str, path: str, handler: Handler, summary: str, body: type[WireModel] | None = None) -> Operation:
    return Operation(method, "/v1/desktop/mouse/" + path, handler, summary, body=body,
                     response=MousePositionResponse, invalid_code=INVALID, errors=ERRORS, tags=("mouse",))


OPERATIONS = [
    _op("GET", "position", position, "Pointer position and the window under it"),
    _op("POST", "move", move, "Move the pointer", MouseMoveRequest),
    _op("POST", "click", click, "Click (clickCount 1-3)", MouseClickRequest),
    _op("POST", "down", down, "Press a button", MouseButtonRequest),
    _op("POST", "up", up, "Release a button", MouseButtonRequest),
    _op("POST", "drag", drag, "Press, move along a path, release", MouseDragRequest),
    _op("POST", "scroll", scroll, "Turn the wheel (deltaX/deltaY in clicks)", MouseScrollRequest),
]
