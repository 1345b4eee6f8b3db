"""A command socket message as read: the request it stands for, or the problem that refuses it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from desktop.core.errors import DomainError, FieldError

COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""A message's body and an answer's head as JSON. Built once: `json.dumps` with any argument builds an encoder on
every call, 4 us of the 6 a mouse.move's body took."""


@dataclass
class Item:
    """One message read: its id and the request it stands for, or the problem that refuses it."""

    id: Any
    method: str = "GET"
    target: str = "/"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    error: DomainError | None = None
    listing: bool = False



def shape_error(field_name: str, message: str) -> FieldError:
    return FieldError([{"location": "message", "field": field_name, "message": message, "type": "message_shape"}],
                      wrong_shape=True)
