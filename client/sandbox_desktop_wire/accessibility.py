"""Wire models of the accessibility endpoints: the element tree, find, act (docs/accessibility.md)."""

from __future__ import annotations

import enum

from pydantic import Field

from sandbox_desktop_wire.actions import CoordinateOptions
from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.effects import Effect, ReportEffect
from sandbox_desktop_wire.elements import ElementQuery, ElementTarget
from sandbox_desktop_wire.enums import CoordinateSpaceKind
from sandbox_desktop_wire.limits import MAX_ELEMENTS, MAX_IMAGE_SIZE, MAX_TREE_DEPTH


class ElementAction(enum.StrEnum):
    """What `act` does with an element."""

    CLICK = "click"
    """A real pointer click at the centre of its visible part, through the input path and the action log."""
    FOCUS = "focus"
    INVOKE = "invoke"
    """Its default AT-SPI action (a button's press, a link's jump, a check box's toggle)."""
    SET_VALUE = "setValue"
    SELECT = "select"


class ActedThrough(enum.StrEnum):
    """How an action reached the application."""

    POINTER = "pointer"
    KEYBOARD = "keyboard"
    ACCESSIBILITY = "accessibility"


class ElementBounds(WireModel):
    x: int
    y: int
    width: int
    height: int


class AccessibleNode(WireModel):
    """One element. `bounds` are screen pixels unless the request gave a coordinate space; absent when the
    element is not showing. `children` only in a tree."""

    id: str = Field(description="Stable while the element exists: `<application bus>:<object>`")
    role: str = Field(description="AT-SPI role name, e.g. `push-button`, `entry`, `check-box`, `link`")
    name: str
    description: str | None = None
    value: str | None = Field(default=None, description="The text of an editable field, a range's current value")
    states: list[str]
    bounds: ElementBounds | None = None
    actions: list[str] = Field(description="What `act` can do with it: click, focus, invoke, setValue, select")
    pid: int | None = None
    window_id: str | None = Field(default=None, description="Decimal X window id of its top-level window")
    app: str = Field(description="The application's accessible name")
    children: list[AccessibleNode] | None = None


class TreeQuery(QueryModel):
    window: str = Field(default="all", description="`all`, `focused`, or a decimal window id")
    depth: int | None = Field(default=None, ge=0, le=MAX_TREE_DEPTH,
                              description="Levels below the windows (default: all)")
    interactive: bool = Field(default=False, description="Keep only elements that can be acted on, as a flat list per "
                              "window")
    include_hidden: bool = Field(default=False, description="Also elements not showing (hidden, scrolled out of view)")
    space: CoordinateSpaceKind = Field(default=CoordinateSpaceKind.SCREEN, description="The frame of `bounds`")
    width: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE, description="image space: the image's width")
    height: int | None = Field(default=None, ge=1, le=MAX_IMAGE_SIZE, description="image space: the image's height")


class TreeResponse(WireModel):
    windows: list[AccessibleNode] = Field(description="The top-level element of each window in scope")
    count: int = Field(description="Elements in the answer")




class FindRequest(ElementQuery):
    limit: int = Field(default=20, ge=1, le=MAX_ELEMENTS)
    coordinates: CoordinateOptions | None = None


class FindResponse(WireModel):
    elements: list[AccessibleNode]


class ActRequest(ReportEffect):
    element: ElementTarget = Field(description="An element id, a set-of-marks number, or a query matching "
                                   "exactly one element")
    action: ElementAction
    value: str | None = Field(default=None, max_length=100_000, description="setValue: the text (or number) to set")
    scroll_into_view: bool = Field(default=True, description="click, and setValue into a page's field: first scroll an "
                                   "element that is out of view into it (false: refuse with 409 saying where it is)")
    coordinates: CoordinateOptions | None = None


class ActResponse(WireModel):
    action: ElementAction
    through: ActedThrough
    element: AccessibleNode
    x: int | None = Field(default=None, description="click: where it landed, in the request's space")
    y: int | None = None
    effect: Effect | None = Field(default=None, description="What the action changed (the element's states and "
                                  "value among it), with `reportEffect`")


class Mark(WireModel):
    mark: int = Field(description="The number drawn on the screenshot")
    id: str
    role: str
    name: str
    bounds: ElementBounds


class MarksResponse(WireModel):
    """The table of the last set-of-marks screenshot (`som=true`)."""

    marks: list[Mark]
