"""The action log's kinds and their one conversion to the wire: every kind has its wire model, with the same
fields in the same order, and an entry's JSON is what docs/action-log.md shows (nulls kept, `videoMs` last)."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from desktop.events import action_log as logged
from sandbox_desktop_wire.action_log import ActionLogEntry, LogEntry
from sandbox_desktop_wire.actions import ActionLogResponse
from sandbox_desktop_wire.enums import ActionSource, MouseButton

HEADER = ("seq", "t", "at", "source", "video_ms", "kind")


@pytest.mark.parametrize("kind", get_args(logged.LoggedAction), ids=lambda k: k.KIND)
def test_every_kind_has_a_wire_model_with_its_fields(kind: type[logged.LoggedAction]) -> None:
    model = next(m for m in get_args(get_args(ActionLogEntry)[0])
                 if kind.KIND in get_args(m.model_fields["kind"].annotation))
    assert issubclass(model, LogEntry)
    assert [n for n in model.model_fields if n not in HEADER] == [f.name for f in dataclasses.fields(kind)]


def test_an_entry_is_the_json_the_docs_show_and_reads_back() -> None:
    entry = logged.Entry(7, 5123.407, "2026-11-29T10:45:43.113280+00:00", ActionSource.STREAM,
                         logged.MouseDown(None, None, MouseButton.LEFT))
    assert ActionLogResponse(entries=[entry.to_wire()]).to_json() == (
        b'{"entries":[{"seq":7,"t":5123.407,"at":"2026-11-29T10:45:43.113280+00:00","source":"stream",'
        b'"kind":"mouse_down","x":null,"y":null,"button":"left"}]}')
    drop = dataclasses.replace(entry, action=logged.Drop(5, 6, ("/tmp/a",), "8388620"))
    assert drop.to_wire(1043).model_dump(mode="json", by_alias=True) == {
        "seq": 7, "t": 5123.407, "at": "2026-11-29T10:45:43.113280+00:00", "source": "stream", "kind": "drop",
        "x": 5, "y": 6, "paths": ["/tmp/a"], "windowId": "8388620", "videoMs": 1043}
    assert list(drop.to_wire(1043).model_dump(by_alias=True))[-1] == "videoMs"
    for one in (entry, drop):
        assert logged.Entry.from_wire(one.to_wire(3)) == one
