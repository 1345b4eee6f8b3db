"""Base classes for wire models: camelCase aliases, unknown fields ignored, nulls omitted."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A JSON body or response. Field names are snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        defer_build=True,
    )

    def to_json(self) -> bytes:
        """Serialise with wire names, omitting absent (None) optional fields."""
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class QueryModel(WireModel):
    """Query parameters: values arrive as strings, so they are coerced (lax mode)."""


class OkResponse(WireModel):
    """`{"ok": true}`."""

    ok: bool = True
