"""The OpenAPI 3.1 document, generated from the operation tables and their pydantic models."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from api.http.operations import Operation

REF_TEMPLATE = "#/components/schemas/{model}"

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 7807 problem document; `code` is the machine-readable reason.",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "Validation failures, one per bad field",
            "items": {
                "type": "object",
                "properties": {k: {"type": "string"} for k in ("location", "field", "message", "type")},
            },
        },
        "details": {"type": "object"},
        "missingDependencies": {"type": "array", "items": {"type": "string"}},
        "installCommand": {"type": "string"},
    },
}

_STATUS_TEXT = {200: "OK", 204: "No Content", 206: "Partial content (the requested Range)", 400: "Bad request",
                401: "Missing or wrong token", 403: "Forbidden", 404: "Not found",
                409: "Conflict with the current state", 413: "Payload too large", 415: "Wrong content type",
                416: "Range not satisfiable", 421: "A Host this server does not answer to (--allowed-host)",
                429: "Too many (desktops)",
                422: "Body of the wrong shape, or naming what cannot be used (a missing command, directory or file)",
                426: "A WebSocket endpoint asked without the upgrade",
                500: "Internal error", 501: "Not supported on this platform", 502: "Upstream failure",
                503: "Desktop not ready", 504: "Timed out"}


SSE_EVENT = {"schema": {
    "type": "object", "description": "One Server-Sent Event; `data` is the event's JSON",
    "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"},
                   "retry": {"type": "integer"}},
    "required": ["data"]}}
"""What a `text/event-stream` response holds, event by event (OpenAPI has no stream type before 3.2)."""


def _models(operations: Sequence[Operation]) -> list[type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {}
    for op in operations:
        for model in (op.body, op.response):
            if model is not None:
                seen.setdefault(model.__name__, model)
    return list(seen.values())


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """`node` with every `$ref` to `defs` replaced by the definition (merged with the siblings of the ref)."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    if name in defs:
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[name], defs), **_inline(rest, defs)}
    return {k: _inline(v, defs) for k, v in node.items()}


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    # A parameter's schema is self-contained: the query model's own definitions (its enums) are inlined,
    # since only body and response models contribute to components.
    schema = model.model_json_schema(by_alias=True, ref_template=REF_TEMPLATE)
    schema = _inline({k: v for k, v in schema.items() if k != "$defs"}, schema.get("$defs", {}))
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        params.append({"name": name, "in": "query", "required": name in required, "schema": prop,
                       **({"description": prop["description"]} if "description" in prop else {})})
    return params


def _operation(op: Operation, defs: Mapping[tuple[str, str], Any], token: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"summary": op.summary, "operationId": op.operation_id or op.handler.__name__,
                           "tags": list(op.tags)}
    params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
              for n in re.findall(r"{(\w+)(?::\w+)?}", op.path)]
    if op.query is not None:
        params += _query_parameters(op.query)
    if op.ranges:
        params.append({"name": "Range", "in": "header", "required": False, "schema": {"type": "string"},
                       "description": "One byte range, e.g. `bytes=0-1023` or `bytes=-4096` (RFC 9110 §14.2)"})
    if params:
        doc["parameters"] = params
    if op.body is not None:
        doc["requestBody"] = {"required": op.body_required, "content": {
            "application/json": {"schema": defs[(op.body.__name__, "validation")]}}}
    elif op.upload is not None:  # an empty body is one too (an empty file)
        doc["requestBody"] = {"required": False, "content": {
            m.strip(): {"schema": {"type": "string", "format": "binary"}} for m in op.upload.split(",")}}
    responses: dict[str, Any] = {}
    if op.upgrade:
        responses["101"] = {"description": "Switching Protocols: the WebSocket is open"}
    elif op.status == 204 and op.response is None:
        responses["204"] = {"description": _STATUS_TEXT[204]}
    elif op.response is not None:
        responses[str(op.status)] = {"description": _STATUS_TEXT.get(op.status, "OK"), "content": {
            "application/json": {"schema": defs[(op.response.__name__, "serialization")]}}}
    else:
        binary = {"schema": {"type": "string", "format": "binary"}}
        media_types = [m.strip() for m in op.media_type.split(",")]
        responses[str(op.status)] = {"description": "OK", "content": {
            m: SSE_EVENT if m == "text/event-stream" else binary for m in media_types}}
        if op.ranges:
            responses["206"] = {"description": _STATUS_TEXT[206],
                                "content": {m: binary for m in media_types},
                                "headers": {"Content-Range": {"schema": {"type": "string"},
                                                              "description": "e.g. `bytes 0-1023/4096`"}}}
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    # The browser guard answers before any route (api/middleware/browser_guard.py, docs/security.md): a Host this server
    # does not answer to, an Origin it does not serve.
    statuses = set(op.errors) | {403, 421} | ({426} if op.upgrade else set())
    if op.body is not None:
        statuses |= {400, 413, 415, 422}
    if op.query is not None:
        statuses.add(400)
    if token:
        statuses.add(401)
    for status in sorted(statuses):
        responses[str(status)] = {"description": _STATUS_TEXT.get(status, "Error"), "content": problem}
    doc["responses"] = responses
    if token:
        doc["security"] = [{"bearer": []}]
    return doc


def build_openapi(operations: Sequence[Operation], version: str) -> bytes:
    """Serialise the whole API description (once, when it is first asked for: api/app.py)."""
    models = _models(operations)
    keys = [(m, mode) for m in models for mode in ("validation", "serialization")]
    defs, components = models_json_schema(keys, by_alias=True, ref_template=REF_TEMPLATE)  # type: ignore[arg-type]
    by_name: dict[tuple[str, str], Any] = {(m.__name__, mode): schema for (m, mode), schema in defs.items()}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        protected = op.path.startswith("/v1/") and op.path != "/v1/health"
        path = re.sub(r"{(\w+):\w+}", r"{\1}", op.path)
        paths.setdefault(path, {})[op.method.lower()] = _operation(op, by_name, protected)
    schemas = dict(components.get("$defs", {}))
    schemas["Problem"] = PROBLEM_SCHEMA
    document = {
        "openapi": "3.1.0",
        "info": {"title": "sandbox-desktop", "version": version,
                 "description": "A virtual Linux desktop driven over HTTP (wire-compatible with sandbox-agent 0.4.2)."},
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
    return json.dumps(document, indent=None).encode()
