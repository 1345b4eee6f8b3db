"""One changed object, looked at alone: did this change make an element query match?

A pending element wait used to answer every tree change with a whole `find` (the applications, their
windows, a `GetMatches` over each window: 15-25 ms on a 1,000-object Chromium page, most of it the page
answering `GetMatches`). But an AT-SPI change names the object it is about: the child added, the object
renamed, the object whose state changed. Reading that object (two pipelined calls) says at once whether it
is the element waited for. Only when it is does the wait need to know where it is (its window, for the
query's scope and the answer's `windowId`): its ancestors up to its top-level object, walked in the same
time as the applications' windows are read. An object with others below it (what came with it, what a
page loaded into it) is asked for its matches in one `GetMatches`. What this cannot decide (a label, which
may name a field; an object without `Collection`, as Qt's) falls back to the whole `find`
(docs/accessibility.md "Waiting for an element").
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Awaitable, Callable

from desktop.accessibility.atspi import (
    ACCESSIBLE,
    COLLECTION,
    NULL_PATH,
    PROPERTIES,
    ROOT_PATH,
    AtspiBus,
    decode_states,
)
from desktop.accessibility.labels import FIELD_ROLES, LABEL_ROLES
from desktop.accessibility.query import ElementQuery, WindowScope
from desktop.accessibility.reading import application_infos, matching, read_objects, read_tops
from desktop.accessibility.tree import Application, Element, element_id, fill_details, parse_element_id
from desktop.accessibility.windows import assign_windows, scope_roots
from desktop.windows.query import WindowInfo

MAX_DEPTH = 256
"""Ancestors walked at most (a toolkit's broken parent chain must not loop forever)."""


class Verdict(enum.Enum):
    UNCHANGED = "unchanged"
    """The object is not a match and cannot make one appear: nothing to check."""
    RECHECK = "recheck"
    """The object is no match, but something below it (or a field it labels) may be: run the whole find."""
    HIDDEN = "hidden"
    """The object would match but does not show (it, or something above it): it may start to without a
    change of its own being announced (a toolkit laying it out later), so the whole find should look again."""


def may_name_a_field(element: Element, query: ElementQuery) -> bool:
    """Whether the object may give its name to an unnamed field beside it (desktop/accessibility/labels.py),
    or be such a field, which only the whole find names."""
    names_something = query.name is not None or query.name_contains is not None or query.name_regex is not None
    unnamed_field = element.role in FIELD_ROLES and not element.name.strip()
    return names_something and (element.role in LABEL_ROLES or unnamed_field)


async def matches_below(bus: AtspiBus, apps: list[Application], element: Element,
                        query: ElementQuery) -> list[Element] | Verdict:
    """What the query matches under `element` (which came, or started to show, with all below it), asked of
    it in one `GetMatches`; RECHECK where that cannot tell (no `Collection`: Qt; a field to be named)."""
    if COLLECTION not in element.interfaces:
        return Verdict.RECHECK
    [refs] = await matching(bus, [element], query.prefilter)
    found = await read_objects(bus, apps, refs, query.name_matches)
    if any(may_name_a_field(e, query) for e in found):
        return Verdict.RECHECK
    return [e for e in found if query.matches(e)]


async def top_level(bus: AtspiBus, element: Element) -> tuple[str, bool] | None:
    """The id of the element's top-level object (its window's), and whether every ancestor between shows;
    None if the chain broke (an ancestor went meanwhile)."""
    if element.parent is None:
        return element.id, True
    ref = parse_element_id(element.parent)
    showing = True
    for _ in range(MAX_DEPTH):
        if ref is None:
            return None
        parent, states = await bus.call_all([(ref[0], ref[1], PROPERTIES, "Get", "ss", (ACCESSIBLE, "Parent")),
                                             (ref[0], ref[1], ACCESSIBLE, "GetState", "", ())])
        if not (isinstance(parent, list) and isinstance(states, list)):
            return None
        above = parent[0].value
        if str(above[1]) in (ROOT_PATH, NULL_PATH):  # its parent is the application: this is the top
            return element_id(*ref), showing
        decoded = decode_states(states[0])
        showing = showing and "showing" in decoded and "visible" in decoded
        ref = (str(above[0]), str(above[1]))
    return None


async def examine(bus: AtspiBus, list_windows: Callable[[], Awaitable[list[WindowInfo]]], ref: str,
                  query: ElementQuery) -> Element | Verdict:
    """The element `ref` names, or one below it, with its bounds and window, if it matches `query` now (in
    the query's windows, showing unless the query includes hidden ones); otherwise whether the whole find
    must run. What lies below the object is looked at whatever the change was: a change of a container can
    mean its contents are new without any change of theirs being announced (Chromium announces a page that
    finished loading only as its document taking the focus, and its window being renamed)."""
    parsed = parse_element_id(ref)
    if parsed is None:
        return Verdict.RECHECK
    apps = await application_infos(bus, [(parsed[0], ROOT_PATH)])
    found = await read_objects(bus, apps, [parsed])
    if not found:
        return Verdict.UNCHANGED  # gone already: it matches nothing
    element = found[0]
    if not query.matches(element):
        if may_name_a_field(element, query):
            return Verdict.RECHECK
        if not element.child_count:
            hidden_match = not query.include_hidden and dataclasses.replace(query, include_hidden=True).matches(element)
            return Verdict.HIDDEN if hidden_match else Verdict.UNCHANGED
        below = await matches_below(bus, apps, element, query)
        if isinstance(below, Verdict):
            return below
        if not below:
            return Verdict.UNCHANGED
        element = below[0]
    return await placed(bus, list_windows, element, query)


async def placed(bus: AtspiBus, list_windows: Callable[[], Awaitable[list[WindowInfo]]], element: Element,
                 query: ElementQuery) -> Element | Verdict:
    """A matching element with its bounds and window id, if it lies in the query's windows and nothing
    above it hides it."""
    chain, tops, listed = await asyncio.gather(top_level(bus, element), read_tops(bus), list_windows())
    if chain is None:
        return Verdict.RECHECK
    top_id, ancestors_showing = chain
    if not ancestors_showing and not query.include_hidden:
        return Verdict.HIDDEN
    roots = [tops.elements[r] for r in tops.roots]
    await fill_details(bus, [*roots, element], values=False)
    assign_windows(roots, listed)
    in_scope = {root.id: root for root in scope_roots(roots, listed, query.window)}
    if top_id not in in_scope:
        # Not in the query's windows; for WindowScope.ALL: in a frame no window shows (a toolkit's unmapped
        # popup), or in a window not mapped yet, which the window's own events will bring to a whole find.
        return Verdict.RECHECK if query.window == WindowScope.ALL else Verdict.UNCHANGED
    element.window_id = in_scope[top_id].window_id
    return element
