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

from desktop.events import action_log as logged
from recording.action_track import Tracked
from sandbox_desktop_wire.enums import ActionSource

Action = dict[str, Any]

LEADS_ON = (logged.Move, logged.Click, logged.MouseDown, logged.MouseUp, logged.Drag, logged.Scroll)
"""What a pointer move leading only to it is folded into: the next move, or a pointer action at a place."""


@dataclass(frozen=True)
class Step:
    """One step of a trajectory."""

    index: int
    timestamp_ms: int
    """Video time of the action (the recording's `videoMs`)."""
    action: Action
    """The action in the batch format (camelCase keys)."""
    source: ActionSource
    """Who acted: rest, batch, anthropic, openai, stream (a person in the live view)..."""
    at: str
    """Wall time of the action (RFC 3339)."""
    before_ms: int
    """Video time of the screen just before the action."""
    after_ms: int
    """Video time of the screen just before the next step (or the end of the recording)."""


def steps(entries: Iterable[Tracked], duration_ms: int, *, keep_moves: bool = False) -> list[Step]:
    """The steps of a recording `duration_ms` long whose action track holds `entries` (oldest first)."""
    folded = list(_fold(list(entries), keep_moves))
    result = []
    for index, (tracked, action) in enumerate(folded):
        at_ms = tracked.video_ms
        next_ms = folded[index + 1][0].video_ms if index + 1 < len(folded) else duration_ms
        result.append(Step(
            index=index, timestamp_ms=at_ms, action=action, source=tracked.entry.source, at=tracked.entry.at,
            before_ms=max(0, at_ms - 1), after_ms=max(at_ms, next_ms - 1)))
    return result


def batch_action(action: logged.LoggedAction) -> Action | None:
    """One logged action in the batch format; None for one that is not an action of its own."""
    match action:
        case logged.Move(x=x, y=y):
            return {"type": "move", "x": x, "y": y}
        case logged.Click(x=x, y=y, button=button, count=count):
            return {"type": "click", "x": x, "y": y, "button": button.value} | ({"count": count} if count != 1 else {})
        case logged.MouseDown(x=x, y=y, button=button):
            return {"type": "down", "x": x, "y": y, "button": button.value}
        case logged.MouseUp(x=x, y=y, button=button):
            return {"type": "up", "x": x, "y": y, "button": button.value}
        case logged.Drag(x=x, y=y, end_x=end_x, end_y=end_y, button=button):
            return {"type": "drag", "path": [{"x": x, "y": y}, {"x": end_x, "y": end_y}], "button": button.value}
        case logged.Scroll(x=x, y=y, delta_x=delta_x, delta_y=delta_y):
            return {"type": "scroll", "x": x, "y": y, "deltaX": delta_x, "deltaY": delta_y}
        case logged.Type(length=length, text=text):
            # The log keeps the first characters of a long text: say how long the real one was.
            return {"type": "type", "text": text} | ({"length": length} if length > len(text) else {})
        case logged.Press(keys=keys):
            return {"type": "key", "keys": keys}
        case logged.KeyDown(keys=keys):
            return {"type": "key_down", "keys": keys}
        case logged.KeyUp(keys=keys):
            return {"type": "key_up", "keys": keys}
        case _:
            return None


def _fold(entries: list[Tracked], keep_moves: bool) -> Iterator[tuple[Tracked, Action]]:
    """(the entry that starts the step, its action) for each step."""
    index = 0
    while index < len(entries):
        tracked = entries[index]
        following = entries[index + 1] if index + 1 < len(entries) else None
        action = batch_action(tracked.entry.action)
        if action is None:
            index += 1
            continue
        if (isinstance(tracked.entry.action, logged.Move) and not keep_moves and following is not None
                and isinstance(following.entry.action, LEADS_ON)):
            index += 1  # the next pointer action carries the position
            continue
        if following is not None and _pair(tracked.entry.action, following.entry.action):
            index += 2
            yield tracked, _paired(tracked, following)
            continue
        index += 1
        yield tracked, action


def _pair(first: logged.LoggedAction, second: logged.LoggedAction) -> bool:
    """A press and its release with nothing in between: one action."""
    match first, second:
        case logged.KeyDown(keys=down), logged.KeyUp(keys=up):
            return down == up
        case logged.MouseDown(x=x, y=y, button=button), logged.MouseUp() as up:
            return (x, y, button) == (up.x, up.y, up.button)
        case _:
            return False


def _paired(down: Tracked, up: Tracked) -> Action:
    held_ms = max(0, round((up.entry.t - down.entry.t) * 1000))
    match down.entry.action:
        case logged.MouseDown(x=x, y=y, button=button):
            return {"type": "click", "x": x, "y": y, "button": button.value}
        # A key released within a tap's time is a press; longer, it was held (auto-repeat, a game, a drag).
        case logged.KeyDown(keys=keys) if held_ms < HOLD_MS:
            return {"type": "key", "keys": keys}
        case logged.KeyDown(keys=keys):
            return {"type": "hold_key", "keys": keys, "durationMs": held_ms}
    raise AssertionError(f"not a press: {down.entry.action!r}")


HOLD_MS = 500
"""A key down longer than this before its release was held, not tapped."""
