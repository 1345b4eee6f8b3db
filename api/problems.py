"""problem+json rendering for every error the server can answer with."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from desktop.errors import TYPE_PREFIX, ServiceError

logger = logging.getLogger("sandbox_desktop.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"

_HTTP_KINDS = {
    400: ("invalid_request", "Bad Request"),
    401: ("token_invalid", "Token Invalid"),
    404: ("invalid_request", "Not Found"),
    405: ("method_not_allowed", "Method Not Allowed"),
    413: ("invalid_request", "Payload Too Large"),
}


def problem_body(
    status: int, kind: str, title: str, detail: str, code: str, **extensions: Any
) -> dict[str, Any]:
    """The RFC 7807 document: type, title, status, detail, code, then extension members."""
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + kind,
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    body.update({k: v for k, v in extensions.items() if v is not None})
    return body


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A problem document as an HTTP response."""
    return Response(
        json.dumps(body, ensure_ascii=False).encode("utf-8", "replace"),
        status_code=body["status"],
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def service_error_response(exc: ServiceError) -> Response:
    """Render a ServiceError raised anywhere below api/."""
    body = problem_body(exc.status, exc.kind, exc.title, exc.detail(), exc.code, **exc.extensions)
    return problem_response(body, exc.headers)


def http_error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    """Render a framework-level error (unknown route, wrong method) as a problem."""
    kind, title = _HTTP_KINDS.get(status, ("invalid_request", "Error"))
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, kind)
    return problem_response(problem_body(status, kind, title, detail, code), headers)


async def handle_service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    if exc.status >= 500:
        logger.warning("%s %s -> %d %s", request.method, request.url.path, exc.status, exc.message)
    return service_error_response(exc)


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        detail = "endpoint not found"
    elif exc.status_code == 405:
        allow = (exc.headers or {}).get("Allow", "")
        detail = f"method {request.method} is not allowed here; allowed: {allow}"
    else:
        detail = str(exc.detail)
    return http_error_response(exc.status_code, detail, dict(exc.headers or {}))


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    """Last resort: a bug, logged with its traceback, answered as a problem (never plain text)."""
    logger.exception("unhandled error in %s %s", request.method, request.url.path)
    return problem_response(
        problem_body(500, "internal_error", "Internal Server Error", f"internal error: {exc}", "internal_error")
    )


async def refuse_websocket(websocket: WebSocket, exc: ServiceError) -> None:
    """Answer a WebSocket handshake with the problem document, or close with 1008 if the server cannot."""
    try:
        await websocket.send_denial_response(service_error_response(exc))
    except RuntimeError:
        await websocket.close(1008, exc.message[:120])


async def upgrade_required(request: Request) -> Response:
    """A plain HTTP request to a WebSocket's path: 426 saying how to connect, rather than a bare 404."""
    detail = "this endpoint is a WebSocket: connect with an `Upgrade: websocket` handshake"
    return problem_response(problem_body(426, "invalid_request", "Upgrade Required", detail, "upgrade_required"),
                            {"Upgrade": "websocket", "Connection": "Upgrade"})


async def send_refusal(scope: Scope, receive: Receive, send: Send, response: Response) -> None:
    """Answer an HTTP request, or refuse a WebSocket handshake, with `response` (from middleware, before
    any route). A server without the ASGI denial-response extension can only close the socket (1008)."""
    if scope["type"] != "websocket":
        await response(scope, receive, send)
        return
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await send({"type": "websocket.http.response.start", "status": response.status_code,
                    "headers": response.raw_headers})
        await send({"type": "websocket.http.response.body", "body": bytes(response.body)})
    else:
        await send({"type": "websocket.close", "code": 1008})
