"""The AT-SPI 2 protocol as this package uses it: names, paths, the role and state tables, and one
D-Bus connection to the accessibility bus that caps how many calls are in flight.

The tables are the at-spi2-core 2.46 enums (`AtspiRole`, `AtspiStateType`), which are append-only:
an application's role number is an index into `ROLES`, its state set two 32-bit words of bits indexed
by `STATES`. Names are the enums' own nicks (`push-button`, `check-box`), which is what other AT-SPI
tools print too (docs/accessibility.md).

Why a cap on calls in flight: replies come back in the order asked, so thousands queued at once only
delay the first answers; and with dbus-fast's own writer (on versions `dbus_connection` does not patch) a
full socket closes the connection (docs/accessibility.md "Speed").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

from desktop.accessibility import dbus_connection

logger = logging.getLogger("sandbox_desktop.accessibility")

REGISTRY = "org.a11y.atspi.Registry"
ROOT_PATH = "/org/a11y/atspi/accessible/root"
REGISTRY_PATH = "/org/a11y/atspi/registry"
CACHE_PATH = "/org/a11y/atspi/cache"
OBJECT_PREFIX = "/org/a11y/atspi/accessible/"
NULL_PATH = "/org/a11y/atspi/null"

ACCESSIBLE = "org.a11y.atspi.Accessible"
ACTION = "org.a11y.atspi.Action"
COMPONENT = "org.a11y.atspi.Component"
EDITABLE_TEXT = "org.a11y.atspi.EditableText"
SELECTION = "org.a11y.atspi.Selection"
TEXT = "org.a11y.atspi.Text"
VALUE = "org.a11y.atspi.Value"
CACHE = "org.a11y.atspi.Cache"
COLLECTION = "org.a11y.atspi.Collection"
APPLICATION = "org.a11y.atspi.Application"
EVENT_PREFIX = "org.a11y.atspi.Event."
PROPERTIES = "org.freedesktop.DBus.Properties"
DBUS = "org.freedesktop.DBus"

PeerConnector = Callable[[str], Awaitable[MessageBus | None]]
"""A connection to an application's own socket at a D-Bus address; None where it cannot be made that way."""

SCREEN_COORDS = 0
"""`AtspiCoordType.SCREEN`: extents relative to the screen's top-left corner."""

MAX_IN_FLIGHT = 256
PEER_CONNECT_S = 2.0
APPLICATION = "org.a11y.atspi.Application"

ROLES: tuple[str, ...] = (
    "invalid", "accelerator-label", "alert", "animation", "arrow", "calendar", "canvas", "check-box",
    "check-menu-item", "color-chooser", "column-header", "combo-box", "date-editor", "desktop-icon",
    "desktop-frame", "dial", "dialog", "directory-pane", "drawing-area", "file-chooser", "filler",
    "focus-traversable", "font-chooser", "frame", "glass-pane", "html-container", "icon", "image",
    "internal-frame", "label", "layered-pane", "list", "list-item", "menu", "menu-bar", "menu-item",
    "option-pane", "page-tab", "page-tab-list", "panel", "password-text", "popup-menu", "progress-bar",
    "push-button", "radio-button", "radio-menu-item", "root-pane", "row-header", "scroll-bar",
    "scroll-pane", "separator", "slider", "spin-button", "split-pane", "status-bar", "table",
    "table-cell", "table-column-header", "table-row-header", "tearoff-menu-item", "terminal", "text",
    "toggle-button", "tool-bar", "tool-tip", "tree", "tree-table", "unknown", "viewport", "window",
    "extended", "header", "footer", "paragraph", "ruler", "application", "autocomplete", "editbar",
    "embedded", "entry", "chart", "caption", "document-frame", "heading", "page", "section",
    "redundant-object", "form", "link", "input-method-window", "table-row", "tree-item",
    "document-spreadsheet", "document-presentation", "document-text", "document-web", "document-email",
    "comment", "list-box", "grouping", "image-map", "notification", "info-bar", "level-bar", "title-bar",
    "block-quote", "audio", "video", "definition", "article", "landmark", "log", "marquee", "math",
    "rating", "timer", "static", "math-fraction", "math-root", "subscript", "superscript",
    "description-list", "description-term", "description-value", "footnote", "content-deletion",
    "content-insertion", "mark", "suggestion", "push-button-menu",
)

STATES: tuple[str, ...] = (
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable", "enabled",
    "expandable", "expanded", "focusable", "focused", "has-tooltip", "horizontal", "iconified", "modal",
    "multi-line", "multiselectable", "opaque", "pressed", "resizable", "selectable", "selected",
    "sensitive", "showing", "single-line", "stale", "transient", "vertical", "visible",
    "manages-descendants", "indeterminate", "required", "truncated", "animated", "invalid-entry",
    "supports-autocompletion", "selectable-text", "is-default", "visited", "checkable", "has-popup",
    "read-only",
)
STATE_BITS = {name: index for index, name in enumerate(STATES)}


def role_name(number: int) -> str:
    return ROLES[number] if 0 <= number < len(ROLES) else "unknown"


def decode_states(words: Sequence[int]) -> frozenset[str]:
    """The names of the bits set in an AT-SPI state set (two 32-bit words, low word first)."""
    return _states((words[0] if words else 0) | ((words[1] if len(words) > 1 else 0) << 32))


@functools.lru_cache(maxsize=4096)
def _states(bits: int) -> frozenset[str]:
    """Cached: a page's thousands of objects share a few dozen state sets."""
    return frozenset(name for index, name in enumerate(STATES) if index and bits >> index & 1)


Request = tuple[str | None, str, str, str, str, tuple[Any, ...]]
"""(destination, object path, interface, member, signature, arguments) of one method call."""


def _result(reply: Message | None) -> list[Any] | AtspiError:
    if reply is None:
        return AtspiError("org.freedesktop.DBus.Error.NoReply", "no reply")
    if reply.message_type == MessageType.ERROR:
        return AtspiError(reply.error_name or "unknown", str(reply.body[0]) if reply.body else "")
    return list(reply.body)


class AtspiError(Exception):
    """A D-Bus error answer from an application or the registry (`name` is the D-Bus error name)."""

    def __init__(self, name: str, text: str) -> None:
        super().__init__(f"{name}: {text}")
        self.name = name

    @property
    def gone(self) -> bool:
        """The object or the application no longer exists."""
        return self.name in ("org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.ServiceUnknown",
                             "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.NoReply",
                             "org.freedesktop.DBus.Error.Disconnected")


class AtspiBus:
    """One asyncio connection to a desktop's accessibility bus (on the server's event loop: dbus-fast
    reads the socket with the loop's reader callbacks, so no thread owns it)."""

    def __init__(self, bus: MessageBus, peers: PeerConnector = dbus_connection.connect) -> None:
        self._bus = bus
        self._connect_peer = peers
        """How an application's own socket is connected, by its address: from this process, or (a sandboxed
        desktop's apps let in only their own uid) from inside the desktop's sandbox (service.py)."""
        self.applications: dict[str, Any] = {}
        """What reading learnt of each application (desktop/accessibility/reading.py), by its unique name."""
        self._peers: dict[str, MessageBus | None] = {}
        """Per application (its unique name), a direct connection to it, or None where it offers none.

        Every call through the bus daemon is two socket hops and a wake-up of the daemon; an app's bridge
        also listens on a socket of its own (`Application.GetApplicationBusAddress`), where a call costs
        about half as much (docs/accessibility.md "Speed"). Signals still come through the daemon."""

    @classmethod
    async def connect(cls, address: str, peers: PeerConnector = dbus_connection.connect) -> AtspiBus:
        return cls(await dbus_connection.connect(address), peers)

    @property
    def connected(self) -> bool:
        return bool(self._bus.connected)

    async def call(self, destination: str | None, path: str, interface: str, member: str,
                   signature: str = "", body: Iterable[Any] = ()) -> list[Any]:
        """One method call; raises AtspiError for an error answer. Callers bound the time of a whole
        operation (`asyncio.timeout`), not each call: a timer per call costs as much as the call."""
        [result] = await self.call_all([(destination, path, interface, member, signature, tuple(body))])
        if isinstance(result, AtspiError):
            raise result
        return result

    async def call_all(self, requests: Sequence[Request]) -> list[list[Any] | AtspiError]:
        """Many calls pipelined, at most MAX_IN_FLIGHT on the wire at once; answers in request order, an
        error answer as an AtspiError in its place (one object gone must not fail a whole tree). Calls to
        an application go over its direct connection when it has one."""
        if not requests:
            return []
        await self._connect_peers({r[0] for r in requests if r[0] is not None and r[0].startswith(":")})
        return await self._pipeline(requests)

    async def _connect_peers(self, names: set[str]) -> None:
        for name in [n for n, peer in self._peers.items() if peer is not None and not peer.connected]:
            del self._peers[name]  # the app went (its unique name is never reused)
        new = [name for name in names if name not in self._peers]
        if not new:
            return
        answers = await self._pipeline([(name, ROOT_PATH, APPLICATION, "GetApplicationBusAddress", "", ())
                                        for name in new])
        for name, answer in zip(new, answers, strict=True):
            self._peers[name] = None
            if isinstance(answer, list) and answer and answer[0]:
                with contextlib.suppress(Exception):  # no direct connection: the daemon's way still works
                    self._peers[name] = await asyncio.wait_for(self._connect_peer(str(answer[0])), PEER_CONNECT_S)

    def _route(self, destination: str | None) -> tuple[MessageBus, str | None]:
        """The connection a call goes over, and the destination it names there (none on a direct one)."""
        peer = self._peers.get(destination) if destination is not None else None
        if peer is not None and peer.connected:
            return peer, None
        return self._bus, destination

    async def _pipeline(self, requests: Sequence[Request]) -> list[list[Any] | AtspiError]:
        results: list[list[Any] | AtspiError] = [[] for _ in requests]
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        state = {"next": 0, "pending": 0}

        def finish(index: int, future: asyncio.Future[Message | None]) -> None:
            state["pending"] -= 1
            if future.cancelled():
                results[index] = AtspiError("org.freedesktop.DBus.Error.Disconnected", "cancelled")
            elif future.exception() is not None:
                results[index] = AtspiError("org.freedesktop.DBus.Error.Disconnected", str(future.exception()))
            else:
                results[index] = _result(future.result())
            launch()

        def launch() -> None:
            while state["pending"] < MAX_IN_FLIGHT and state["next"] < len(requests):
                index = state["next"]
                state["next"] += 1
                destination, path, interface, member, signature, body = requests[index]
                connection, destination = self._route(destination)
                message = Message(destination=destination, path=path, interface=interface, member=member,
                                  signature=signature, body=list(body))
                state["pending"] += 1
                asyncio.ensure_future(connection.call(message)).add_done_callback(functools.partial(finish, index))
            if state["pending"] == 0 and not done.done():
                done.set_result(None)

        launch()
        await done
        return results

    async def get_property(self, destination: str, path: str, interface: str, name: str) -> Any:
        [variant] = await self.call(destination, path, PROPERTIES, "Get", "ss", (interface, name))
        return variant.value

    async def add_match(self, rule: str) -> None:
        await self.call(DBUS, "/org/freedesktop/DBus", DBUS, "AddMatch", "s", (rule,))

    async def remove_match(self, rule: str) -> None:
        await self.call(DBUS, "/org/freedesktop/DBus", DBUS, "RemoveMatch", "s", (rule,))

    def on_message(self, handler: Callable[[Message], None]) -> Callable[[], None]:
        """Call `handler` for every message the bus delivers (signals included); returns the remover."""
        def wrapped(message: Message) -> None:
            if message.message_type == MessageType.SIGNAL:
                handler(message)
        self._bus.add_message_handler(wrapped)
        return lambda: self._bus.remove_message_handler(wrapped)

    def disconnect(self) -> None:
        for peer in self._peers.values():
            if peer is not None:
                peer.disconnect()
        self._peers.clear()
        self._bus.disconnect()


async def accessibility_bus_address(session_address: str, timeout_s: float = 5.0) -> str:
    """The accessibility bus's address, asked of the session bus's `org.a11y.Bus` (the launcher).

    The name is owned by the launcher the desktop supervises; it is never D-Bus activated here, so a
    second launcher cannot appear beside it: the call is made only once the name has an owner.
    """
    bus = await dbus_connection.connect(session_address)
    try:
        session = AtspiBus(bus)
        async with asyncio.timeout(timeout_s):
            [address] = await session.call("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress")
        return str(address)
    finally:
        bus.disconnect()
