"""Where on the screen an element can be clicked, and bringing it there when it is scrolled out.

Bounds are AT-SPI screen coordinates (`GetExtents` with `ATSPI_COORD_TYPE_SCREEN`): every toolkit adds
its window's origin, and Chromium its frame, iframe and scroll offsets, so bounds of an element inside
an iframe or a scrolled page are already on the screen's frame. What differs between toolkits is which
ancestors *clip* what they hold. A widget toolkit's containers draw their children only inside their
own allocation, so every ancestor clips. A web page's layout boxes do not: an element overflowing its
box (`html, body { height: 100% }` with a longer page, floats, positioned children) is drawn outside
it, so clipping by every ancestor made a visible button "scrolled out of view" (docs/accessibility.md
"Where an element is"). Inside a page only the documents (the viewport, an iframe's) clip; the page's
own scrolling boxes are left to Chromium, which drops `showing` from what they scroll out.

An element that is out of view is scrolled into it (`Component.ScrollTo`, else the wheel over its
nearest scrolling ancestor, else focusing it), unless the caller said not to: then the refusal says
where it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from desktop.accessibility.atspi import ACCESSIBLE, COMPONENT, SCREEN_COORDS, AtspiBus, AtspiError, decode_states
from desktop.accessibility.errors import ElementActionUnsupported
from desktop.accessibility.tree import Element, usable_bounds
from desktop.core.geometry import Bounds
from desktop.input.mouse import Mouse
from desktop.x11.session import Session
from sandbox_desktop_wire.limits import MAX_WHEEL_CLICKS

WEB_DOCUMENT_ROLES = frozenset({"document-web", "document-frame"})
FRAME_ROLES = frozenset({"internal-frame", "embedded"})
"""An iframe's (or a plug's) box, which clips the document inside it."""
SCROLLER_ROLES = frozenset({"scroll-pane", "viewport"}) | WEB_DOCUMENT_ROLES
"""Ancestors the wheel scrolls when the toolkit cannot scroll to an element itself."""
SCROLL_ANYWHERE = 6
"""`AtspiScrollType.ANYWHERE`: the least scrolling that shows the element."""
SETTLE_S = 2.0
"""How long a scroll may take to show in the element's states and bounds (a page scrolls and lays out
in its renderer, apart from the call that asked it to)."""
SETTLE_POLL_S = 0.05
WHEEL_STEPS = 12
"""Wheel turns tried before giving up: the first measures how far one click moves, the rest aim."""


def unsupported(element: Element, why: str) -> ElementActionUnsupported:
    return ElementActionUnsupported(f"{element.role} {element.name!r} {why}", element=element.id,
                                    actions=list(element.actions))


def clips(screen: Bounds, ancestors: Sequence[Element]) -> list[tuple[Element | None, Bounds]]:
    """The rectangles that cut what of the element can be seen, each with the ancestor it comes from
    (None: the screen), nearest first. Whether an ancestor is inside a page is seen from the top down."""
    found: list[tuple[Element | None, Bounds]] = [(None, screen)]
    in_page = False
    for ancestor in reversed(ancestors):
        is_document = ancestor.role in WEB_DOCUMENT_ROLES
        # One not showing has junk bounds in some toolkits (and nothing of what it holds shows anyway).
        if ancestor.bounds is not None and ancestor.showing and (
                not in_page or is_document or ancestor.role in FRAME_ROLES):
            found.append((ancestor, ancestor.bounds))
        in_page = in_page or is_document
    return found[::-1]


def _screen(session: Session) -> Bounds:
    return Bounds(0, 0, session.width, session.height)


def visible_part(bounds: Bounds, cuts: Sequence[tuple[Element | None, Bounds]]
                 ) -> tuple[Bounds | None, Element | None]:
    """What of `bounds` the cuts leave, or None and the first cut that leaves nothing (None: the screen)."""
    left, top, right, bottom = bounds.x, bounds.y, bounds.x + bounds.width, bounds.y + bounds.height
    for owner, clip in cuts:
        left, top = max(left, clip.x), max(top, clip.y)
        right, bottom = min(right, clip.x + clip.width), min(bottom, clip.y + clip.height)
        if right <= left or bottom <= top:
            return None, owner
    return Bounds(left, top, right - left, bottom - top), None


def visible_centre(session: Session, element: Element, ancestors: Sequence[Element]) -> tuple[int, int]:
    """The centre of the element's visible part; refused (409) when nothing of it shows."""
    point = _centre(session, element, ancestors)
    if point is None:
        raise unsupported(element, out_of_view(session, element, ancestors))
    return point


def _centre(session: Session, element: Element, ancestors: Sequence[Element]) -> tuple[int, int] | None:
    if element.bounds is None or not element.showing:
        return None
    part, _cut = visible_part(element.bounds, clips(_screen(session), ancestors))
    if part is None:
        return None
    return part.x + (part.width - 1) // 2, part.y + (part.height - 1) // 2


def out_of_view(session: Session, element: Element, ancestors: Sequence[Element]) -> str:
    """Why nothing of the element can be clicked, in words for the 409."""
    if element.bounds is None:
        return "is not showing on the screen (hidden, or scrolled out of view where its toolkit gives no position)"
    part, cut = visible_part(element.bounds, clips(_screen(session), ancestors))
    if part is not None and not element.showing:
        return "is not showing on the screen (its application says it is hidden or scrolled out of view)"
    if cut is None:
        return f"is off the screen (at {_where(element.bounds)})"
    return (f"is scrolled out of view: at {_where(element.bounds)}, {_side(element.bounds, cut.bounds)} "
            f"the visible part of {cut.role} {cut.name!r}")


def _where(b: Bounds) -> str:
    return f"x={b.x} y={b.y} {b.width}x{b.height}"


def _side(b: Bounds, clip: Bounds | None) -> str:
    if clip is None:
        return "outside"
    if b.y >= clip.y + clip.height:
        return "below"
    if b.y + b.height <= clip.y:
        return "above"
    if b.x >= clip.x + clip.width:
        return "right of"
    if b.x + b.width <= clip.x:
        return "left of"
    return "outside"


async def reread(bus: AtspiBus, elements: Sequence[Element]) -> None:
    """States and bounds read again (a scroll moved them), bounds even of what is not showing: where
    an element lies tells which way to scroll."""
    requests = [request for e in elements for request in (
        (e.bus, e.path, ACCESSIBLE, "GetState", "", ()),
        (e.bus, e.path, COMPONENT, "GetExtents", "u", (SCREEN_COORDS,)))]
    answers = await bus.call_all(requests)
    for n, element in enumerate(elements):
        states, extents = answers[2 * n: 2 * n + 2]
        if isinstance(states, list):
            element.states = decode_states(states[0])
        if COMPONENT in element.interfaces:
            element.bounds = usable_bounds(*extents[0]) if isinstance(extents, list) else None


async def clickable_point(bus: AtspiBus, session: Session, mouse: Mouse, element: Element,
                          ancestors: Sequence[Element], scroll: bool) -> tuple[int, int]:
    """Where a click on the element lands: the centre of its visible part, scrolled into view first when
    nothing of it shows and `scroll` allows; else a 409 saying where it is and why it stays there."""
    point = _centre(session, element, ancestors)
    if point is not None:
        return point
    chain = [element, *ancestors]
    with contextlib.suppress(AtspiError):
        await reread(bus, [element])  # the bounds of one not showing (which way it lies), or it moved meanwhile
    point = _centre(session, element, ancestors)
    if point is not None:
        return point
    if not scroll:
        raise unsupported(element, out_of_view(session, element, ancestors) + "; scrollIntoView is off")
    if COMPONENT in element.interfaces and await _scroll_to(bus, element):
        point = await _settled(bus, session, element, ancestors, chain)
        if point is not None:
            return point
    if await _wheel_into_view(bus, session, mouse, element, ancestors, chain):
        point = _centre(session, element, ancestors)
        if point is not None:
            return point
    if "focusable" in element.states and await _focus(bus, element):
        point = await _settled(bus, session, element, ancestors, chain)
        if point is not None:
            return point
    raise unsupported(element, out_of_view(session, element, ancestors) + ", and neither its application "
                      "(Component.ScrollTo), the wheel nor focusing it brought it into view")


async def _scroll_to(bus: AtspiBus, element: Element) -> bool:
    """The toolkit's own scrolling (Chromium, Firefox, Qt); GTK 3 answers false, older bridges lack it."""
    try:
        [done] = await bus.call(element.bus, element.path, COMPONENT, "ScrollTo", "u", (SCROLL_ANYWHERE,))
    except AtspiError:
        return False
    return bool(done)


async def _settled(bus: AtspiBus, session: Session, element: Element, ancestors: Sequence[Element],
                   chain: Sequence[Element]) -> tuple[int, int] | None:
    """The element's point once the scroll shows in its states and bounds (None if it never does)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        with contextlib.suppress(AtspiError):
            await reread(bus, chain)
        point = _centre(session, element, ancestors)
        if point is not None or time.monotonic() >= deadline:
            return point
        await asyncio.sleep(SETTLE_POLL_S)


async def _focus(bus: AtspiBus, element: Element) -> bool:
    """The last resort: toolkits scroll the focused item into view (GTK's tree view, where an unseen row
    has no position to aim the wheel at); the click that follows would focus it anyway."""
    try:
        [done] = await bus.call(element.bus, element.path, COMPONENT, "GrabFocus")
    except AtspiError:
        return False
    return bool(done)


def _scroller(session: Session, ancestors: Sequence[Element]) -> tuple[Element, Bounds] | None:
    """The nearest scrolling ancestor that shows, with its visible part (where the wheel goes)."""
    for n, ancestor in enumerate(ancestors):
        if ancestor.role in SCROLLER_ROLES and ancestor.bounds is not None and ancestor.showing:
            part, _cut = visible_part(ancestor.bounds, clips(_screen(session), ancestors[n + 1:]))
            if part is not None:
                return ancestor, part
    return None


async def _wheel_into_view(bus: AtspiBus, session: Session, mouse: Mouse, element: Element,
                           ancestors: Sequence[Element], chain: Sequence[Element]) -> bool:
    """Turn the wheel over the nearest scrolling ancestor towards the element until some of it shows;
    False when it is not known where the element is, or the wheel moves nothing."""
    found = _scroller(session, ancestors)
    if found is None:
        return False
    _scroller_element, area = found
    at = area.x + area.width // 2, area.y + area.height // 2
    pixels_per_click = 0.0
    for _ in range(WHEEL_STEPS):
        if element.bounds is None:
            return False
        if _centre(session, element, ancestors) is not None:
            return True
        target = element.bounds
        dx = _distance(target.x, target.width, area.x, area.width)
        dy = _distance(target.y, target.height, area.y, area.height)
        if dx == 0 and dy == 0:
            return False  # in the scroller's area but not showing: not a matter of scrolling
        clicks_x, clicks_y = _clicks(dx, pixels_per_click), _clicks(dy, pixels_per_click)
        before = target
        await mouse.scroll(session, *at, clicks_x, clicks_y)
        await _settled_move(bus, element, chain, before)
        moved = element.bounds
        if moved is None or moved == before:
            return False
        travelled = max(abs(moved.x - before.x) / max(abs(clicks_x), 1) if clicks_x else 0,
                        abs(moved.y - before.y) / max(abs(clicks_y), 1) if clicks_y else 0)
        pixels_per_click = max(pixels_per_click, travelled)
    return _centre(session, element, ancestors) is not None


def _distance(start: int, size: int, area_start: int, area_size: int) -> int:
    """How far the element's centre is past the area's middle half along one axis (> 0: scroll forward)."""
    centre = start + size // 2
    low, high = area_start + area_size // 4, area_start + area_size * 3 // 4
    if centre > high:
        return centre - high
    if centre < low:
        return centre - low
    return 0


def _clicks(distance: int, pixels_per_click: float) -> int:
    """Wheel clicks to cover `distance`: one until a click's travel is measured."""
    if distance == 0:
        return 0
    count = 1 if pixels_per_click <= 0 else max(1, round(abs(distance) / pixels_per_click))
    return min(count, MAX_WHEEL_CLICKS) * (1 if distance > 0 else -1)


async def _settled_move(bus: AtspiBus, element: Element, chain: Sequence[Element], before: Bounds) -> None:
    """Re-read until the element moved (a toolkit redraws in its own time), for at most SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S / 4
    while True:
        with contextlib.suppress(AtspiError):
            await reread(bus, chain)
        if element.bounds != before or time.monotonic() >= deadline:
            return
        await asyncio.sleep(SETTLE_POLL_S)
