"""`GET /v1/desktop/events` (Server-Sent Events) and `POST /v1/desktop/wait` (docs/events.md).

The stream is the desktop's event bus (desktop/events/bus.py) as SSE: `id:` is the event's `seq`, `event:` its
type, `data:` its JSON. It outlives stops and starts of the desktop (they are events too) and ends when the
client goes away or the server shuts down. A wait answers 200 either way: `matched` says whether the
condition held before the timeout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from api.convert.waits import CONDITIONS, condition_of, result_fields
from api.http.operations import Operation
from api.http.problems import refuse_websocket, upgrade_required
from api.server.services import desktop_of
from desktop.actions import waits
from desktop.core.errors import DomainError, FieldError, invalid_action
from desktop.core.parsing import ascii_int
from desktop.events.bus import Event, Missed, Subscription, parse_types
from sandbox_desktop_wire.events import EventsQuery, EventType
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.waits import WaitRequest, WaitResponse

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
KEEPALIVE_S = 15.0
EVENTS_SOCKET_PATH = "/v1/desktop/events/ws"
TAGS = ("events",)


# -- conditions: wire to domain -------------------------------------------------------------------


async def wait(request: Request, *, body: WaitRequest) -> WaitResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    condition = condition_of(body, session, desktop.accessibility)
    result = await waits.wait_for(desktop.events, condition, body.timeout_ms / 1000)
    kind = next(name for name in CONDITIONS if getattr(body, name) is not None)
    return WaitResponse(condition=kind, elapsed_ms=result.elapsed_ms, **result_fields(result))


# -- the event stream ----------------------------------------------------------------------------

def since_of(request: Request, query: EventsQuery) -> int | None:
    """`since`, or the SSE `Last-Event-ID` header a reconnecting client sends."""
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return query.since
    seq = ascii_int(raw.strip())
    if seq is None:
        raise FieldError([{"location": "header", "field": "Last-Event-ID", "type": "value_error",
                           "message": f"must be an event's seq, got {raw[:40]!r}"}])
    return seq if query.since is None else max(seq, query.since)


def sse(item: Event | Missed) -> bytes:
    if isinstance(item, Missed):
        return f"event: {EventType.EVENTS_MISSED}\ndata: {sse_data(item)}\n\n".encode()
    return f"id: {item.seq}\nevent: {item.type}\ndata: {sse_data(item)}\n\n".encode()


async def stream(subscription: Subscription, follow: bool) -> AsyncIterator[bytes]:
    """The SSE body; a keep-alive comment after 15 s of silence. Ends when the bus closes the subscription
    (server shutdown), or without `follow` once the held events are sent; a client that leaves cancels
    it, and the subscription goes with it."""
    try:
        yield b": connected\n\n"  # headers and a first byte now: the client knows it is subscribed
        while True:
            item = await subscription.next(timeout=KEEPALIVE_S if follow else 0)
            if item is None:
                if subscription.closed or not follow:
                    return
                yield b": keep-alive\n\n"
                continue
            yield sse(item)
    finally:
        subscription.close()


def types_of(query: EventsQuery) -> frozenset[EventType] | None:
    try:
        return parse_types(query.types)
    except ValueError as exc:
        raise invalid_action(f"unknown event type {str(exc)[:60]!r}; one of {', '.join(EventType)} or a subject "
                             "like `window.`", "types", "query") from None


async def events(request: Request, *, query: EventsQuery) -> StreamingResponse:
    types = types_of(query)
    since = since_of(request, query)
    follow = query.follow and request.method != "HEAD"  # a HEAD has no body to stream into
    subscription = desktop_of(request).events.bus.subscribe(types, 0 if since is None and not follow else since)
    return StreamingResponse(stream(subscription, follow), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


OPERATIONS = [
    Operation("GET", "/v1/desktop/events", events,
              "The desktop's events as Server-Sent Events: windows, screen, clipboard, processes, state "
              "(`types=` filters, `Last-Event-ID`/`since` replays)", query=EventsQuery,
              media_type="text/event-stream", invalid_code=INVALID, errors=(400,), tags=TAGS),
    Operation("GET", EVENTS_SOCKET_PATH, upgrade_required,
              "The same events over a WebSocket, one JSON text message each (`types`, `since` as for the "
              "stream; ?access_token= for browsers)", upgrade=True, errors=(400,), tags=TAGS),
    Operation("POST", "/v1/desktop/wait", wait,
              "Wait until one condition (window, screen, clipboard or element) holds, answering as soon as it does; "
              "`matched: false` with the last observed state at the timeout", body=WaitRequest,
              response=WaitResponse, body_required=True, invalid_code=INVALID, errors=(409, 503), tags=TAGS),
]


async def events_socket(websocket: WebSocket) -> None:
    """`GET /v1/desktop/events` as a WebSocket: each event (and `events.missed`) one JSON text message."""
    try:
        query = EventsQuery.model_validate(dict(websocket.query_params))
        subscription = desktop_of(websocket).events.bus.subscribe(types_of(query), query.since)
    except ValidationError as exc:
        await refuse_websocket(websocket, FieldError([{"field": str(e["loc"][0]), "message": e["msg"]}
                                                      for e in exc.errors()]))
        return
    except DomainError as exc:
        await refuse_websocket(websocket, exc)
        return
    await websocket.accept()
    # The client sends nothing; reading tells when it leaves, so a quiet desktop does not keep a dead socket.
    gone = asyncio.ensure_future(websocket.receive())
    try:
        while not gone.done():
            following = asyncio.ensure_future(subscription.next())
            await asyncio.wait((gone, following), return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                break
            item = following.result()
            if item is None:  # the server is shutting down
                await websocket.close(1001, "server shutting down")
                break
            await websocket.send_text(sse_data(item))
    except WebSocketDisconnect:
        pass
    finally:
        gone.cancel()
        subscription.close()


def sse_data(item: Event | Missed) -> str:
    return json.dumps(item.to_wire(), separators=(",", ":"))


WEBSOCKET_ROUTES = [WebSocketRoute(EVENTS_SOCKET_PATH, events_socket)]
