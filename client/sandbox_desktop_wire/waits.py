"""Wire models of `POST /v1/desktop/wait` and of a batch's `wait` action (docs/events.md): one condition,
answered as soon as it holds (or `matched: false` with the last observed state at the timeout)."""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.elements import ElementCondition
from sandbox_desktop_wire.limits import (
    DEFAULT_WAIT_MS,
    MAX_PATTERN_LENGTH,
    MAX_QUIET_MS,
    MAX_WAIT_MS,
    MIN_QUIET_MS,
)

Pattern = Annotated[str, Field(max_length=MAX_PATTERN_LENGTH)]


class WindowUntil(enum.StrEnum):
    PRESENT = "present"
    GONE = "gone"
    FOCUSED = "focused"


class ScreenUntil(enum.StrEnum):
    CHANGED = "changed"
    SETTLED = "settled"


class ClipboardUntil(enum.StrEnum):
    CHANGED = "changed"


class WindowCondition(WireModel):
    """Windows matching every given selector (none: any window)."""

    title: Pattern | None = Field(default=None, description="The exact title")
    title_regex: Pattern | None = Field(default=None, description="A Python regular expression searched in the title")
    class_: Pattern | None = Field(default=None, alias="class", description="WM_CLASS: its instance or class name")
    pid: int | None = Field(default=None, ge=1, description="_NET_WM_PID of the window")
    until: WindowUntil = WindowUntil.PRESENT


class Region(WireModel):
    x: int = Field(ge=0)
    y: int = Field(ge=0)
    width: int = Field(ge=1)
    height: int = Field(ge=1)


class ScreenCondition(WireModel):
    until: ScreenUntil = ScreenUntil.SETTLED
    quiet_ms: int = Field(default=300, ge=MIN_QUIET_MS, le=MAX_QUIET_MS,
                          description="settled: how long nothing may be drawn (in `region`)")
    region: Region | None = Field(default=None,
                                  description="Only drawing that touches this rectangle (screen pixels) counts")


class ClipboardCondition(WireModel):
    until: ClipboardUntil = ClipboardUntil.CHANGED


class Conditions(WireModel):
    """Exactly one of the conditions (the server names the fields otherwise)."""

    window: WindowCondition | None = None
    screen: ScreenCondition | None = None
    clipboard: ClipboardCondition | None = None
    element: ElementCondition | None = None


class WaitRequest(Conditions):
    timeout_ms: int = Field(ge=0, le=MAX_WAIT_MS, description="How long to wait at most (the Python client's "
                            f"default: {DEFAULT_WAIT_MS})")


class WaitResponse(WireModel):
    matched: bool
    condition: str
    """`window`, `screen`, `clipboard` or `element`: which condition was waited for."""
    match: dict[str, Any] | None = None
    """What matched (a window, the changed region, the clipboard's new owner), when `matched`."""
    last_state: dict[str, Any] | None = None
    """What was last observed, when the timeout came first."""
    elapsed_ms: int
