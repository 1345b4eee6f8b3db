"""Reading applications' objects off the bus: the cache first, then only what the cache lacks.

An application's cache (`Cache.GetItems`, one call) holds what its bridge saw when it was switched on
and what was added since through `children-changed` signals. Chromium's bridge never announces a page
document that way, so a page loaded after the bridge came up is missing from its cache (measured:
docs/accessibility.md "Speed"). Every cached object also says how many children it has; where the
cache holds fewer, `complete` asks that object for its showing descendants in one call
(`Collection.GetMatches`, which the application answers in-process), then their names, and then the
role, states and interfaces of only those a query can still match, all pipelined.

Qt 5's bridge differs (measured with Qt 5.15.8, FeatherPad): its cache is empty, it has no `Collection`,
and `Properties.GetAll` on any of its objects crashes the application (a segfault in QtCore). Its objects
are walked level by level instead, each property asked with its own `Get` (`object_properties`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from desktop.accessibility.atspi import (
    ACCESSIBLE,
    APPLICATION,
    CACHE,
    CACHE_PATH,
    COLLECTION,
    DBUS,
    NULL_PATH,
    PROPERTIES,
    REGISTRY,
    ROLES,
    ROOT_PATH,
    STATE_BITS,
    AtspiBus,
    AtspiError,
    Request,
    decode_states,
    role_name,
)
from desktop.accessibility.tree import (
    UNKNOWN_INDEX,
    Application,
    Element,
    Snapshot,
    element_id,
    parse_element_id,
)

logger = logging.getLogger("sandbox_desktop.accessibility")

MATCH_ALL, MATCH_ANY = 1, 2
SORT_CANONICAL = 1
MAX_MATCHES = 20_000
"""Objects one `GetMatches` may answer: a page's showing objects are far fewer."""
ACCESSIBLE_PROPERTIES = ("Name", "Description", "Parent", "ChildCount")
"""The `Accessible` properties a reader uses."""
NO_GET_ALL = frozenset({"Qt"})
"""Toolkits whose objects crash on `Properties.GetAll`: asked one property at a time."""


@dataclass(frozen=True)
class Prefilter:
    """What the caller keeps, so that uncached objects are asked no more than that needs."""

    roles: frozenset[str] | None = None
    states: frozenset[str] = frozenset()
    showing_only: bool = True
    name_matches: Callable[[str], bool] | None = None


EVERYTHING_SHOWING = Prefilter()


async def applications(bus: AtspiBus) -> list[tuple[str, str]]:
    """(bus name, root path) of every application registered on the accessibility bus."""
    [children] = await bus.call(REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren")
    return [(str(name), str(path)) for name, path in children]


async def application_infos(bus: AtspiBus, registered: list[tuple[str, str]]) -> list[Application]:
    """Each application's name and pid; asked once per application (a unique bus name is never reused, and
    an app does not rename itself), so a wait's repeated reads skip a round trip."""
    missing = [(name, root) for name, root in registered if name not in bus.applications]
    requests: list[Request] = []
    for name, root in missing:
        requests.append((name, root, PROPERTIES, "Get", "ss", (ACCESSIBLE, "Name")))
        requests.append((DBUS, "/org/freedesktop/DBus", DBUS, "GetConnectionUnixProcessID", "s", (name,)))
        requests.append((name, root, PROPERTIES, "Get", "ss", (APPLICATION, "ToolkitName")))
    answers = await bus.call_all(requests)
    for i, (name, _root) in enumerate(missing):
        app_name, pid, toolkit = answers[3 * i: 3 * i + 3]
        if isinstance(app_name, list) and isinstance(pid, list):  # an app still starting is asked again
            bus.applications[name] = Application(name, str(app_name[0].value), int(pid[0]),
                                                 str(toolkit[0].value) if isinstance(toolkit, list) else "")
    return [bus.applications.get(name) or Application(name, "", None) for name, _root in registered]


def _cached_element(item: tuple[Any, ...], app: Application) -> Element | None:
    (bus, path), _app, (parent_bus, parent_path), index, child_count, interfaces, name, role, description, states = item
    if path in (ROOT_PATH, NULL_PATH):
        return None
    parent = None if parent_path in (ROOT_PATH, NULL_PATH) else element_id(parent_bus, parent_path)
    return Element(bus=bus, path=path, role=role_name(role), name=name, description=description,
                   states=decode_states(states), interfaces=frozenset(interfaces), parent=parent, index=index,
                   child_count=child_count, app=app.name, pid=app.pid)


async def read_caches(bus: AtspiBus, snapshot: Snapshot, roots: Iterable[Element]) -> None:
    """Add to a snapshot of windows (`read_tops`) the cache of every application owning one of `roots`,
    one call each, all at once; an application without a cache is walked. Only those applications:
    a big page in another window costs a tree of this one nothing."""
    owners = {root.bus for root in roots}
    apps = [app for app in snapshot.applications if app.bus in owners]
    answers = await bus.call_all([(app.bus, CACHE_PATH, CACHE, "GetItems", "", ()) for app in apps])
    found: list[Element] = []
    for app, answer in zip(apps, answers, strict=True):
        if isinstance(answer, list):
            found.extend(e for e in (_cached_element(item, app) for item in answer[0]) if e is not None)
        elif answer.name == "org.freedesktop.DBus.Error.UnknownMethod":
            found.extend(await walk_application(bus, app, ROOT_PATH))
        else:
            logger.info("accessibility: skipping %s (%s): %s", app.name, app.bus, answer)
    merge(snapshot, found)


def merge(snapshot: Snapshot, found: list[Element]) -> None:
    """Link what was read below the windows into the snapshot, in reading order (the toolkit's index
    where it gives one; GTK's cache gives -1 for many objects: those keep the order they came in)."""
    fresh = [e for e in found if e.id not in snapshot.elements]
    for element in found:
        known = snapshot.elements.get(element.id)
        if known is not None:
            known.child_count = element.child_count
    for order, element in enumerate(fresh):
        element.index = element.index if element.index >= 0 else UNKNOWN_INDEX + order
        snapshot.elements[element.id] = element
    for element in sorted(fresh, key=lambda e: e.index):
        if element.parent is not None and element.parent in snapshot.elements:
            snapshot.elements[element.parent].children.append(element.id)


def match_rule(prefilter: Prefilter) -> tuple[Any, ...]:
    """A `Collection` match rule: the showing states (and the query's), any of the query's roles."""
    states = set(prefilter.states) | ({"showing", "visible"} if prefilter.showing_only else set())
    bits = 0
    for state in states:
        bits |= 1 << STATE_BITS[state]
    roles = sorted(ROLES.index(r) for r in prefilter.roles) if prefilter.roles else []
    role_words = [0] * max(4, max(roles, default=0) // 32 + 1)
    for number in roles:
        role_words[number // 32] |= 1 << (number % 32)
    return ([bits & 0xFFFFFFFF, bits >> 32], MATCH_ALL, {}, MATCH_ALL,
            role_words if roles else [], MATCH_ANY if roles else MATCH_ALL, [], MATCH_ALL, False)


def gaps(snapshot: Snapshot, roots: Iterable[Element]) -> list[Element]:
    """The top-most objects under `roots` whose cache lacks some of their children."""
    found = []
    for root in roots:
        stack = [root]
        while stack:
            element = stack.pop()
            if element.child_count > len(element.children):
                found.append(element)  # its whole subtree is read from it: nothing below needs asking
                continue
            stack.extend(snapshot.elements[c] for c in element.children if c in snapshot.elements)
    return found


async def complete(bus: AtspiBus, snapshot: Snapshot, roots: Iterable[Element], prefilter: Prefilter) -> None:
    """Add to `snapshot` the objects under `roots` that the caches lack and `prefilter` keeps; each hangs
    on its parent, or on the object it was found under when `prefilter` left its parent out."""
    holes = gaps(snapshot, roots)
    walked = [hole for hole in holes if COLLECTION not in hole.interfaces]
    if walked:
        await _walk_below(bus, snapshot, walked)
        holes = [hole for hole in holes if COLLECTION in hole.interfaces]
    if not holes:
        return
    refs: list[tuple[str, str]] = []
    found_under: dict[str, Element] = {}
    for hole, matches in zip(holes, await matching(bus, holes, prefilter), strict=True):
        for bus_name, path in matches:
            key = element_id(bus_name, path)
            if key not in snapshot.elements and key not in found_under:
                refs.append((bus_name, path))
                found_under[key] = hole
    added = await read_objects(bus, snapshot.applications, refs, prefilter.name_matches)
    for element in added:
        snapshot.elements[element.id] = element
    for element in added:
        if element.parent not in snapshot.elements:
            element.parent = found_under[element.id].id
        snapshot.elements[element.parent].children.append(element.id)


async def _walk_below(bus: AtspiBus, snapshot: Snapshot, holes: list[Element]) -> None:
    """Objects without `Collection` (Qt's): everything below them, walked, linked in under them."""
    apps = {app.bus: app for app in snapshot.applications}
    answers = await bus.call_all([(h.bus, h.path, ACCESSIBLE, "GetChildren", "", ()) for h in holes])
    for hole, answer in zip(holes, answers, strict=True):
        app = apps.get(hole.bus)
        if app is None or not isinstance(answer, list):
            continue
        level: list[tuple[str, str | None, int]] = [
            (str(path), hole.id, i) for i, (_b, path) in enumerate(answer[0])
            if element_id(hole.bus, str(path)) not in snapshot.elements]
        merge(snapshot, await walk(bus, app, level))


async def matching(bus: AtspiBus, roots: list[Element], prefilter: Prefilter) -> list[list[tuple[str, str]]]:
    """The showing descendants of each root that `prefilter`'s roles and states keep, in reading order,
    one `Collection.GetMatches` each (none for a root that failed to answer)."""
    rule = match_rule(prefilter)
    answers = await bus.call_all([(r.bus, r.path, COLLECTION, "GetMatches", "(aiia{ss}iaiiasib)uib",
                                   (rule, SORT_CANONICAL, MAX_MATCHES, True)) for r in roots])
    return [[(str(b), str(p)) for b, p in answer[0]] if isinstance(answer, list) else [] for answer in answers]


async def object_properties(bus: AtspiBus, apps: Iterable[Application],
                            refs: list[tuple[str, str]]) -> list[dict[str, Any] | None]:
    """The `Accessible` properties of each object (None for one that is gone): one `GetAll` each, or one
    `Get` per property for toolkits that crash on `GetAll` (NO_GET_ALL); all pipelined."""
    one_by_one = {app.bus for app in apps if app.toolkit in NO_GET_ALL}
    requests: list[Request] = []
    for b, p in refs:
        if b in one_by_one:
            requests.extend((b, p, PROPERTIES, "Get", "ss", (ACCESSIBLE, name)) for name in ACCESSIBLE_PROPERTIES)
        else:
            requests.append((b, p, PROPERTIES, "GetAll", "s", (ACCESSIBLE,)))
    answers = iter(await bus.call_all(requests))
    found: list[dict[str, Any] | None] = []
    for b, _p in refs:
        if b in one_by_one:
            values = [answer for _ in ACCESSIBLE_PROPERTIES if isinstance(answer := next(answers), list)]
            found.append({name: v[0].value for name, v in zip(ACCESSIBLE_PROPERTIES, values, strict=True)}
                         if len(values) == len(ACCESSIBLE_PROPERTIES) else None)
        else:
            answer = next(answers)
            found.append(None if isinstance(answer, AtspiError) else {k: v.value for k, v in answer[0].items()})
    return found


async def read_objects(bus: AtspiBus, apps: Iterable[Application], refs: list[tuple[str, str]],
                       name_matches: Callable[[str], bool] | None = None) -> list[Element]:
    """Objects the caches lack, by reference: names and parents of all, then role, states and interfaces
    of those whose name `name_matches` (all when None) or who have none (a field may take its label's:
    desktop/accessibility/labels.py); both in one round trip when `name_matches` is None. In the order given;
    gone ones left out."""
    def detail_requests(refs: Iterable[tuple[str, str]]) -> list[Request]:
        return [request for b, p in refs for request in (
            (b, p, ACCESSIBLE, "GetRole", "", ()), (b, p, ACCESSIBLE, "GetState", "", ()),
            (b, p, ACCESSIBLE, "GetInterfaces", "", ()))]

    if name_matches is None:  # nothing to leave out: names and details in one round trip
        props, answers = await asyncio.gather(object_properties(bus, apps, refs), bus.call_all(detail_requests(refs)))
        kept, details = [], []
        for n, ((b, p), values) in enumerate(zip(refs, props, strict=True)):
            if values is not None:  # gone meanwhile: its details are errors too
                kept.append((b, p, values))
                details.extend(answers[3 * n: 3 * n + 3])
    else:
        props = await object_properties(bus, apps, refs)
        kept = []
        for (bus_name, path), values in zip(refs, props, strict=True):
            if values is None:
                continue
            name = str(values.get("Name", ""))
            if not name.strip() or name_matches(name):
                kept.append((bus_name, path, values))
        details = await bus.call_all(detail_requests((b, p) for b, p, _v in kept))
    app_of = {app.bus: app for app in apps}
    found = []
    for i, (bus_name, path, values) in enumerate(kept):
        role, states, interfaces = details[3 * i: 3 * i + 3]
        if not (isinstance(role, list) and isinstance(states, list) and isinstance(interfaces, list)):
            continue
        parent_bus, parent_path = values.get("Parent", (bus_name, NULL_PATH))
        app = app_of.get(bus_name)
        found.append(Element(
            bus=bus_name, path=path, role=role_name(role[0]), name=str(values.get("Name", "")),
            description=str(values.get("Description", "")), states=decode_states(states[0]),
            interfaces=frozenset(interfaces[0]), index=-1, child_count=int(values.get("ChildCount", 0)),
            parent=None if parent_path in (ROOT_PATH, NULL_PATH) else element_id(parent_bus, parent_path),
            app=app.name if app else "", pid=app.pid if app else None))
    return found


async def read_tops(bus: AtspiBus) -> Snapshot:
    """Only the applications' top-level objects (windows), each marked as not read below: `complete`
    then asks each window in scope for just what a query can match, without reading whole caches."""
    registered = await applications(bus)
    apps = await application_infos(bus, registered)
    answers = await bus.call_all([(name, root, ACCESSIBLE, "GetChildren", "", ()) for name, root in registered])
    refs = [(str(b), str(p)) for answer in answers if isinstance(answer, list) for b, p in answer[0]]
    tops = await read_objects(bus, apps, refs)
    for order, top in enumerate(tops):
        top.parent, top.index = None, order
    snapshot = Snapshot({}, [top.id for top in tops], apps)
    merge(snapshot, tops)
    return snapshot


async def read_chain(bus: AtspiBus, apps: Iterable[Application], bus_name: str, path: str) -> list[Element]:
    """An object and its ancestors up to its window, read one level at a time (an id names one object:
    acting on it needs no tree). Empty if the object is gone."""
    chain: list[Element] = []
    ref: tuple[str, str] | None = (bus_name, path)
    while ref is not None and len(chain) < 256:
        found = await read_objects(bus, apps, [ref])
        if not found:
            break
        chain.append(found[0])
        ref = parse_element_id(found[0].parent) if found[0].parent else None
    for child, parent in itertools.pairwise(chain):
        parent.children.append(child.id)
    return chain


async def walk_application(bus: AtspiBus, app: Application, root: str) -> list[Element]:
    """Every object of an application without a cache, level by level, each level's calls pipelined;
    also the baseline the bench compares the cache with (bench/accessibility.py)."""
    [top] = await bus.call(app.bus, root, ACCESSIBLE, "GetChildren")
    return await walk(bus, app, [(str(path), None, i) for i, (_b, path) in enumerate(top)])


async def walk(bus: AtspiBus, app: Application, level: list[tuple[str, str | None, int]]) -> list[Element]:
    """The objects at `level` ((path, parent id, index in the parent)) and all below them, one level of
    pipelined calls at a time."""
    found: list[Element] = []
    while level:
        props = await object_properties(bus, [app], [(app.bus, path) for path, _parent, _i in level])
        answers = await bus.call_all([request for path, _parent, _i in level for request in (
            (app.bus, path, ACCESSIBLE, "GetChildren", "", ()), (app.bus, path, ACCESSIBLE, "GetRole", "", ()),
            (app.bus, path, ACCESSIBLE, "GetState", "", ()), (app.bus, path, ACCESSIBLE, "GetInterfaces", "", ()))])
        below: list[tuple[str, str | None, int]] = []
        for n, (path, parent, index) in enumerate(level):
            children, role, states, interfaces = answers[4 * n: 4 * n + 4]
            values = props[n]
            if not (isinstance(children, list) and isinstance(role, list) and isinstance(states, list)
                    and values is not None and isinstance(interfaces, list)):
                continue  # gone meanwhile
            element = Element(bus=app.bus, path=path, role=role_name(role[0]), name=str(values.get("Name", "")),
                              description=str(values.get("Description", "")), states=decode_states(states[0]),
                              interfaces=frozenset(interfaces[0]), parent=parent, index=index,
                              child_count=len(children[0]), app=app.name, pid=app.pid)
            found.append(element)
            below.extend((str(child_path), element.id, i) for i, (_b, child_path) in enumerate(children[0]))
        level = below
    return found
