"""Element queries and targets from the wire, each wrong value a 400 naming its field: for the
accessibility routes, the waits and the batch steps alike (docs/accessibility.md)."""

from __future__ import annotations

import re

from desktop.accessibility.query import STATE_NAMES, ElementQuery, Target, WindowScope, canonical_name, roles_named
from desktop.core.errors import FieldError
from desktop.core.parsing import ascii_int
from sandbox_desktop_wire.elements import ElementQuery as WireQuery
from sandbox_desktop_wire.elements import ElementTarget
from sandbox_desktop_wire.limits import MAX_ELEMENTS

UNTIL_PRESENCE = ("present", "gone")


def bad_field(field: str, message: str) -> FieldError:
    return FieldError([{"field": field, "message": message}])


def window_scope(text: str, field: str = "window") -> WindowScope | int:
    """`all`, `focused` or a decimal window id, else a 400 naming the field."""
    if text in (WindowScope.ALL, WindowScope.FOCUSED):
        return WindowScope(text)
    number = ascii_int(text) if len(text) <= 10 else None
    if number is not None:
        return number
    raise bad_field(field, f"{text!r} is not `all`, `focused` or a decimal window id")


def element_query(model: WireQuery, limit: int = MAX_ELEMENTS, prefix: str = "") -> ElementQuery:
    """The domain query of a wire query, each wrong value a 400 naming its field (with `prefix`)."""
    roles = None
    if model.role is not None:
        try:
            roles = roles_named(model.role)
        except ValueError:
            raise bad_field(f"{prefix}role", f"unknown role {model.role!r}; roles are AT-SPI's names (push-button, "
                            "entry, check-box...) or button, textbox, checkbox, radio, link, tab...") from None
    pattern = None
    if model.name_regex is not None:
        try:
            pattern = re.compile(model.name_regex)
        except re.error as exc:
            raise bad_field(f"{prefix}nameRegex", f"not a regular expression: {exc}") from None
    states = frozenset(canonical_name(s) for s in model.states)
    unknown = sorted(states - STATE_NAMES)
    if unknown:
        raise bad_field(f"{prefix}states", f"unknown states {unknown}; states are {', '.join(sorted(STATE_NAMES))}")
    return ElementQuery(roles=roles, name=model.name, name_contains=model.name_contains, name_regex=pattern,
                        states=states, window=window_scope(model.window, f"{prefix}window"),
                        include_hidden=model.include_hidden, limit=limit)


def target_of(target: ElementTarget, prefix: str = "element") -> Target:
    """An id or a set-of-marks number as given; a query checked (fields named under `prefix`)."""
    return target if isinstance(target, str | int) else element_query(target, prefix=f"{prefix}.")


def element_until(until: str, field: str) -> str:
    """An element condition's `until`: present, gone, or a state name."""
    name = canonical_name(until)
    if name in UNTIL_PRESENCE or name in STATE_NAMES:
        return name
    raise bad_field(field, f"until must be present, gone or a state ({', '.join(sorted(STATE_NAMES))})")
