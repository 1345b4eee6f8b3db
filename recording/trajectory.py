"""A recording's action track as the steps of a trajectory (docs/trajectories.md).

One step per action an agent or a person took, in the vendor-neutral batch format of
`POST /v1/desktop/actions` (docs/actions.md), so that a step can be replayed as it is written, with the
video times of the screen just before it and just before the next step (what the actor saw when it
chose its next action). Pure functions of the track's entries: no video, no I/O.

Entries are folded into the actions a caller would have written: the pointer moves that only lead to
a click or a scroll are dropped (the click carries the position), a key pressed and released with
nothing in between is one `key`, held keys become `hold_key` with how long they were held, and a
button pressed and released at one place is a `click`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Entry = dict[str, Any]
Action = dict[str, Any]

POINTER_KINDS = frozenset({"click", "mouse_down", "mouse_up", "drag", "scroll"})


@dataclass(frozen=True)
class Step:
    """One step of a trajectory."""

    index: int
    timestamp_ms: int
    """Video time of the action (the recording's `videoMs`)."""
    action: Action
    """The action in the batch format (camelCase keys)."""
    source: str
    """Who acted: rest, batch, anthropic, openai, stream (a person in the live view)..."""
    at: str
    """Wall time of the action (RFC 3339)."""
    before_ms: int
    """Video time of the screen just before the action."""
    after_ms: int
    """Video time of the screen just before the next step (or the end of the recording)."""


def steps(entries: Iterable[Entry], duration_ms: int, *, keep_moves: bool = False) -> list[Step]:
    """The steps of a recording `duration_ms` long whose action track holds `entries` (oldest first)."""
    folded = list(_fold(list(entries), keep_moves))
    result = []
    for index, (entry, action) in enumerate(folded):
        at_ms = int(entry.get("videoMs", 0))
        next_ms = int(folded[index + 1][0].get("videoMs", 0)) if index + 1 < len(folded) else duration_ms
        result.append(Step(
            index=index, timestamp_ms=at_ms, action=action, source=str(entry.get("source", "")),
            at=str(entry.get("at", "")), before_ms=max(0, at_ms - 1),
            after_ms=max(at_ms, next_ms - 1)))
    return result


def batch_action(entry: Entry) -> Action | None:
    """One action-log entry in the batch format; None for an entry that is not an action of its own."""
    match entry.get("kind"):
        case "move":
            return {"type": "move", "x": entry["x"], "y": entry["y"]}
        case "click":
            action = {"type": "click", "x": entry["x"], "y": entry["y"], "button": entry.get("button", "left")}
            return action | ({"count": entry["count"]} if entry.get("count", 1) != 1 else {})
        case "mouse_down" | "mouse_up" as kind:
            return {"type": "down" if kind == "mouse_down" else "up", "x": entry["x"], "y": entry["y"],
                    "button": entry.get("button", "left")}
        case "drag":
            return {"type": "drag", "path": [{"x": entry["x"], "y": entry["y"]},
                                             {"x": entry["endX"], "y": entry["endY"]}],
                    "button": entry.get("button", "left")}
        case "scroll":
            return {"type": "scroll", "x": entry["x"], "y": entry["y"], "deltaX": entry.get("deltaX", 0),
                    "deltaY": entry.get("deltaY", 0)}
        case "type":
            action = {"type": "type", "text": entry.get("text", "")}
            # The log keeps the first characters of a long text: say how long the real one was.
            return action | ({"length": entry["length"]} if entry.get("length", 0) > len(action["text"]) else {})
        case "press":
            return {"type": "key", "keys": entry.get("keys", "")}
        case "key_down" | "key_up" as kind:
            return {"type": kind, "keys": entry.get("keys", "")}
        case _:
            return None


def _fold(entries: list[Entry], keep_moves: bool) -> Iterator[tuple[Entry, Action]]:
    """(the entry that starts the step, its action) for each step."""
    index = 0
    while index < len(entries):
        entry = entries[index]
        following = entries[index + 1] if index + 1 < len(entries) else None
        kind = entry.get("kind")
        action = batch_action(entry)
        if action is None:
            index += 1
            continue
        if kind == "move" and not keep_moves and following is not None and (
                following.get("kind") in POINTER_KINDS or following.get("kind") == "move"):
            index += 1  # the next pointer action carries the position
            continue
        if following is not None and _pair(entry, following):
            index += 2
            yield entry, _paired(entry, following)
            continue
        index += 1
        yield entry, action


def _pair(first: Entry, second: Entry) -> bool:
    """A press and its release with nothing in between: one action."""
    match first.get("kind"), second.get("kind"):
        case "key_down", "key_up":
            return bool(first.get("keys") == second.get("keys"))
        case "mouse_down", "mouse_up":
            return all(first.get(k) == second.get(k) for k in ("x", "y", "button"))
        case _:
            return False


def _paired(down: Entry, up: Entry) -> Action:
    held_ms = max(0, round((float(up.get("t", 0)) - float(down.get("t", 0))) * 1000))
    if down.get("kind") == "mouse_down":
        return {"type": "click", "x": down["x"], "y": down["y"], "button": down.get("button", "left")}
    # A key released within a tap's time is a press; longer, it was held (auto-repeat, a game, a drag).
    if held_ms < HOLD_MS:
        return {"type": "key", "keys": down.get("keys", "")}
    return {"type": "hold_key", "keys": down.get("keys", ""), "durationMs": held_ms}


HOLD_MS = 500
"""A key down longer than this before its release was held, not tapped."""
