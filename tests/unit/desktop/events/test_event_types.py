"""The desktop's event types: one class per type of the wire, and the JSON an event becomes (docs/events.md)."""

from __future__ import annotations

import json
from typing import get_args

from desktop.events.bus import Event, Missed
from desktop.events.event_types import AccessibilityChanged, EventData, WindowFocused, WindowState, WindowTitleChanged
from sandbox_desktop_wire.events import EventType


def test_every_type_of_the_wire_has_its_one_class() -> None:
    types = [cls.TYPE for cls in get_args(EventData)]
    assert sorted(types) == sorted(set(EventType) - {EventType.EVENTS_MISSED})


def wire(data: EventData) -> str:
    return json.dumps(Event(41, 11683.6729551, "2026-12-01T17:32:54.594919Z", data).to_wire(), separators=(",", ":"))


def test_an_event_is_the_json_the_docs_show() -> None:
    window = WindowState(8388620, "smoke", "xterm", "XTerm", 3267, 158, 149, 484, 316)
    assert wire(WindowTitleChanged(window, "xterm")) == (
        '{"seq":41,"type":"window.title_changed","t":11683.672955,"at":"2026-12-01T17:32:54.594919Z",'
        '"windowId":"8388620","title":"smoke","class":"XTerm","instance":"xterm","pid":3267,"x":158,"y":149,'
        '"width":484,"height":316,"previousTitle":"xterm"}')
    assert wire(WindowFocused(None, None, 8388620)).endswith(
        '"windowId":null,"title":null,"previousWindowId":"8388620"}')
    assert wire(AccessibilityChanged("1.42:318", "object:state-changed:checked")).endswith(
        '"element":"1.42:318","change":"object:state-changed:checked"}')  # no `child` unless one was added
    assert Missed(3).to_wire() == {"type": "events.missed", "count": 3}
