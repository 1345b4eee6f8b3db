"""Takeover: agent input while a person holds control through the live view (docs/control.md).

The live view (streaming/control.py) tells the gate who has taken over (`hold(name)`) and when they
hand back (`hold(None)`). Every mouse and keyboard action passes `admitted(lock)` before it runs:
the live view's own input (action source "stream") always passes; anything else (REST input,
batches, vendor endpoints, MCP tools, element actions) is, per the server's `--takeover` mode,
refused with 409 `desktop_controlled_by_viewer`, queued until the person releases control (bounded
by the request's `Prefer: wait=N`), or let through (`share`).

A queued action waits *before* it takes the input lock, so the person's own input is never stuck
behind it; it waits on an event set by the release (no polling). An action that already holds the
lock (a batch between its steps) cannot wait without blocking the person, so it is refused at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from desktop.core.errors import DesktopError
from desktop.events.action_log import action_source, action_wait
from sandbox_desktop_wire.enums import ActionSource, TakeoverMode
from sandbox_desktop_wire.problems import ProblemCode

logger = logging.getLogger("sandbox_desktop.takeover")

DEFAULT_WAIT_S = 30.0
"""How long a queued action waits for the person when the request did not say (`Prefer: wait=N`)."""
MAX_ROUNDS = 1000
"""Bound on wake-ups of one queued action (each is a hand-over between people)."""


class ControlledByViewer(DesktopError):
    """409: a person holds control through the live view; `controller` names them."""

    code = ProblemCode.DESKTOP_CONTROLLED_BY_VIEWER


class Lock(Protocol):
    """The desktop's input lock (desktop/x11/thread.py `InputLock`), as the gate needs it."""

    def held(self) -> bool: ...

    async def __aenter__(self) -> None: ...

    async def __aexit__(self, *exc: object) -> None: ...


class TakeoverGate:
    """Who has taken over the desktop now (None: nobody), and what agent input gets meanwhile."""

    def __init__(self, mode: TakeoverMode = TakeoverMode.REFUSE) -> None:
        self.mode = mode
        self._holder: str | None = None
        self._released = asyncio.Event()
        self._released.set()

    @property
    def holder(self) -> str | None:
        return self._holder

    def hold(self, person: str | None) -> None:
        """`person` has taken over (None: control is back with the agent); wakes queued actions on release."""
        if person == self._holder:
            return
        logger.info("takeover: %s", f"{person} holds the desktop" if person else "agent input resumes")
        self._holder = person
        if person is None:
            self._released.set()
        else:
            self._released.clear()

    def blocks(self) -> bool:
        """Whether the current task's input must not run now."""
        return (self._holder is not None and self.mode is not TakeoverMode.SHARE
                and action_source.get() != ActionSource.STREAM)  # the live view's own input

    def admitted(self, lock: Lock) -> Admitted:
        """Hold `lock` for the block once this task's input may run (waits or raises per the mode)."""
        return Admitted(self, lock)

    async def _enter(self, lock: Lock) -> None:
        deadline = self._deadline()
        for _ in range(MAX_ROUNDS):
            await self._wait_turn(lock, deadline)
            await lock.__aenter__()
            if not self.blocks():
                return
            # A person took over while this action waited for the lock: wait again, without it.
            await lock.__aexit__(None, None, None)
        raise self._refusal()

    async def admit(self) -> None:
        """Wait (or raise) until this task's input may run; for callers that take the lock themselves."""
        await self._wait_turn(None, self._deadline())

    @staticmethod
    def _deadline() -> float:
        """When a queued action gives up: the request's `Prefer: wait=N` from now, or DEFAULT_WAIT_S."""
        wait = action_wait.get()
        return asyncio.get_running_loop().time() + (DEFAULT_WAIT_S if wait is None else max(0.0, wait))

    async def _wait_turn(self, lock: Lock | None, deadline: float) -> None:
        if not self.blocks():
            return
        if self.mode is TakeoverMode.REFUSE or (lock is not None and lock.held()):
            raise self._refusal()
        loop = asyncio.get_running_loop()
        for _ in range(MAX_ROUNDS):
            if not self.blocks():
                return
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._released.wait(), left)
            except TimeoutError:
                break
        if self.blocks():
            raise self._refusal(waited=True)

    def _refusal(self, waited: bool = False) -> ControlledByViewer:
        holder = self._holder or "a viewer"
        how = ("and did not release it in time" if waited else
               "(the server refuses agent input meanwhile: --takeover refuse)" if self.mode is TakeoverMode.REFUSE
               else "(an action inside a batch cannot wait for it)")
        return ControlledByViewer(f"{holder} holds control of the desktop through the live view {how}; "
                                  "retry once they release it", controller=self._holder)


class Admitted:
    """`TakeoverGate.admitted`: every input action enters it. A class rather than an `asynccontextmanager`, whose
    generator cost 5 us of the 6.5 an action spent here."""

    __slots__ = ("gate", "lock")

    def __init__(self, gate: TakeoverGate, lock: Lock) -> None:
        self.gate = gate
        self.lock = lock

    async def __aenter__(self) -> None:
        await self.gate._enter(self.lock)

    async def __aexit__(self, *exc: object) -> None:
        await self.lock.__aexit__(None, None, None)
