"""The desktop's events, one typed class per type of docs/events.md: what producers publish on the bus
(desktop/events/bus.py) and what waits (desktop/actions/waits.py) read.

Each is a frozen dataclass naming its `TYPE`, with the domain's values (X window ids as ints, enums);
`wire_fields` is the one place one becomes the type's fields on the wire (camelCase, ids as strings), to
which the bus's `Event.to_wire` adds `seq`, `type`, `t` and `at`. Nothing is converted when an event is
published (on every X event): only when a subscriber renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sandbox_desktop_wire.approvals import Approval, ApprovalStatus
from sandbox_desktop_wire.enums import ClipboardSelection, DesktopRuntimeState
from sandbox_desktop_wire.events import EventType


@dataclass(frozen=True, slots=True)
class WindowState:
    """A managed window as the events describe it; `x`..`height` is the client area in screen pixels."""

    id: int
    title: str
    instance: str
    class_: str
    pid: int | None
    x: int
    y: int
    width: int
    height: int

    def to_wire(self) -> dict[str, Any]:
        """As `window.created` and `GET /v1/desktop/windows` name the fields (a wait's answer too)."""
        return {"windowId": str(self.id), "title": self.title, "class": self.class_, "instance": self.instance,
                "pid": self.pid, "x": self.x, "y": self.y, "width": self.width, "height": self.height}


# -- windows ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class WindowCreated:
    """A window is managed and viewable: from now on `GET /v1/desktop/windows` lists it."""

    TYPE: ClassVar[EventType] = EventType.WINDOW_CREATED
    window: WindowState


@dataclass(frozen=True, slots=True)
class WindowClosed:
    """Destroyed, unmapped (minimised) or no longer managed."""

    TYPE: ClassVar[EventType] = EventType.WINDOW_CLOSED
    window_id: int
    title: str
    """Its last title."""


@dataclass(frozen=True, slots=True)
class WindowFocused:
    """`_NET_ACTIVE_WINDOW` changed."""

    TYPE: ClassVar[EventType] = EventType.WINDOW_FOCUSED
    window_id: int | None
    """None: nothing has the focus."""
    title: str | None
    previous_window_id: int | None


@dataclass(frozen=True, slots=True)
class WindowTitleChanged:
    """`WM_NAME`/`_NET_WM_NAME` changed (or the window's class or pid)."""

    TYPE: ClassVar[EventType] = EventType.WINDOW_TITLE_CHANGED
    window: WindowState
    previous_title: str


@dataclass(frozen=True, slots=True)
class WindowMoved:
    """Moved or resized: `window` has the new client area."""

    TYPE: ClassVar[EventType] = EventType.WINDOW_MOVED
    window: WindowState


# -- screen, clipboard, accessibility ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Area:
    """A rectangle of the screen, in pixels."""

    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class ScreenChanged(_Area):
    """Something was drawn in the area: the union of what was drawn since the last one."""

    TYPE: ClassVar[EventType] = EventType.SCREEN_CHANGED


@dataclass(frozen=True, slots=True)
class ScreenSettled(_Area):
    """Nothing was drawn for `quiet_ms` after changes: the area is the bounding box of the burst, which
    lasted `duration_ms`."""

    TYPE: ClassVar[EventType] = EventType.SCREEN_SETTLED
    quiet_ms: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class ClipboardChanged:
    """Another owner took the selection."""

    TYPE: ClassVar[EventType] = EventType.CLIPBOARD_CHANGED
    selection: ClipboardSelection
    owner: int | None
    """The new owner's window; None when the owner went away."""


@dataclass(frozen=True, slots=True)
class AccessibilityFocusChanged:
    """An element got the keyboard focus (desktop/accessibility/signals.py)."""

    TYPE: ClassVar[EventType] = EventType.ACCESSIBILITY_FOCUS_CHANGED
    element: str
    """Its id."""
    role: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class AccessibilityChanged:
    """The tree changed; published only while an element wait is pending."""

    TYPE: ClassVar[EventType] = EventType.ACCESSIBILITY_CHANGED
    element: str
    change: str
    """AT-SPI's name of the change: `object:children-changed:add`, `object:state-changed:checked`..."""
    child: str | None = None
    """For `children-changed:add`: the id of the child added."""


# -- the desktop, its apps and the people in the loop ------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProcessExited:
    """An app the desktop launched (`/launch`, `/open`) exited."""

    TYPE: ClassVar[EventType] = EventType.PROCESS_EXITED
    process_id: str
    pid: int
    command: str
    args: tuple[str, ...]
    exit_code: int | None
    exit_signal: int | None


@dataclass(frozen=True, slots=True)
class DesktopStateChanged:
    TYPE: ClassVar[EventType] = EventType.DESKTOP_STATE_CHANGED
    previous: DesktopRuntimeState
    state: DesktopRuntimeState


@dataclass(frozen=True, slots=True)
class DisplayChanged:
    """The screen size changed at runtime (docs/display.md)."""

    TYPE: ClassVar[EventType] = EventType.DISPLAY_CHANGED
    width: int
    height: int
    dpi: int


@dataclass(frozen=True, slots=True)
class ControlChanged:
    """Who holds control in the live view changed (docs/control.md)."""

    TYPE: ClassVar[EventType] = EventType.CONTROL_CHANGED
    controller: str | None
    """The viewer holding control; None: nobody."""
    previous: str | None
    takeover: bool
    """Whether they hold the desktop against agent input."""
    by: str
    """The viewer whose action caused it."""
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """An agent action waits for a person's decision (docs/approvals.md)."""

    TYPE: ClassVar[EventType] = EventType.APPROVAL_REQUESTED
    approval: Approval


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """A pending approval was approved, denied or expired, as the waiting call gets it."""

    TYPE: ClassVar[EventType] = EventType.APPROVAL_DECIDED
    id: str
    status: ApprovalStatus
    message: str | None
    decided_by: str | None
    decided_at: str
    desktop_id: str


EventData = (WindowCreated | WindowClosed | WindowFocused | WindowTitleChanged | WindowMoved | ScreenChanged
             | ScreenSettled | ClipboardChanged | AccessibilityFocusChanged | AccessibilityChanged | ProcessExited
             | DesktopStateChanged | DisplayChanged | ControlChanged | ApprovalRequested | ApprovalDecided)


def _id(value: int | None) -> str | None:
    return str(value) if value else None


def wire_fields(data: EventData) -> dict[str, Any]:
    """The type's own fields of an event, as the wire has them (docs/events.md)."""
    match data:
        case WindowCreated(window=window) | WindowMoved(window=window):
            return window.to_wire()
        case WindowTitleChanged(window=window, previous_title=previous):
            return {**window.to_wire(), "previousTitle": previous}
        case WindowClosed(window_id=window_id, title=title):
            return {"windowId": str(window_id), "title": title}
        case WindowFocused(window_id=window_id, title=title, previous_window_id=previous):
            return {"windowId": _id(window_id), "title": title, "previousWindowId": _id(previous)}
        case ScreenChanged(x=x, y=y, width=width, height=height):
            return {"x": x, "y": y, "width": width, "height": height}
        case ScreenSettled(x=x, y=y, width=width, height=height):
            return {"x": x, "y": y, "width": width, "height": height, "quietMs": data.quiet_ms,
                    "durationMs": data.duration_ms}
        case ClipboardChanged(selection=selection, owner=owner):
            return {"selection": selection.value, "owner": _id(owner)}
        case AccessibilityFocusChanged(element=element, role=role, name=name):
            return {"element": element, "role": role, "name": name}
        case AccessibilityChanged(element=element, change=change, child=child):
            return {"element": element, "change": change, **({"child": child} if child is not None else {})}
        case ProcessExited():
            return {"processId": data.process_id, "pid": data.pid, "command": data.command, "args": list(data.args),
                    "exitCode": data.exit_code, "exitSignal": data.exit_signal}
        case DesktopStateChanged(previous=previous, state=state):
            return {"previous": str(previous), "state": str(state)}
        case DisplayChanged(width=width, height=height, dpi=dpi):
            return {"width": width, "height": height, "dpi": dpi}
        case ControlChanged():
            return {"controller": data.controller, "previous": data.previous, "takeover": data.takeover,
                    "by": data.by, "reason": data.reason}
        case ApprovalRequested(approval=approval):
            fields: dict[str, Any] = approval.model_dump(mode="json", by_alias=True, exclude_none=True)
            return fields
        case ApprovalDecided():
            return {"id": data.id, "status": data.status.value, "message": data.message,
                    "decidedBy": data.decided_by, "decidedAt": data.decided_at, "desktopId": data.desktop_id}
    raise AssertionError(f"unhandled event {data!r}")
