"""The desktops of one pytest process (one xdist worker): by default one desktop, reset between tests; with
`--desktop-isolation=fresh` a new one per test. Never shared: a test gets a desktop no other test is
using, and xdist workers are separate processes with separate pools."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import cast

import httpx

from sandbox_desktop_client import ApiError, Client, NotFoundError, ServerError

from .handle import Desktop
from .options import Isolation


class ResetFailedWarning(UserWarning):
    """A desktop's reset failed on the server; the test got a new desktop instead."""


@dataclass(frozen=True)
class DesktopSettings:
    width: int | None
    height: int | None
    worker: str
    """The xdist worker id (`gw0`...) or `main`: a tag on its desktops, for `GET /v1/desktops?tag=...`."""


class DesktopPool:
    """Hands out a clean desktop per test (`acquire`) and takes it back (`release`)."""

    def __init__(self, client: Client, settings: DesktopSettings, isolation: Isolation) -> None:
        self.client = client
        self.settings = settings
        self.isolation = isolation
        self._kept: Desktop | None = None
        self._kept_used = False
        self.log_cursor = 0
        """The last action-log `seq` of the kept desktop seen so far: where the next test's stretch begins."""

    def acquire(self) -> Desktop:
        """A desktop nobody else uses, in its freshly started state."""
        if self.isolation is Isolation.FRESH:
            self.log_cursor = 0
            return self._create()
        if self._kept is not None and self._kept_used:
            try:
                self._kept.reset()
            except NotFoundError:  # the previous test deleted it: make another
                self._kept = None
            except ServerError as error:
                # A reset that failed half-way leaves the desktop in a state nobody knows: replace it.
                warnings.warn(f"resetting desktop {self._kept.id} failed ({error.status} {error.code}: "
                              f"{error.detail}); it is replaced by a new one", ResetFailedWarning, stacklevel=2)
                self._delete(self._kept)
                self._kept = None
        if self._kept is None:
            self._kept, self.log_cursor = self._create(), 0
        self._kept_used = True
        return self._kept

    def release(self, desktop: Desktop, log_cursor: int) -> None:
        """The test is over: delete a fresh desktop; note where the kept one's action log stands."""
        if self.isolation is Isolation.FRESH:
            self._delete(desktop)
        else:
            self.log_cursor = log_cursor

    def close(self) -> None:
        """Delete the kept desktop (the end of the session)."""
        if self._kept is not None:
            self._delete(self._kept)
            self._kept = None

    def _create(self) -> Desktop:
        created = self.client.desktops.create(width=self.settings.width, height=self.settings.height,
                                              tags={"pytest-worker": self.settings.worker})
        return cast(Desktop, Desktop.bind(self.client, created.id))

    @staticmethod
    def _delete(desktop: Desktop) -> None:
        for attempt in range(2):
            try:
                desktop.delete()
            except ApiError:  # deleted by the test itself, or failing: nothing more to do here
                return
            except httpx.TransportError:
                # The server closes a connection after a 500; the pool may hand that one out once more.
                if attempt:
                    raise
            else:
                return
