"""Wire models of the clipboard endpoints (docs/clipboard.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel, WireModel

_SELECTION = "`clipboard` (default, what ctrl+c/ctrl+v use) or `primary` (the mouse selection)"
# `selection` is a plain string checked against ClipboardSelection by the server: a wrong name is a 400
# naming the field (docs/clipboard.md), and `both` is valid for writes only.


class ClipboardQuery(QueryModel):
    selection: str | None = Field(default=None, description=f"{_SELECTION}; `both` is refused for reads")


class ClipboardWriteRequest(WireModel):
    text: str = Field(description="Any Unicode text; empty is allowed; tested up to 10 MB")
    selection: str | None = Field(default=None, description=f"{_SELECTION}, or `both` (clipboard and primary)")


class ClipboardResponse(WireModel):
    text: str = Field(description='The selection\'s text; "" when no application owns the selection')
    selection: str
