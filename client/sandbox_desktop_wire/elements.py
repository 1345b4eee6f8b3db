"""An element query on the wire: what `find`, `act`, waits and batch steps use to name elements
(docs/accessibility.md). Its own module, so the wait and batch models can use it without the rest."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.limits import MAX_ELEMENT_TEXT


class ElementQuery(WireModel):
    """Every given criterion must hold; by default only elements showing on the screen match."""

    role: str | None = Field(default=None, description="AT-SPI role (`push-button`) or an ARIA-like alias (`button`, "
                             "`textbox`, `checkbox`, `link`, `tab`...)")
    name: str | None = Field(default=None, max_length=MAX_ELEMENT_TEXT, description="The exact accessible name")
    name_contains: str | None = Field(default=None, max_length=MAX_ELEMENT_TEXT,
                                      description="Case-insensitive substring")
    name_regex: str | None = Field(default=None, max_length=MAX_ELEMENT_TEXT, description="A Python regular expression "
                                   "searched in the name")
    states: list[str] = Field(default=[], max_length=16, description="States the element must have, e.g. [\"enabled\"]")
    window: str = Field(default="all", description="`all`, `focused`, or a decimal window id")
    include_hidden: bool = False


ElementTarget = int | str | ElementQuery
"""An element's id, a number of the last set-of-marks screenshot, or a query that must match exactly one
element (else 404 or 409)."""


class ElementCondition(ElementQuery):
    """A wait for elements matching the query (docs/events.md)."""

    until: str = Field(default="present", description="`present`, `gone`, or a state some matching element must have "
                       "(`focused`, `checked`, `enabled`, `showing`...)")
