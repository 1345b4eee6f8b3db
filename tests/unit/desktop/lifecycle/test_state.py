"""The desktop's one place of state changes (`Desktop._set_state`): every transition, pause and resume
included, is published once, as the status tells it; no desktop is started."""

from __future__ import annotations

import asyncio
from pathlib import Path

from desktop.core.dependencies import DependencyChecker, DependencyReport
from desktop.events.bus import Event
from desktop.events.event_types import DesktopStateChanged
from desktop.lifecycle.runtime import Desktop
from sandbox_desktop_wire.enums import DesktopRuntimeState as State
from sandbox_desktop_wire.events import EventType


class Installed(DependencyChecker):
    """Every dependency there, whatever the machine has."""

    def report(self, *, fresh: bool = False) -> DependencyReport:
        return DependencyReport()


def test_every_transition_is_published_once_as_the_status_tells_it(tmp_path: Path) -> None:
    async def scenario() -> list[tuple[str, str]]:
        desktop = Desktop(state_dir=tmp_path, dependencies=Installed())
        with desktop.events.bus.subscribe([EventType.DESKTOP_STATE_CHANGED]) as changes:
            desktop._set_state(State.STARTING)
            desktop._set_state(State.ACTIVE)
            desktop._set_state(State.ACTIVE)  # no change: nothing published
            desktop._set_state(paused="idle")
            assert (desktop.current_state(), desktop.paused_reason) == (State.PAUSED, "idle")
            desktop._set_state(State.STOPPING)  # a stop of a paused desktop: it thaws its processes next
            desktop._set_state(paused=None)  # still stopping: nothing published
            desktop._set_state(State.INACTIVE)
            published = []
            while (event := await changes.next(timeout=0)) is not None:
                assert isinstance(event, Event)
                assert isinstance(event.data, DesktopStateChanged)
                published.append((str(event.data.previous), str(event.data.state)))
        return published

    assert asyncio.run(scenario()) == [("inactive", "starting"), ("starting", "active"), ("active", "paused"),
                                       ("paused", "stopping"), ("stopping", "inactive")]
