"""Screen events are produced only while someone wants them (desktop/events/bus.py): a subscription to them, or a
hold (the effect observer between actions, docs/effects.md); the hooks hear each change once."""

from __future__ import annotations

import asyncio

from desktop.events.bus import EventBus
from sandbox_desktop_wire.events import EventType


def test_a_hold_and_a_subscription_keep_screen_events_until_both_let_go() -> None:
    async def scenario() -> list[bool]:
        bus = EventBus()
        heard: list[bool] = []
        bus.on_screen_interest(heard.append)
        release = bus.hold_screen()
        with bus.subscribe([EventType.SCREEN_CHANGED]):
            release()
            release()  # a second call lets go of nothing more
            assert heard == [False, True]
        bus.subscribe([EventType.WINDOW_CREATED]).close()  # no interest in the screen: no change
        again = bus.hold_screen()
        again()
        return heard

    assert asyncio.run(scenario()) == [False, True, False, True, False]
