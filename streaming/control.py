"""Who drives the desktop from the live view: one controller at a time, the other viewers watch.

The one owner of control state (docs/control.md). neko's rules, plus what shared control needs:
- `request`: the requester becomes controller when nobody is; otherwise it waits in line (the SDK
  asks only once, right after connecting, so a refused request is remembered) and the controller
  is told someone asked. When the controller leaves or releases, control passes to the earliest
  viewer still waiting.
- `give`: the controller (or an admin) hands control to a named viewer.
- `take`: an admin takes control from whoever holds it; that viewer goes first in line, so the
  admin's release hands control back to them.
- Takeover: a controller *holds the desktop* (agent input waits or is refused, desktop/control/takeover.py)
  once they asked for it (`request {takeover: true}`, `take`, `give`) or sent input (a key, a button
  or a wheel; pointer moves do not count). A viewer that only auto-requested control at connect (the
  SDK does) leaves the agent alone until then.

Every change goes through `_set`, which logs it and reports it to `on_change` once.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("sandbox_desktop.stream.control")


class Access(enum.StrEnum):
    """What a viewer may do, from the credential it connected with (docs/control.md, "Roles")."""

    ADMIN = "admin"
    """The server token (or a server without one): request, give, take, release."""
    CONTROL = "control"
    """A `control` scoped token: request, give (while controller), release; never take."""
    VIEW = "view"
    """A `view` scoped token: watches; never controls, its input and clipboard are dropped."""


class Reason(enum.StrEnum):
    """The viewer action that changed control."""

    REQUEST = "request"
    GIVE = "give"
    TAKE = "take"
    RELEASE = "release"
    LEAVE = "leave"
    INPUT = "input"


@dataclass(frozen=True)
class ControlChange:
    controller: str | None
    previous: str | None
    """The controller before the change (the same viewer when only `takeover` changed)."""
    cause: str
    """The viewer whose action caused it (neko's `control/host` `id`)."""
    reason: Reason
    takeover: bool
    """Whether the controller holds the desktop now (agent input waits or is refused)."""


class ControlRefused(Exception):
    """A control action this viewer may not take; the message says why (sent back as `system/error`)."""


class Control:
    """The controller, whether they hold the desktop, and the line of viewers waiting for control."""

    def __init__(self, on_change: Callable[[ControlChange], None], access: Callable[[str], Access | None]) -> None:
        self._on_change = on_change
        self._access = access
        """A connected viewer's access; None for an id that is not connected."""
        self._host: str | None = None
        self._takeover = False
        self._waiting: list[str] = []

    @property
    def host(self) -> str | None:
        return self._host

    @property
    def takeover(self) -> bool:
        """Whether the controller holds the desktop (a person acting, not just watching with control)."""
        return self._takeover

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(self._waiting)

    def holds(self, viewer: str) -> bool:
        return self._host == viewer

    def request(self, viewer: str, takeover: bool = False) -> bool:
        """Make `viewer` controller if nobody is (True); otherwise queue it (False)."""
        self._may_control(viewer)
        if self._host == viewer:
            if takeover:
                self._set(viewer, viewer, Reason.REQUEST, True)
            return True
        if self._host is None:
            self._set(viewer, viewer, Reason.REQUEST, takeover)
            return True
        if viewer not in self._waiting:
            self._waiting.append(viewer)
        return False

    def give(self, giver: str, target: str) -> None:
        """The controller (or an admin) hands control to `target`, which holds the desktop from now on."""
        if self._host != giver and self._access(giver) is not Access.ADMIN:
            raise ControlRefused("only the controller or an admin can give control")
        if self._access(target) is None:
            raise ControlRefused(f"no viewer {target!r} is connected")
        if self._access(target) is Access.VIEW:
            raise ControlRefused(f"{target} watches with a view-only token and cannot control")
        self._unqueue(target)
        self._set(target, giver, Reason.GIVE, True)

    def take(self, viewer: str) -> None:
        """An admin takes control from whoever holds it; that viewer is first in line to get it back."""
        if self._access(viewer) is not Access.ADMIN:
            raise ControlRefused("only an admin (the server token) can take control")
        self._unqueue(viewer)
        if self._host is not None and self._host != viewer:
            self._waiting.insert(0, self._host)
        self._set(viewer, viewer, Reason.TAKE, True)

    def release(self, viewer: str) -> None:
        """Give control up (if held), passing it to the earliest waiting viewer; leave the line otherwise."""
        self._unqueue(viewer)
        if self._host == viewer:
            self._pass_on(viewer, Reason.RELEASE)

    def leave(self, viewer: str) -> None:
        """The viewer disconnected."""
        self._unqueue(viewer)
        if self._host == viewer:
            self._pass_on(viewer, Reason.LEAVE)

    def touched(self, viewer: str) -> None:
        """The controller sent input: from now on they hold the desktop."""
        if self._host == viewer and not self._takeover:
            self._set(viewer, viewer, Reason.INPUT, True)

    def clear(self) -> None:
        """Forget everything without reporting (the stream stopped)."""
        self._host = None
        self._takeover = False
        self._waiting.clear()

    def _may_control(self, viewer: str) -> None:
        if self._access(viewer) is Access.VIEW:
            raise ControlRefused("this viewer watches with a view-only token and cannot control")

    def _unqueue(self, viewer: str) -> None:
        if viewer in self._waiting:
            self._waiting.remove(viewer)

    def _pass_on(self, cause: str, reason: Reason) -> None:
        # The next in line got control without asking for it now: they hold the desktop once they act.
        self._set(self._waiting.pop(0) if self._waiting else None, cause, reason, False)

    def _set(self, host: str | None, cause: str, reason: Reason, takeover: bool) -> None:
        """The one setter: log and report a change of controller or takeover."""
        takeover = takeover and host is not None
        previous = self._host
        if (host, takeover) == (previous, self._takeover):
            return
        self._host, self._takeover = host, takeover
        logger.info("control: %s -> %s (%s by %s)%s", previous, host, reason, cause,
                    ", holding the desktop" if takeover else "")
        self._on_change(ControlChange(host, previous, cause, reason, takeover))
