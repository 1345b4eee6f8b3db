"""`/v1/desktop/accessibility/...`: the element tree, find and act (docs/accessibility.md)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request

from api.convert.effects import acted_element, observed
from api.convert.elements import bad_field, element_query, target_of, window_scope
from api.http.operations import Operation
from api.server.services import desktop_of
from desktop.accessibility.acting import ActOutcome
from desktop.accessibility.service import ScopedSnapshot
from desktop.accessibility.tree import Element
from desktop.input.coordinates import CoordinateSpace
from desktop.x11.session import Session
from sandbox_desktop_wire import accessibility as wire
from sandbox_desktop_wire.actions import CoordinateOptions
from sandbox_desktop_wire.effects import Effect
from sandbox_desktop_wire.enums import CoordinateSpaceKind

ERRORS = (400, 404, 409, 503)
TAGS = ("accessibility",)


def space_of(session: Session, kind: CoordinateSpaceKind, width: int | None, height: int | None,
             field: str) -> CoordinateSpace:
    if kind == CoordinateSpaceKind.SCREEN:
        return CoordinateSpace.screen(session.width, session.height)
    if kind == CoordinateSpaceKind.NORMALIZED:
        return CoordinateSpace.normalized(session.width, session.height)
    if kind == CoordinateSpaceKind.WINDOW:  # batches only (docs/actions.md): a tree spans windows
        raise bad_field(f"{field}space", "bounds come in the screen, normalized or image space; the window space "
                        "is for batch actions")
    if width is None or height is None:
        raise bad_field(f"{field}width", "the image space needs the image's width and height")
    return CoordinateSpace.image(session.width, session.height, width, height)


def options_space(session: Session, options: CoordinateOptions | None) -> CoordinateSpace:
    if options is None:
        return CoordinateSpace.screen(session.width, session.height)
    return space_of(session, options.space, options.width, options.height, "coordinates.")


def node(element: Element, space: CoordinateSpace, children: list[wire.AccessibleNode] | None = None
         ) -> wire.AccessibleNode:
    bounds = None
    if element.bounds is not None:
        b = element.bounds
        if space.kind is CoordinateSpaceKind.SCREEN:
            bounds = wire.ElementBounds(x=b.x, y=b.y, width=b.width, height=b.height)
        else:
            left, top = space.from_screen(max(b.x, 0), max(b.y, 0))
            right, bottom = space.from_screen(b.x + b.width - 1, b.y + b.height - 1)
            bounds = wire.ElementBounds(x=left, y=top, width=right - left + 1, height=bottom - top + 1)
    return wire.AccessibleNode(
        id=element.id, role=element.role, name=element.name, description=element.description or None,
        value=element.value, states=sorted(element.states), bounds=bounds, actions=list(element.actions),
        pid=element.pid, window_id=str(element.window_id) if element.window_id is not None else None,
        app=element.app, children=children)


def tree_nodes(scoped: ScopedSnapshot, depth: int | None, interactive: bool,
               space: CoordinateSpace) -> tuple[list[wire.AccessibleNode], int]:
    """Nested nodes down to `depth`; with `interactive`, each window's actionable elements as its children."""
    count = 0
    elements = scoped.snapshot.elements

    def build(element: Element, level: int) -> wire.AccessibleNode:
        nonlocal count
        count += 1
        below = [] if depth is not None and level >= depth else \
            [build(elements[c], level + 1) for c in element.children if c in elements]
        return node(element, space, below)

    if not interactive:
        return [build(root, 0) for root in scoped.roots], count
    windows = []
    for root in scoped.roots:
        kept = [e for e in scoped.snapshot.subtree(root, depth) if e is not root and e.interactive]
        count += 1 + len(kept)
        windows.append(node(root, space, [node(e, space, None) for e in kept]))
    return windows, count


async def tree(request: Request, query: wire.TreeQuery) -> wire.TreeResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    space = space_of(session, query.space, query.width, query.height, "")
    scoped = await desktop.accessibility.tree(session, window_scope(query.window), query.depth, query.include_hidden)
    windows, count = tree_nodes(scoped, query.depth, query.interactive, space)
    return wire.TreeResponse(windows=windows, count=count)


def flat(elements: Iterable[Element], space: CoordinateSpace) -> list[wire.AccessibleNode]:
    return [node(e, space) for e in elements]


async def find(request: Request, body: wire.FindRequest) -> wire.FindResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    space = options_space(session, body.coordinates)
    found = await desktop.accessibility.find(session, element_query(body, body.limit))
    return wire.FindResponse(elements=flat(found, space))


def act_model(outcome: ActOutcome, space: CoordinateSpace, effect: Effect | None = None) -> wire.ActResponse:
    x = y = None
    if outcome.point is not None:
        x, y = space.from_screen(*outcome.point)
    return wire.ActResponse(action=outcome.action, through=outcome.through, element=node(outcome.element, space),
                            x=x, y=y, effect=effect)


async def act(request: Request, body: wire.ActRequest) -> wire.ActResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    space = options_space(session, body.coordinates)
    outcome, effect = await observed(desktop, body.report_effect, lambda: desktop.accessibility.act(
        session, target_of(body.element), body.action, body.value, body.scroll_into_view), acted_element)
    return act_model(outcome, space, effect)


async def marks(request: Request) -> wire.MarksResponse:
    table = desktop_of(request).accessibility.marks
    return wire.MarksResponse(marks=[
        wire.Mark(mark=number, id=e.id, role=e.role, name=e.name, bounds=wire.ElementBounds(
            x=e.bounds.x, y=e.bounds.y, width=e.bounds.width, height=e.bounds.height))
        for number, e in table.items() if e.bounds is not None])


OPERATIONS = [
    Operation("GET", "/v1/desktop/accessibility/tree", tree, "The accessibility tree of the windows in scope",
              query=wire.TreeQuery, response=wire.TreeResponse, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/accessibility/find", find, "Elements matching a query (no children)",
              body=wire.FindRequest, response=wire.FindResponse, errors=ERRORS, tags=TAGS),
    Operation("POST", "/v1/desktop/accessibility/act", act, "Click, focus, invoke, set the value of or select "
              "one element", body=wire.ActRequest, response=wire.ActResponse, errors=ERRORS, tags=TAGS),
    Operation("GET", "/v1/desktop/accessibility/marks", marks, "The number -> element table of the last "
              "set-of-marks screenshot (`som=true`)", response=wire.MarksResponse, errors=(409,), tags=TAGS),
]
