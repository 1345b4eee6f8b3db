"""Process input from the wire: the body's bytes in the encoding it names."""

from __future__ import annotations

import base64
import binascii

from desktop.core.errors import FieldError
from sandbox_desktop_wire.enums import InputEncoding
from sandbox_desktop_wire.processes import (
    ProcessInputRequest,
)


def decode_input(body: ProcessInputRequest) -> bytes:
    encoding = body.encoding or "base64"
    if encoding not in INPUT_ENCODINGS:
        allowed = ", ".join(INPUT_ENCODINGS)
        raise field_error("body", "encoding", f"must be one of {allowed}, got {encoding!r}")
    if encoding != "base64":
        return body.data.encode("utf-8")
    try:
        return base64.b64decode(body.data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise field_error("body", "data", f"invalid base64: {exc}") from None


INPUT_ENCODINGS = tuple(InputEncoding)


def field_error(location: str, field: str, message: str) -> FieldError:
    return FieldError([{"location": location, "field": field, "message": message, "type": "value_error"}])
