"""Wire models of the clipboard endpoints (docs/clipboard.md)."""

from __future__ import annotations

import enum

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel, WireModel

_SELECTION = "`clipboard` (default, what ctrl+c/ctrl+v use) or `primary` (the mouse selection)"
# `selection` is a plain string checked against ClipboardSelection by the server: a wrong name is a 400
# naming the field (docs/clipboard.md), and `both` is valid for writes only.


class ClipboardFormat(enum.StrEnum):
    """What a read answers: the text as JSON (the reference's shape), or the PNG image as `image/png`."""

    TEXT = "text"
    IMAGE = "image"


class ClipboardQuery(QueryModel):
    selection: str | None = Field(default=None, description=f"{_SELECTION}; `both` is refused for reads")
    format: str | None = Field(default=None, description="`text` (default: JSON `{text, selection}`) or `image` "
                               "(the `image/png` bytes; also chosen by `Accept: image/png`); 404 "
                               "`clipboard_no_image` when the selection holds no PNG")


class ClipboardWriteRequest(WireModel):
    text: str | None = Field(default=None, description="Any Unicode text; empty is allowed; tested up to 10 MB. "
                             "Required unless `image` is given")
    image: str | None = Field(default=None, description="A PNG image, base64 (standard alphabet); offered as "
                              "`image/png` next to the text targets when `text` is given too")
    selection: str | None = Field(default=None, description=f"{_SELECTION}, or `both` (clipboard and primary)")


class ClipboardResponse(WireModel):
    text: str = Field(description='The selection\'s text; "" when no application owns the selection')
    selection: str
