"""What builds on a desktop hooks onto its ending: recording and streaming finalise themselves when it stops
or fails (api/server/desktop_services.py adds their hooks; desktop/ never imports them)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger("sandbox_desktop.desktop")

StopHook = Callable[[], Awaitable[None]]
FailureHook = Callable[[str], Awaitable[None]]


class Hooks:
    def __init__(self) -> None:
        self.stop: list[StopHook] = []
        """Run when the desktop stops (or its failed session is cleared away)."""
        self.failure: list[FailureHook] = []
        """Run once, with the reason, when the session fails: its children cannot be kept running."""
        self._failing: asyncio.Task[None] | None = None

    def failed(self, reason: Callable[[], str]) -> None:
        """The session failed: run the failure hooks soon (once per session), with the reason as it reads then."""
        if self._failing is None:
            self._failing = asyncio.get_running_loop().create_task(self._run_failure(reason))

    async def _run_failure(self, reason: Callable[[], str]) -> None:
        why = reason()
        for hook in self.failure:
            try:
                await hook(why)
            except Exception:
                logger.exception("desktop failure hook failed")

    async def stopping(self) -> None:
        """Let the failure hooks finish (the stop hooks would find their work half done), then run the stop hooks."""
        failing, self._failing = self._failing, None
        if failing is not None:
            await failing
        for hook in self.stop:
            try:
                await hook()
            except Exception:
                logger.exception("desktop stop hook failed")
