"""Operations: one table row per HTTP endpoint, with the models that parse and document it.

A route module declares `OPERATIONS = [Operation(...), ...]`; `api/app.py` turns the table into
Starlette routes and `api/http/openapi.py` into the OpenAPI document, so the two never disagree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from desktop.core.errors import FieldError, PayloadTooLarge, UnsupportedMediaType
from desktop.core.parsing import ascii_int
from desktop.events.action_log import action_wait
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.problems import PROBLEMS, ProblemCode

M = TypeVar("M", bound=BaseModel)

Handler = Callable[..., Awaitable[Any]]
Guard = Callable[[Request, dict[str, Any]], Awaitable[None]]
"""Runs after the inputs are parsed and before the handler, with its keyword arguments (`body=`, `query=`); raising
refuses the request. The approval gate (api/approvals/gate.py) is the one guard."""

# A JSON body larger than this is refused before it is parsed (413).
MAX_JSON_BODY_BYTES = 64 * 1024 * 1024
# Bodies larger than this are parsed in a worker thread: a 10 MB text takes ~100 ms to validate.
OFF_LOOP_PARSE_BYTES = 1024 * 1024

# pydantic error types that mean "the JSON has the wrong shape" (422) rather than
# "a value is out of range" (400): the split the reference's clients already expect.
_SHAPE_ERRORS = ("missing", "_type", "enum", "literal_error", "json_invalid", "model_attributes_type",
                 "is_instance_of", "union_tag", "dict_type", "list_type")

PREFER_WAIT_MAX_S = 3600
"""The longest `Prefer: wait=N` honoured; a longer one is cut to it."""

# Every status some problem code is answered with: the only error statuses an operation can document.
PROBLEM_STATUSES = frozenset(status for spec in PROBLEMS.values() for status in (spec.status, *spec.also))


@dataclass(frozen=True)
class Operation:
    """One endpoint: method, path, handler and the models that describe it."""

    method: str
    path: str
    handler: Handler
    summary: str
    body: type[BaseModel] | None = None
    """Model of the JSON request body; the handler receives it as `body=`."""
    query: type[BaseModel] | None = None
    """Model of the query string; the handler receives it as `query=`."""
    response: type[BaseModel] | None = None
    """Model of a 200 JSON response; a handler returning a model gets it serialised."""
    media_type: str = "application/json"
    """Media type of a non-JSON success response (images, video, event streams); a comma-separated
    list when the request chooses among several (`image/png, image/jpeg, image/webp`)."""
    status: int = 200
    upgrade: bool = False
    """A WebSocket endpoint: the document shows its handshake (101); a plain HTTP request gets a 426."""
    ranges: bool = False
    """A binary response that honours a `Range` header: 206 with Content-Range (and 416) as well."""
    errors: tuple[int, ...] = ()
    """Error statuses worth documenting besides 401 and the validation ones; each must be one the problem table
    (sandbox_desktop_wire/problems.py) answers some code with."""
    invalid_code: ProblemCode = ProblemCode.INVALID_REQUEST
    """Problem code for out-of-range values (desktop routes use `desktop_invalid_action`)."""
    body_required: bool = False
    """Whether an empty body is an error; otherwise it reads as `{}`."""
    upload: str | None = None
    """Media type of a raw request body the handler reads itself (a file's bytes, a tar), a comma-separated list
    when it takes several; the document and the CLI (`-i FILE`) offer it."""
    tags: tuple[str, ...] = field(default_factory=tuple)
    operation_id: str | None = None
    """The OpenAPI operationId when the handler's name is taken (a per-desktop copy of an operation)."""
    guard: Guard | None = None
    """Set by the app (api/app.py) for operations an approval policy may hold."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.errors) - PROBLEM_STATUSES)
        if unknown:  # a typo, or a status no error of the server is answered with (the problem table)
            raise ValueError(f"{self.method} {self.path}: no problem code is answered with {unknown}")

    async def endpoint(self, request: Request, body: bytes | None = None) -> Response:
        """The Starlette endpoint: parse inputs, call the handler, serialise the result. `body`: the request's body
        when the caller has it already (a command socket's message), instead of reading the request's stream."""
        kwargs: dict[str, Any] = {}
        if self.query is not None:
            kwargs["query"] = parse_query(request, self.query, self.invalid_code)
        if self.body is not None:
            raw = (await read_raw_json(request, self.body_required) if body is None
                   else raw_json(body, request.headers.get("content-type", ""), self.body_required))
            kwargs["body"] = await parse_json(raw, self.body, self.invalid_code)
        # How long the caller lets its action wait for a person (an approval, a takeover queue), for the whole
        # handler: whatever holds the action reads it from the context (desktop/events/action_log.py `action_wait`).
        wait = prefer_wait(request.scope["headers"])
        reset = action_wait.set(wait) if wait is not None else None
        try:
            if self.guard is not None:
                await self.guard(request, kwargs)
            result = await self.handler(request, **kwargs)
        finally:
            if reset is not None:
                action_wait.reset(reset)
        if isinstance(result, Response):
            return result
        if isinstance(result, WireModel):
            return Response(result.to_json(), status_code=self.status, media_type="application/json")
        if result is None:
            return Response(status_code=204)
        raise TypeError(f"{self.handler.__name__} returned {type(result).__name__}")


class OperationRoute(Route):
    """The Starlette route of one path: its operations by method (a wrong method is a 405 with Allow). The command
    socket finds a message's operation through it (api/commands/direct.py)."""

    def __init__(self, path: str, operations: dict[str, Operation]) -> None:
        self.operations = operations
        super().__init__(path, self.dispatch if len(operations) > 1 else next(iter(operations.values())).endpoint,
                         methods=list(operations))

    async def dispatch(self, request: Request) -> Response:
        return await self.operations["GET" if request.method == "HEAD" else request.method].endpoint(request)


def prefer_wait(headers: list[tuple[bytes, bytes]]) -> float | None:
    """Seconds of the request's `Prefer: wait=N` (RFC 7240, N a non-negative integer, at most PREFER_WAIT_MAX_S), or
    None. A preference the server does not understand is ignored, as the RFC asks, never an error."""
    for name, value in headers:
        if name != b"prefer":
            continue
        for preference in value.decode("latin-1").split(","):
            key, _, given = preference.split(";", 1)[0].partition("=")
            if key.strip().lower() == "wait":
                given = given.strip().strip('"')
                if given.isascii() and given.isdigit():
                    digits = given.lstrip("0") or "0"  # a long one is past the maximum (and int() refuses 4300)
                    return float(PREFER_WAIT_MAX_S if len(digits) > 6 else min(int(digits), PREFER_WAIT_MAX_S))
    return None


def field_errors(exc: ValidationError, location: str, model: type[BaseModel]) -> list[dict[str, str]]:
    """Turn pydantic errors into `[{location, field, message, type}]` with wire field names."""
    out = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        message = err["msg"]
        if err["type"] == "missing":
            message = "field required"
        out.append({
            "location": location,
            "field": ".".join(loc) or location,
            "message": message,
            "type": err["type"],
        })
    return out


def _is_shape_error(exc: ValidationError) -> bool:
    return any(any(s in e["type"] for s in _SHAPE_ERRORS) for e in exc.errors())


def validation_problem(exc: ValidationError, location: str, model: type[BaseModel], invalid_code: str) -> FieldError:
    """422 for a body of the wrong shape, 400 (with the route's code) for bad values."""
    errors = field_errors(exc, location, model)
    if location == "body" and _is_shape_error(exc):
        return FieldError(errors, wrong_shape=True)
    return FieldError(errors, code=invalid_code)


async def read_raw_json(request: Request, required: bool) -> bytes:
    """The request body bytes, enforcing the content type and a size limit; empty reads as `{}`."""
    length = ascii_int(request.headers.get("content-length"))
    if length is not None and length > MAX_JSON_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_JSON_BODY_BYTES} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_JSON_BODY_BYTES:
            raise PayloadTooLarge(f"request body exceeds {MAX_JSON_BODY_BYTES} bytes")
    return raw_json(bytes(raw), request.headers.get("content-type", ""), required)


def raw_json(raw: bytes, content_type: str, required: bool) -> bytes:
    """A whole body as JSON to parse: within the size limit and of a JSON content type; empty reads as `{}`."""
    if len(raw) > MAX_JSON_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_JSON_BODY_BYTES} bytes")
    if not raw.strip():
        if required:
            raise FieldError([{"location": "body", "field": "body", "message": "a JSON body is required",
                               "type": "missing"}], wrong_shape=True)
        return b"{}"
    media_type = content_type.split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"expected Content-Type: application/json, got {media_type or 'none'}"
        )
    return raw


async def parse_json(raw: bytes, model: type[M], invalid_code: str) -> M:
    """Validate a JSON body strictly (no "5" for 5, no 1.5 for an integer; a large one off the event loop);
    400/422 naming the field."""
    try:
        if len(raw) > OFF_LOOP_PARSE_BYTES:
            return await asyncio.to_thread(model.model_validate_json, raw, strict=True)
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        bad_json = [e for e in exc.errors() if e["type"] == "json_invalid"]
        if bad_json:
            message = f"malformed JSON: {bad_json[0]['msg']}"
            raise FieldError([{"location": "body", "field": "body", "message": message,
                               "type": "json_invalid"}]) from None
        raise validation_problem(exc, "body", model, invalid_code) from None


def parse_query(request: Request, model: type[M], invalid_code: str) -> M:
    """Parse query parameters (strings coerced to the declared types); the last value wins."""
    raw = request.scope["query_string"]
    # As Starlette's QueryParams parse it, without building one: most requests carry no query at all.
    params: dict[str, Any] = dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True)) if raw else {}
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise validation_problem(exc, "query", model, invalid_code) from None
