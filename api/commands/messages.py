"""A command socket message as read: the request it stands for, or the problem that refuses it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from desktop.core.errors import DomainError, FieldError


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
