"""Who drives the desktop from the live view: one host at a time, the other viewers watch.

neko's rules: `control/request` makes the requester host when nobody is; otherwise the host is
told someone asked. One addition: a refused request is remembered, and when the host leaves or
releases control it passes to the earliest viewer still waiting, because the SDK asks only
once, right after connecting.
"""

from __future__ import annotations

from collections.abc import Callable

HostChanged = Callable[[str | None, str | None, str], None]
"""`(new host, previous host, viewer whose action caused it)`."""


class Control:
    """The host and the queue of viewers waiting for control; changes are reported to `on_change`."""

    def __init__(self, on_change: HostChanged) -> None:
        self._on_change = on_change
        self._host: str | None = None
        self._waiting: list[str] = []

    @property
    def host(self) -> str | None:
        return self._host

    def holds(self, viewer: str) -> bool:
        return self._host == viewer

    def request(self, viewer: str) -> bool:
        """Make `viewer` host if nobody is (True); otherwise queue it (False)."""
        if self._host == viewer:
            return True
        if self._host is None:
            self._set(viewer, viewer)
            return True
        if viewer not in self._waiting:
            self._waiting.append(viewer)
        return False

    def release(self, viewer: str) -> None:
        """Give control up (if held), passing it to the earliest waiting viewer."""
        if viewer in self._waiting:
            self._waiting.remove(viewer)
        if self._host == viewer:
            self._set(self._waiting.pop(0) if self._waiting else None, viewer)

    def clear(self) -> None:
        """Forget everything without reporting (the stream stopped)."""
        self._host = None
        self._waiting.clear()

    def _set(self, host: str | None, cause: str) -> None:
        previous, self._host = self._host, host
        if previous != host:
            self._on_change(host, previous, cause)
