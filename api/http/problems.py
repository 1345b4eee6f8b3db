"""problem+json rendering for every error the server can answer with.

The one place where a domain exception (desktop/core/errors.py) becomes HTTP: its code's status and title
come from the wire's table (sandbox_desktop_wire/problems.py), `RENDERINGS` says what each exception
type adds (another status, the generic detail), and a `retry_after` becomes `Retry-After`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from desktop.core.errors import DomainError, FieldError, GenericError, NotFound, RangeNotSatisfiable
from desktop.processes.child import InputNotRead
from sandbox_desktop_wire.problems import PROBLEMS, TYPE_PREFIX, ProblemCode

logger = logging.getLogger("sandbox_desktop.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"

# Errors the framework raises before any route (an unknown path, a wrong method): (type suffix, title).
_HTTP_KINDS = {
    400: ("invalid_request", "Bad Request"),
    401: ("token_invalid", "Token Invalid"),
    404: ("invalid_request", "Not Found"),
    405: ("method_not_allowed", "Method Not Allowed"),
    413: ("invalid_request", "Payload Too Large"),
}


@dataclass(frozen=True)
class Rendering:
    """How an exception type differs from its code's row in the table."""

    status: int | None = None
    """A status other than the code's (one of the row's `also`)."""
    prefixed: bool = False
    """The detail starts with the type's words (`conflict: ...`), as the reference's clients expect."""


# Looked up along the exception's MRO: the most specific type listed decides.
RENDERINGS: dict[type[DomainError], Rendering] = {
    GenericError: Rendering(prefixed=True),
    NotFound: Rendering(prefixed=True),
    # The process's state, not a fault of the server: a 409 that keeps the `timeout` code (docs/processes.md).
    InputNotRead: Rendering(status=409, prefixed=True),
}


def rendering_of(exc: DomainError) -> Rendering:
    for cls in type(exc).__mro__:
        if cls in RENDERINGS:
            return RENDERINGS[cls]
    return Rendering()


def status_of(exc: DomainError) -> int:
    """The HTTP status of a domain exception."""
    if isinstance(exc, FieldError) and exc.wrong_shape:
        return 422
    return rendering_of(exc).status or PROBLEMS[exc.code].status


def problem_document(exc: DomainError) -> dict[str, Any]:
    """The problem+json document of a domain exception (also embedded in a batch's `error`)."""
    spec = PROBLEMS[exc.code]
    status = status_of(exc)
    kind = spec.type_suffix or exc.code.value
    detail = exc.message
    if rendering_of(exc).prefixed:
        detail = f"{kind.replace('_', ' ')}: {detail}"
    return problem_body(status, kind, spec.title_for(status), detail, exc.code.value, **exc.extensions)


def problem_headers(exc: DomainError) -> dict[str, str]:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
    if isinstance(exc, RangeNotSatisfiable):
        headers["Content-Range"] = f"bytes */{exc.size}"  # the file's size, with the 416 (docs/recording.md)
    return headers


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


def domain_error_response(exc: DomainError) -> Response:
    """Render a domain exception raised anywhere below api/."""
    return problem_response(problem_document(exc), problem_headers(exc))


def http_error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    """Render a framework-level error (unknown route, wrong method) as a problem."""
    kind, title = _HTTP_KINDS.get(status, ("invalid_request", "Error"))
    code = {404: ProblemCode.NOT_FOUND, 405: ProblemCode.METHOD_NOT_ALLOWED}.get(status, kind)
    return problem_response(problem_body(status, kind, title, detail, code), headers)


async def handle_domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    status = status_of(exc)
    if status >= 500:
        logger.warning("%s %s -> %d %s", request.method, request.url.path, status, exc.message)
    return domain_error_response(exc)


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
        problem_body(500, ProblemCode.INTERNAL_ERROR, PROBLEMS[ProblemCode.INTERNAL_ERROR].title,
                     f"internal error: {exc}", ProblemCode.INTERNAL_ERROR)
    )


async def refuse_websocket(websocket: WebSocket, exc: DomainError) -> None:
    """Answer a WebSocket handshake with the problem document, or close with 1008 if the server cannot."""
    try:
        await websocket.send_denial_response(domain_error_response(exc))
    except RuntimeError:
        await websocket.close(1008, exc.message[:120])


async def upgrade_required(request: Request) -> Response:
    """A plain HTTP request to a WebSocket's path: 426 saying how to connect, rather than a bare 404."""
    detail = "this endpoint is a WebSocket: connect with an `Upgrade: websocket` handshake"
    spec = PROBLEMS[ProblemCode.UPGRADE_REQUIRED]
    body = problem_body(spec.status, spec.type_suffix or ProblemCode.UPGRADE_REQUIRED, spec.title, detail,
                        ProblemCode.UPGRADE_REQUIRED)
    return problem_response(body, {"Upgrade": "websocket", "Connection": "Upgrade"})


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
