"""One desktop's accessibility: the connection to its bus, trees scoped to windows, find, and act.

Every answer reads the applications afresh (docs/accessibility.md "Speed"), so an id or a query always
means what is on the screen now; nothing is kept between calls but the connection. The connection
lives on the event loop (dbus-fast is asyncio), so no thread owns it and no X connection waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dbus_fast.aio import MessageBus

from desktop.accessibility import dbus_connection, peer_socket
from desktop.accessibility.acting import Actor, ActOutcome, perform
from desktop.accessibility.atspi import (
    ROOT_PATH,
    AtspiBus,
    AtspiError,
    PeerConnector,
    accessibility_bus_address,
)
from desktop.accessibility.errors import AccessibilityUnavailable, ElementAmbiguous, ElementNotFound
from desktop.accessibility.examine import Verdict, examine
from desktop.accessibility.labels import name_fields, unnamed_fields
from desktop.accessibility.query import ElementQuery, Target, WindowScope
from desktop.accessibility.reading import (
    EVERYTHING_SHOWING,
    Prefilter,
    application_infos,
    complete,
    read_caches,
    read_chain,
    read_tops,
)
from desktop.accessibility.signals import Signals
from desktop.accessibility.tree import (
    Element,
    Snapshot,
    element_id,
    fill_details,
    order_by_position,
    parse_element_id,
    prune_hidden,
    refresh,
)
from desktop.accessibility.view import visible_centre
from desktop.accessibility.windows import assign_windows, scope_roots
from desktop.core.errors import WindowNotFound
from desktop.events.bus import EventBus
from desktop.input.keyboard import Keyboard
from desktop.input.mouse import Mouse
from desktop.sandbox.channel import SandboxGone
from desktop.screen.marks import MAX_MARKS, MarkBox
from desktop.windows.query import list_windows
from desktop.x11.session import Session
from sandbox_desktop_wire.accessibility import ElementAction

if TYPE_CHECKING:
    from desktop.sandbox.sandbox import Sandbox

logger = logging.getLogger("sandbox_desktop.accessibility")

READ_TIMEOUT_S = 10.0
"""An application that hangs (a frozen app answers nothing) fails the read after this, not the server."""
MAX_CANDIDATES = 10
"""Candidates listed in an ambiguous query's 409."""



@dataclass
class ScopedSnapshot:
    snapshot: Snapshot
    roots: list[Element]
    """The top-level objects of the windows in scope, with their window ids."""

    def elements(self, depth: int | None = None) -> Iterable[Element]:
        for root in self.roots:
            yield from self.snapshot.subtree(root, depth)


@contextlib.asynccontextmanager
async def reading() -> AsyncIterator[None]:
    """A read of the tree, bounded: an application that hangs makes it a 503, the machine's trouble and
    not the caller's (docs/errors.md), rather than holding the request or answering 500."""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            yield
    except TimeoutError:
        raise AccessibilityUnavailable(f"an application did not answer the accessibility bus within "
                                       f"{READ_TIMEOUT_S:.0f} s") from None


def in_sandbox(sandbox: Sandbox) -> PeerConnector:
    """Connections to the apps' own sockets, made in the desktop's sandbox as its user: the apps let in no other
    uid (desktop/accessibility/peer_socket.py). None when the sandbox cannot make one; the bus daemon's way
    still works then. What comes back passed through a process of the sandbox's uid: it is checked to be a
    uid and one connected unix stream socket, and speaks D-Bus with the server as the sandbox's bus daemon does."""
    async def connect(address: str) -> MessageBus | None:
        try:
            value, fds = await sandbox.call(peer_socket.ENTRY, {"address": address})
        except (OSError, SandboxGone):
            return None
        uid = value.get("uid")
        sock = unix_stream(fds[0]) if len(fds) == 1 else None
        if sock is not None and isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0:
            return await dbus_connection.connect_socket(sock, uid)
        if sock is not None:
            sock.close()
        else:
            for fd in fds:
                os.close(fd)
        return None
    return connect


def unix_stream(fd: int) -> socket.socket | None:
    """`fd` as a socket if it is a unix stream socket; None (and `fd` still open) if it is anything else."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket at all
        return None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        return None
    return sock


class Accessibility:
    """The accessibility tree of one desktop's applications, and actions on its elements."""

    def __init__(self, mouse: Mouse, keyboard: Keyboard, events: EventBus,
                 sandbox: Callable[[], Sandbox | None] = lambda: None) -> None:
        self._mouse = mouse
        self._sandbox = sandbox
        """The desktop's running sandbox, where its apps' own accessibility sockets are connected from."""
        self._keyboard = keyboard
        self._bus: AtspiBus | None = None
        self._session_address: str | None = None
        self._connecting = asyncio.Lock()
        self.signals = Signals(events)
        self._early: asyncio.Task[None] | None = None
        self.marks: dict[int, Element] = {}
        """The last set-of-marks table: number -> element (docs/accessibility.md "Set-of-marks")."""

    def connect_soon(self, session: Session) -> None:
        """Connect in the background once the desktop is up, so focus events flow from the start; a
        failure here is met again, and reported, by the first call that needs the bus."""
        async def connect() -> None:
            with contextlib.suppress(AccessibilityUnavailable):
                await self.bus(session)
        self._early = asyncio.ensure_future(connect())

    def watching(self, session: Session, states: frozenset[str] = frozenset()
                 ) -> contextlib.AbstractAsyncContextManager[None]:
        """Tree changes (and changes of `states`) become `accessibility.changed` events while inside."""
        return self.signals.watching(lambda: self.bus(session), states)

    async def bus(self, session: Session) -> AtspiBus:
        """The connection to the desktop's accessibility bus, made on first use and after a restart."""
        address = session.env.get("DBUS_SESSION_BUS_ADDRESS")
        if address is None:
            raise AccessibilityUnavailable("the desktop has no session bus, so no accessibility bus")
        async with self._connecting:
            if self._bus is not None and self._bus.connected and self._session_address == address:
                return self._bus
            self._disconnect()
            try:
                sandbox = self._sandbox()
                peers = in_sandbox(sandbox) if sandbox is not None else dbus_connection.connect
                bus = await AtspiBus.connect(await accessibility_bus_address(address), peers)
            except (AtspiError, OSError, TimeoutError) as exc:
                raise AccessibilityUnavailable(f"the desktop's accessibility bus does not answer: {exc}") from exc
            await self.signals.attach(bus)
            self._bus, self._session_address = bus, address
            return bus

    def _disconnect(self) -> None:
        if self._bus is not None:
            self._bus.disconnect()
        self._bus = None

    async def close(self) -> None:
        """Drop the connection (the desktop stopped); the next call connects to the new bus."""
        if self._early is not None:
            self._early.cancel()
        await self.signals.close()
        self._disconnect()

    # -- reading ---------------------------------------------------------------------------------

    async def scoped(self, session: Session, window: WindowScope | int, prefilter: Prefilter = EVERYTHING_SHOWING,
                     *, whole: bool = True) -> ScopedSnapshot:
        """The windows in scope, their top-level objects matched to X windows, and below them what
        `prefilter` keeps: from every application's cache plus what the caches lack (`whole`), or only
        what the windows answer to the prefilter's query (docs/accessibility.md "Speed")."""
        bus = await self.bus(session)
        async with reading():
            snapshot, windows = await asyncio.gather(read_tops(bus), session.x.call(list_windows))
            tops = [snapshot.elements[r] for r in snapshot.roots]
            await fill_details(bus, tops, values=False)
            assign_windows(tops, windows)
            if isinstance(window, int) and not any(w.id == window for w in windows):
                raise WindowNotFound(f"no window with id {window}", windowId=str(window))
            roots = scope_roots(tops, windows, window)
            if whole:
                # A whole tree gets every detail anyway: those of the cached objects are read while what
                # the caches lack is read in, and the labels are then at hand for unnamed fields.
                await read_caches(bus, snapshot, roots)
                cached = [e for root in roots for e in snapshot.subtree(root, None)]
                await asyncio.gather(complete(bus, snapshot, roots, prefilter), fill_details(bus, cached))
            else:
                await complete(bus, snapshot, roots, prefilter)
            if prefilter.showing_only:
                roots = prune_hidden(snapshot, roots)
            window_of = {e.id: root for root in roots for e in snapshot.subtree(root, None)}
            fields = unnamed_fields(snapshot.elements[key] for key in window_of)
            await fill_details(bus, [snapshot.elements[key] for key in window_of] if whole else fields, values=whole)
            await name_fields(bus, snapshot, fields, window_of, labels_read=whole)
        for key, root in window_of.items():
            snapshot.elements[key].window_id = root.window_id
        return ScopedSnapshot(snapshot, roots)

    async def tree(self, session: Session, window: WindowScope | int, depth: int | None,
                   include_hidden: bool = False) -> ScopedSnapshot:
        """The scoped snapshot with bounds, text and values of everything down to `depth`."""
        scoped = await self.scoped(session, window, Prefilter(showing_only=not include_hidden))
        async with reading():
            await fill_details(await self.bus(session), scoped.elements(depth))
        order_by_position(scoped.snapshot)
        return scoped

    async def find(self, session: Session, query: ElementQuery) -> list[Element]:
        """The elements matching `query` (at most `query.limit`), in reading order, with their details."""
        scoped = await self.scoped(session, query.window, query.prefilter, whole=False)
        found = [e for e in scoped.elements() if query.matches(e)][:query.limit]
        async with reading():
            await fill_details(await self.bus(session), found)
        return found

    async def examine(self, session: Session, ref: str, query: ElementQuery) -> Element | Verdict:
        """Whether the changed object `ref` (or one below it) is an element `query` matches now, or cannot make
        one appear, or the whole `find` must tell (desktop/accessibility/examine.py)."""
        bus = await self.bus(session)
        async with reading():
            return await examine(bus, lambda: session.x.call(list_windows), ref, query)

    async def mark(self, session: Session, window: WindowScope | int = WindowScope.ALL) -> list[MarkBox]:
        """Number the interactive elements showing in `window`, in reading order, and keep the table."""
        scoped = await self.tree(session, window, None)
        marked = [e for e in scoped.elements() if e.interactive and e.bounds is not None][:MAX_MARKS]
        self.marks = {number: element for number, element in enumerate(marked, start=1)}
        return [MarkBox(number, element.bounds) for number, element in self.marks.items()
                if element.bounds is not None]

    async def resolve(self, session: Session, target: Target) -> tuple[Element, list[Element]]:
        """The one element `target` means now, and its ancestors nearest first (404 if there is none,
        409 listing the candidates if a query means several)."""
        bus = await self.bus(session)
        if isinstance(target, int):
            marked = self.marks.get(target)
            if marked is None:
                raise ElementNotFound(f"no mark {target} in the last marked screenshot "
                                      f"({len(self.marks)} marks)", element=target)
            target = marked.id
        if isinstance(target, ElementQuery):
            found = [e for e in (await self.scoped(session, target.window, target.prefilter, whole=False)).elements()
                     if target.matches(e)]
            if not found:
                raise ElementNotFound(f"no {target.describe()}")
            if len(found) > 1:
                await fill_details(bus, found[:MAX_CANDIDATES], values=False)
                raise ElementAmbiguous(f"{len(found)} elements match: {target.describe()}",
                                       candidates=[candidate_summary(e) for e in found[:MAX_CANDIDATES]])
            ref = (found[0].bus, found[0].path)
        else:
            parsed = parse_element_id(target)
            if parsed is None:
                raise ElementNotFound(f"{target!r} is not an element id", element=target)
            ref = parsed
        async with reading():
            apps = await application_infos(bus, [(ref[0], ROOT_PATH)])
            chain = await read_chain(bus, apps, *ref)
            if not chain or "defunct" in chain[0].states:
                raise ElementNotFound(f"element {element_id(*ref)} no longer exists", element=element_id(*ref))
            await fill_details(bus, chain)
            assign_windows(chain[-1:], await session.x.call(list_windows))
            await name_fields(bus, Snapshot({e.id: e for e in chain}, [], apps), unnamed_fields(chain[:1]),
                              {chain[0].id: chain[-1]})
        for element in chain:
            element.window_id = chain[-1].window_id
        return chain[0], chain[1:]

    # -- acting ----------------------------------------------------------------------------------

    async def locate(self, session: Session, target: Target) -> tuple[tuple[int, int], str]:
        """Where a pointer action aimed at `target` lands (its visible centre), and the element's id."""
        element, ancestors = await self.resolve(session, target)
        return visible_centre(session, element, ancestors), element.id

    async def act(self, session: Session, target: Target, action: ElementAction,
                  value: str | None = None, scroll_into_view: bool = True) -> ActOutcome:
        """Do `action` to the element `target` means (docs/accessibility.md "Acting on an element"); a
        click on an element out of view scrolls it into view first unless `scroll_into_view` is off."""
        element, ancestors = await self.resolve(session, target)
        bus = await self.bus(session)
        actor = Actor(bus, session, self._mouse, self._keyboard, scroll_into_view)
        states, before = element.states, element.value
        outcome = await perform(actor, element, ancestors, action, value)
        with contextlib.suppress(AtspiError, TimeoutError):  # gone with the action (a dialog's OK): as it was
            async with asyncio.timeout(READ_TIMEOUT_S):
                await refresh(bus, element)
        return dataclasses.replace(outcome, states_before=states, value_before=before)


def candidate_summary(element: Element) -> dict[str, object]:
    """How an ambiguous query's candidates are listed in the 409."""
    summary: dict[str, object] = {"id": element.id, "role": element.role, "name": element.name}
    if element.bounds is not None:
        b = element.bounds
        summary["bounds"] = {"x": b.x, "y": b.y, "width": b.width, "height": b.height}
    return summary
