"""The accessibility bus of a desktop: `at-spi-bus-launcher`, and switching accessibility on.

The launcher owns `org.a11y.Bus` on the desktop's session bus and starts the accessibility bus (a
second dbus-daemon) and, on demand, the registry daemon. Apps find it by asking the session bus, so
they need `DBUS_SESSION_BUS_ADDRESS` (desktop/lifecycle/home.py sets it for every desktop process).

`org.a11y.Status.IsEnabled = true` is set as soon as the launcher answers, before any app starts:
Chromium and Electron decide at start whether to register with the bus, and ignore a later change
(docs/accessibility.md "Which apps expose a tree").
"""

from __future__ import annotations

import asyncio

from dbus_fast import Variant

from desktop.accessibility import dbus_connection
from desktop.accessibility.atspi import DBUS, PROPERTIES, AtspiBus
from desktop.core.dependencies import find_helper

LAUNCHER_NAME = "org.a11y.Bus"


def find_launcher() -> str | None:
    """The `at-spi-bus-launcher` executable (it lives in libexec, not on PATH), or None."""
    return find_helper("at-spi-bus-launcher")


async def switch_on(session_address: str, timeout_s: float) -> bool:
    """Wait until the launcher owns its name on the session bus, then set `IsEnabled`. False if the
    name has no owner within `timeout_s` (the launcher failed to start)."""
    bus = await dbus_connection.connect(session_address)
    try:
        session = AtspiBus(bus)
        owned = asyncio.get_running_loop().create_future()

        def on_owner_change(message: object) -> None:
            body = getattr(message, "body", None)
            if getattr(message, "member", "") == "NameOwnerChanged" and body and body[0] == LAUNCHER_NAME \
                    and body[2] and not owned.done():
                owned.set_result(True)

        remove = session.on_message(on_owner_change)
        try:
            await session.add_match(f"type='signal',interface='{DBUS}',member='NameOwnerChanged',"
                                    f"arg0='{LAUNCHER_NAME}'")
            [has_owner] = await session.call(DBUS, "/org/freedesktop/DBus", DBUS, "NameHasOwner", "s",
                                             (LAUNCHER_NAME,))
            if not has_owner:
                try:
                    await asyncio.wait_for(owned, timeout_s)
                except TimeoutError:
                    return False
        finally:
            remove()
        await session.call(LAUNCHER_NAME, "/org/a11y/bus", PROPERTIES, "Set", "ssv",
                           ("org.a11y.Status", "IsEnabled", Variant("b", True)))
        return True
    finally:
        bus.disconnect()
