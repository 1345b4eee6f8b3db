"""What a pending element wait keeps between its checks, and the quick check of one changed object.

A wait checks its query again after each change the bus announces (desktop/waits.py). A whole `find`
reads the applications and their windows, matches those to X windows, then asks each window in scope
for its candidates: 13-17 ms on a 1,100-object Chromium page. Two things make a check cheaper:

- The windows (applications, top-level objects and the X windows they are) are kept for the wait's
  life and read again only after a window event (`forget_windows`), so a full check costs only the
  question to each window.
- A change names an object: the child a `children-changed:add` added, the object whose state or name
  changed. `find_below` reads that object and, in one `Collection.GetMatches`, what below it the query
  can match, then the object's chain of parents up to its top-level object, which must be one of the
  windows in the query's scope: the same rule as `find` (showing; role, name, states; in scope), asked
  of a few objects instead of a window. It only ever says "these match"; when it finds nothing, or the
  object's application has no `Collection` (Qt's, known by its toolkit and not even asked: `find` walks
  those, pruning what is hidden), the wait falls back to the full check, so nothing a `find` would see
  is missed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from desktop.accessibility.atspi import COLLECTION, ROOT_PATH
from desktop.accessibility.query import ElementQuery
from desktop.accessibility.reading import NO_GET_ALL, bounded_read, read_below, top_level_of
from desktop.accessibility.tree import Element, fill_details, parse_element_id
from desktop.accessibility.windows import WindowTops
from desktop.session import Session

if TYPE_CHECKING:
    from desktop.accessibility.service import Accessibility

ROOT_SUFFIX = ":" + ROOT_PATH.rsplit("/", 1)[1]
"""How an application's own object (or the registry's) ends in an id: its children are windows."""


class ElementWatch:
    """One pending wait's reader of the tree (handed out by `Accessibility.watching`)."""

    def __init__(self, accessibility: Accessibility, session: Session) -> None:
        self._accessibility = accessibility
        self._session = session
        self._tops: WindowTops | None = None

    def forget_windows(self) -> None:
        """A window came, went, was retitled or refocused: read the windows again at the next check."""
        self._tops = None

    def is_window_change(self, element: str, change: str) -> bool:
        """Whether an accessibility change can change the windows: a `window:` event, a change on an
        application's own object (windows added or removed; the registry's: an application came or went),
        on a top-level object (renamed, shown), or from an application not read yet."""
        if change.startswith("window:") or element.endswith(ROOT_SUFFIX):
            return True
        if self._tops is None:
            return False
        ref = parse_element_id(element)
        return (ref is None or all(app.bus != ref[0] for app in self._tops.applications)
                or any(top.id == element for top in self._tops.tops))

    async def windows(self) -> WindowTops:
        if self._tops is None:
            self._tops = await self._accessibility.windows(self._session)
        return self._tops

    async def find(self, query: ElementQuery) -> list[Element]:
        """`Accessibility.find`, from the windows kept."""
        return await self._accessibility.find(self._session, query, await self.windows())

    async def find_below(self, query: ElementQuery, element: str) -> list[Element]:
        """The elements matching `query` among `element` and its descendants, if it lies in a window of the
        query's scope, with their details; empty when none does or this cannot tell (see the module)."""
        ref = parse_element_id(element)
        tops = await self.windows()
        scope = tops.in_scope(query.window)  # a window id that is gone: none (the full check says so)
        app = next((a for a in tops.applications if ref is not None and a.bus == ref[0]), None)
        if ref is None or not scope or app is None or app.toolkit in NO_GET_ALL:
            return []  # Qt's objects have no `Collection`: not worth reading
        bus = await self._accessibility.bus(self._session)
        async with bounded_read():
            below, top = await asyncio.gather(read_below(bus, tops.applications, *ref, query.prefilter),
                                              top_level_of(bus, *ref))
            if not below or COLLECTION not in below[0].interfaces or top is None or top not in scope:
                return []
            found = [e for e in below if query.matches(e)][:query.limit]
            await fill_details(bus, found)
        for e in found:
            e.window_id = scope[top]
        return found

