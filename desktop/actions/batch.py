"""Batches of input actions run one batch at a time, in order, stopping at the first error.

Steps arrive validated and in screen pixels (the API layer maps client coordinates first). A batch
holds the desktop's input lock (desktop/x11/thread.py) while its steps run and its buttons are released,
so no other input (REST, live view, another batch) lands between its steps; the mouse and keyboard
methods the steps call take the same lock again, which the holder may. The settle and the final
screenshot run outside it, under a lock of batches only, so two batches never interleave while
single input requests need not wait for a batch's observation. Whatever fails, modifiers held for a
click, scroll or drag are released, and buttons a batch pressed are released when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from desktop.accessibility.query import Target
from desktop.actions.waits import Condition, WaitResult, wait_for
from desktop.core.errors import DomainError, InputFailed
from desktop.effects.effect import Effect
from desktop.effects.observer import EffectObserver, EffectWatch
from desktop.events.sources import DesktopEvents
from desktop.input.keyboard import Keyboard
from desktop.input.mouse import Mouse, PointerState
from desktop.screen.frames import FrameSource
from desktop.screen.screenshots import Screen, Screenshot, ShotOptions
from desktop.screen.settle import SettleResult, wait_until_quiet
from desktop.x11.session import Session
from sandbox_desktop_wire.enums import MouseButton

logger = logging.getLogger("sandbox_desktop.actions")

Point = tuple[int, int]


@dataclass(frozen=True)
class ElementAt:
    """An element a step points at (an id, a set-of-marks number or a query): found when the step runs,
    after the steps before it, at the centre of its visible part (docs/accessibility.md)."""

    target: Target


Where = Point | ElementAt
Locate = Callable[[Session, Target], Awaitable[tuple[Point, str]]]
"""An element target's visible centre and the id of the element found (Accessibility.locate)."""


@dataclass(frozen=True)
class Move:
    x: int
    y: int


@dataclass(frozen=True)
class Hover:
    """A move onto an element."""

    element: ElementAt


@dataclass(frozen=True)
class Click:
    at: Where | None
    button: MouseButton = MouseButton.LEFT
    count: int = 1
    modifiers: tuple[int, ...] = ()
    """Keysyms held down during the click."""


@dataclass(frozen=True)
class Button:
    at: Where | None
    button: MouseButton
    down: bool


@dataclass(frozen=True)
class Drag:
    path: tuple[Point, ...]
    button: MouseButton = MouseButton.LEFT
    modifiers: tuple[int, ...] = ()
    duration_ms: int = 0


@dataclass(frozen=True)
class Scroll:
    at: Where | None
    delta_x: int
    delta_y: int
    modifiers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Type:
    keysyms: tuple[int, ...]
    delay_ms: int


@dataclass(frozen=True)
class Key:
    chords: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class HoldKey:
    keysyms: tuple[int, ...]
    duration_ms: int


@dataclass(frozen=True)
class Wait:
    duration_ms: int
    """A sleep; with a `condition`, the longest wait for it (desktop/actions/waits.py)."""
    condition: Condition | None = None


@dataclass(frozen=True)
class CursorPosition:
    pass


@dataclass(frozen=True)
class Capture:
    """A mid-batch screenshot, or a zoom when `options.region` is set."""

    options: ShotOptions


Step = Move | Hover | Click | Button | Drag | Scroll | Type | Key | HoldKey | Wait | CursorPosition | Capture


@dataclass(frozen=True)
class StepResult:
    pointer: PointerState | None = None
    shot: Screenshot | None = None
    waited: WaitResult | None = None
    element: str | None = None
    """The id of the element a step pointed at."""


@dataclass(frozen=True)
class Settle:
    quiet_ms: int
    timeout_ms: int


@dataclass
class BatchOutcome:
    """What a batch did: one result per step run, the first error, and the final observation."""

    results: list[StepResult] = field(default_factory=list)
    error: tuple[int, DomainError] | None = None
    """(index of the failing step, its problem); `len(steps)` for the final observation."""
    settle: SettleResult | None = None
    shot: Screenshot | None = None
    effect: Effect | None = None
    """What the steps changed, when asked (docs/effects.md)."""


class Actions:
    """Runs batches against the desktop's mouse, keyboard, screen and capture loop."""

    def __init__(self, mouse: Mouse, keyboard: Keyboard, screen: Screen, frames: FrameSource,
                 events: DesktopEvents | None = None, locate: Locate | None = None,
                 effects: EffectObserver | None = None) -> None:
        self.mouse = mouse
        self.effects = effects
        self.locate = locate
        self.keyboard = keyboard
        self.screen = screen
        self.frames = frames
        self.events = events
        self._lock = asyncio.Lock()
        """Batches one at a time, observation included; taken before the input lock, never after it."""

    async def run(self, session: Session, steps: list[Step], settle: Settle | None = None,
                  final: ShotOptions | None = None, effect: bool = False) -> BatchOutcome:
        """Run `steps` in order; then settle and take the `final` screenshot, even after an error; with
        `effect`, tell what the steps changed (the settle, when asked, is the effect's window)."""
        outcome = BatchOutcome()
        async with self._lock:
            if not effect:
                await self._run_observed(session, steps, outcome, settle, final, None)
                return outcome
            assert self.effects is not None, "a batch reporting its effect needs the desktop's effect observer"
            async with self.effects.watch() as watch:
                await self._run_observed(session, steps, outcome, settle, final, watch)
        return outcome

    async def _run_observed(self, session: Session, steps: list[Step], outcome: BatchOutcome, settle: Settle | None,
                            final: ShotOptions | None, watch: EffectWatch | None) -> None:
        # Admitted by the takeover gate before the lock: a queued batch waits without blocking the person.
        async with self.mouse.exclusive(session):
            await self._run_steps(session, steps, outcome)
        await self._observe(session, outcome, len(steps), settle, final, watch)

    async def _run_steps(self, session: Session, steps: list[Step], outcome: BatchOutcome) -> None:
        pressed: set[MouseButton] = set()
        try:
            for index, step in enumerate(steps):
                try:
                    outcome.results.append(await self._run_step(session, step, pressed))
                except DomainError as exc:
                    outcome.error = (index, exc)
                    break
                except Exception as exc:  # an X protocol error or a bug: report it, run nothing more
                    logger.exception("batch step %d (%s) failed", index, type(step).__name__)
                    outcome.error = (index, InputFailed(f"{type(exc).__name__}: {exc}"))
                    break
        finally:
            await self._release(session, pressed)

    async def _observe(self, session: Session, outcome: BatchOutcome, index: int, settle: Settle | None,
                       final: ShotOptions | None, watch: EffectWatch | None) -> None:
        try:
            if settle is not None:
                outcome.settle = await wait_until_quiet(self.frames, session.display, settle.quiet_ms / 1000,
                                                        settle.timeout_ms / 1000)
            if watch is not None:  # before the screenshot, which then shows what the effect tells
                outcome.effect = await watch.finish(settled=settle is not None)
            if final is not None:
                outcome.shot = await self.screen.capture(session, final)
        except DomainError as exc:
            if outcome.error is None:
                outcome.error = (index, exc)

    async def _release(self, session: Session, pressed: set[MouseButton]) -> None:
        """Release the buttons this batch pressed with `down` and left down."""
        for button in sorted(pressed):
            try:
                await self.mouse.button(session, None, None, button, down=False)
            except Exception as exc:  # the desktop may be gone; the X server then dropped the press too
                logger.warning("could not release %s button after a batch: %s", button, exc)

    async def _run_step(self, session: Session, step: Step, pressed: set[MouseButton]) -> StepResult:
        mouse = self.mouse
        match step:
            case Move(x, y):
                return StepResult(await mouse.move(session, x, y))
            case Hover(element):
                (x, y), hovered = await self._locate(session, element)
                return StepResult(await mouse.move(session, x, y), element=hovered)
            case Click(at, button, count, modifiers):
                (x, y), found = await self._where(session, at)
                async with self._holding(session, modifiers):
                    return StepResult(await mouse.click(session, x, y, button, count), element=found)
            case Button(at, button, down):
                point, found = await self._where(session, at) if at is not None else (None, None)
                state = await mouse.button(session, point[0] if point else None, point[1] if point else None,
                                           button, down)
                (pressed.add if down else pressed.discard)(button)
                return StepResult(state, element=found)
            case Drag():
                async with self._holding(session, step.modifiers):  # one drag path (desktop/input/mouse.py)
                    return StepResult(await mouse.drag_along(session, step.path, step.button, step.duration_ms))
            case Scroll(at, delta_x, delta_y, modifiers):
                (x, y), found = await self._where(session, at)
                async with self._holding(session, modifiers):
                    return StepResult(await mouse.scroll(session, x, y, delta_x, delta_y), element=found)
            case Type(keysyms, delay_ms):
                await self.keyboard.type_keysyms(session, list(keysyms), delay_ms)
            case Key(chords):
                await self.keyboard.press_chords(session, [list(chord) for chord in chords])
            case HoldKey(keysyms, duration_ms):
                async with self._holding(session, keysyms):
                    await asyncio.sleep(duration_ms / 1000)
            case Wait(duration_ms, condition):
                if condition is None:
                    await asyncio.sleep(duration_ms / 1000)
                else:
                    assert self.events is not None, "a batch with condition waits needs the desktop's events"
                    return StepResult(waited=await wait_for(self.events, condition, duration_ms / 1000))
            case CursorPosition():
                return StepResult(await mouse.position(session))
            case Capture(options):
                return StepResult(shot=await self.screen.capture(session, options))
        return StepResult()

    async def _pointer(self, session: Session) -> Point:
        state = await self.mouse.position(session)
        return state.x, state.y

    async def _where(self, session: Session, at: Where | None) -> tuple[Point, str | None]:
        """Where a step acts: its point, its element's visible centre, or the pointer's position."""
        if isinstance(at, ElementAt):
            return await self._locate(session, at)
        return (at or await self._pointer(session)), None

    async def _locate(self, session: Session, at: ElementAt) -> tuple[Point, str]:
        assert self.locate is not None, "a batch with element targets needs the desktop's accessibility"
        return await self.locate(session, at.target)

    @contextlib.asynccontextmanager
    async def _holding(self, session: Session, keysyms: tuple[int, ...]) -> AsyncIterator[None]:
        """Hold `keysyms` for the body; released whatever the body raised."""
        if not keysyms:
            yield
            return
        await self.keyboard.chord_down(session, list(keysyms))
        try:
            yield
        finally:
            await self.keyboard.chord_up(session, list(keysyms))
