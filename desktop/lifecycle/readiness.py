"""End-to-end readiness: the desktop can do real work now (X answers, a window manager runs, pixels encode)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from Xlib import display as xdisplay

from desktop.core.errors import DesktopError, DesktopFailed
from desktop.lifecycle.runtime import Desktop
from desktop.screen.screenshots import Region, ShotOptions
from sandbox_desktop_wire.enums import SupervisedChild

CHECK_TIMEOUT = 2.0
"""Seconds one check may take; a probe must answer well inside the orchestrator's own timeout."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Check:
    """One readiness check: its name, whether it passed, how long it took and why it failed."""

    name: str
    ok: bool
    ms: float
    detail: str = ""


@dataclass(frozen=True)
class Readiness:
    """All checks, in order; ready when every one passed."""

    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self.checks)

    def failure(self) -> str:
        """The failed checks as one sentence for a problem detail."""
        return "; ".join(f"{c.name}: {c.detail}" for c in self.checks if not c.ok)


def _x_round_trip(display: xdisplay.Display) -> None:
    display.get_input_focus()


async def check_readiness(desktop: Desktop) -> Readiness:
    """Run the checks in order, stopping at the first failure (later ones depend on earlier ones)."""

    async def active() -> None:
        desktop.require_active()

    async def x_server() -> None:
        await desktop.session().x.call(_x_round_trip)

    async def window_manager() -> None:
        supervisor = desktop.require_active()
        openbox = supervisor.children.get(SupervisedChild.OPENBOX)
        if openbox is None or not openbox.running:
            raise DesktopFailed("the window manager (openbox) is not running")

    async def screenshot() -> None:
        shot = await desktop.screen.capture(desktop.session(), ShotOptions(region=Region(0, 0, 8, 8)))
        if not shot.data.startswith(PNG_SIGNATURE):
            raise DesktopFailed("the screenshot did not encode as PNG")

    steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("desktop", active), ("x_server", x_server), ("window_manager", window_manager), ("screenshot", screenshot),
    ]
    checks: list[Check] = []
    for name, step in steps:
        check = await _run(name, step)
        checks.append(check)
        if not check.ok:
            break
    return Readiness(tuple(checks))


async def _run(name: str, step: Callable[[], Awaitable[None]]) -> Check:
    began = time.perf_counter()
    try:
        await asyncio.wait_for(step(), CHECK_TIMEOUT)
    except TimeoutError:
        return Check(name, False, _ms(began), f"no answer within {CHECK_TIMEOUT:g} s")
    except DesktopError as exc:
        return Check(name, False, _ms(began), exc.message)
    return Check(name, True, _ms(began))


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 2)
