"""Helpers both vendor translations share: the model's display space and strict value checks."""

from __future__ import annotations

from typing import Any

from desktop.actions.batch import ElementAt, Hover, Move, Step, Where
from desktop.core.errors import invalid_action
from desktop.input.coordinates import CoordinateSpace, ImageFit, fit_image

Point = tuple[int, int]


def display_fit(screen_width: int, screen_height: int, width: int, height: int, field: str) -> ImageFit:
    """The screenshot scale that gives exactly `width`x`height`; a 400 naming `field` when none does.

    One scale serves both axes, so the display must have the screen's aspect ratio (to a pixel).
    """
    if width > screen_width or height > screen_height:
        raise invalid_action(f"the display {width}x{height} is larger than the screen {screen_width}x"
                             f"{screen_height}; use the screen size or a smaller one of the same aspect ratio",
                             field)
    for scale in (width / screen_width, height / screen_height):
        fit = fit_image(screen_width, screen_height, scale=scale)
        if (fit.width, fit.height) == (width, height):
            return fit
    suggested = fit_image(screen_width, screen_height, target_width=width, target_height=height)
    raise invalid_action(f"the display {width}x{height} does not have the screen's aspect ratio "
                         f"({screen_width}x{screen_height}); use e.g. {suggested.width}x{suggested.height}", field)


def display_space(screen_width: int, screen_height: int, width: int | None, height: int | None,
                  field: str) -> tuple[CoordinateSpace, ImageFit]:
    """The model's coordinate space and the screenshot size; the screen itself without a display size."""
    if width is None or height is None:
        return CoordinateSpace.screen(screen_width, screen_height), ImageFit(1.0, screen_width, screen_height)
    fit = display_fit(screen_width, screen_height, width, height, field)
    return CoordinateSpace.image(screen_width, screen_height, width, height), fit


def integer(value: Any, field: str, low: int, high: int) -> int:
    """`value` as an int in [low, high] (bools refused), or a 400 naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_action(f"{field} must be an integer", field)
    if not low <= value <= high:
        raise invalid_action(f"{field}={value} is out of range ({low} <= {field} <= {high})", field)
    return value


def point(space: CoordinateSpace, x: Any, y: Any, field_x: str, field_y: str) -> Point:
    """A point of the model's space as a screen pixel; a 400 naming the axis outside the space."""
    return space.to_screen(integer(x, field_x, 0, space.max_x), integer(y, field_y, 0, space.max_y))


def element_at(value: Any, field: str) -> ElementAt | None:
    """Our extension of the vendors' actions: `element`, a set-of-marks number (or an element id), instead of
    coordinates (docs/vendors.md); None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise invalid_action(f"{field} must be a set-of-marks number or an element id, got {value!r}", field)
    return ElementAt(value)


def move_to(at: Where) -> Step:
    """A pointer move to a point or onto an element."""
    return Hover(at) if isinstance(at, ElementAt) else Move(*at)


def text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid_action(f"{field} must be a non-empty string", field)
    return value
