"""Wire models of `GET /v1/desktop/events` (docs/events.md): what happens on a desktop, as it happens.

Event types are `<subject>.<what_happened>`: a lowercase subject, a dot, then snake_case, like every other
closed set of names on the wire (enums.py). A subscriber filters on whole types (`?types=window.created,
window.closed`) or on a subject with its dot (`?types=window.`).
"""

from __future__ import annotations

import enum

from pydantic import ConfigDict, Field

from sandbox_desktop_wire.base import QueryModel, WireModel


class EventType(enum.StrEnum):
    """`type` of an event; each one's fields are listed in docs/events.md."""

    WINDOW_CREATED = "window.created"
    WINDOW_CLOSED = "window.closed"
    WINDOW_FOCUSED = "window.focused"
    WINDOW_TITLE_CHANGED = "window.title_changed"
    WINDOW_MOVED = "window.moved"
    """Moved or resized: the new client-area geometry."""
    SCREEN_CHANGED = "screen.changed"
    """Something was drawn (at most one per 50 ms, with the union of what was drawn since the last one)."""
    SCREEN_SETTLED = "screen.settled"
    """Nothing was drawn for the quiet period after changes: the changed region's bounding box."""
    CLIPBOARD_CHANGED = "clipboard.changed"
    ACCESSIBILITY_FOCUS_CHANGED = "accessibility.focus_changed"
    """An element got the keyboard focus: its `element` id, `role` and `name`."""
    ACCESSIBILITY_CHANGED = "accessibility.changed"
    """An element's children, a state or its name changed, or an app's window came or went (`element`,
    `change` as AT-SPI names it: `object:state-changed:checked`...); sent only while an element wait is
    pending (docs/accessibility.md "Events")."""
    PROCESS_EXITED = "process.exited"
    DESKTOP_STATE_CHANGED = "desktop.state_changed"
    DISPLAY_CHANGED = "display.changed"
    """The screen size changed at runtime (`POST /v1/desktop/display`): `width`, `height`, `dpi`."""
    CONTROL_CHANGED = "control.changed"
    """Who holds control in the live view changed: `controller` (a viewer's name, or null), `previous`."""
    APPROVAL_REQUESTED = "approval.requested"
    """An agent action waits for a person's decision: the approval (`id`, `action`, `source`...)."""
    APPROVAL_DECIDED = "approval.decided"
    """A pending approval was approved, denied or expired: `id`, `status`, `message`."""
    EVENTS_MISSED = "events.missed"
    """Not a desktop event: this subscriber fell behind (or asked to replay more than is held) and lost
    `count` events."""


class DesktopEvent(WireModel):
    """One event: `seq` (per desktop, increasing by one), `type`, `t` (`time.monotonic()` seconds, the action
    log's clock), `at` (RFC 3339 wall time), then the type's own fields (camelCase, kept as extra fields)."""

    model_config = ConfigDict(extra="allow")

    seq: int
    type: str
    t: float
    at: str


class EventsQuery(QueryModel):
    types: str | None = Field(default=None, description="Comma-separated event types (or subjects ending in `.`, like "
                              "`window.`); all types when absent")
    since: int | None = Field(default=None, ge=0, description="Replay the held events after this `seq` first (as the "
                              "`Last-Event-ID` header does)")
    follow: bool = Field(default=True, description="false: send the held events (after `since`, default all) and end, "
                         "instead of streaming what happens next")
