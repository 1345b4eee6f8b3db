"""Wait conditions from the wire (`POST /v1/desktop/wait`, a batch's `wait` step) and their results."""

from __future__ import annotations

import re
from typing import Any

from api.convert.elements import element_query, element_until
from desktop.accessibility.service import Accessibility
from desktop.actions import waits
from desktop.core.errors import FieldError, invalid_action
from desktop.x11.session import Session
from sandbox_desktop_wire.problems import ProblemCode
from sandbox_desktop_wire.waits import Conditions

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
CONDITIONS = ("window", "screen", "clipboard", "element")


def condition_of(body: Conditions, session: Session, accessibility: Accessibility, prefix: str = ""
                 ) -> waits.Condition:
    """The one condition of `body`; a 4xx naming the fields otherwise (`prefix`: `actions[3].` in a batch)."""
    given = [name for name in CONDITIONS if getattr(body, name) is not None]
    if len(given) != 1:
        names = given or list(CONDITIONS)
        message = (f"give exactly one condition ({', '.join(CONDITIONS)}), not {' and '.join(given)}" if given
                   else f"give one condition: {', '.join(CONDITIONS)}")
        errors = [{"location": "body", "field": prefix + name, "message": message,
                   "type": "value_error" if given else "missing"} for name in names]
        raise FieldError(errors, wrong_shape=True) if not given else FieldError(errors, code=INVALID)
    if body.window is not None:
        w = body.window
        try:
            pattern = re.compile(w.title_regex) if w.title_regex is not None else None
        except re.error as exc:
            raise invalid_action(f"titleRegex is not a regular expression: {exc}",
                                 prefix + "window.titleRegex") from None
        return waits.WindowCondition(w.title, pattern, w.class_, w.pid, w.until)
    if body.screen is not None:
        s, box = body.screen, None
        if s.region is not None:
            r = s.region
            if r.x + r.width > session.width or r.y + r.height > session.height:
                raise invalid_action(f"the region must lie on the {session.width}x{session.height} screen",
                                     prefix + "screen.region")
            box = (r.x, r.y, r.width, r.height)
        return waits.ScreenCondition(s.until, s.quiet_ms, box)
    if body.element is not None:
        query = element_query(body.element, prefix=f"{prefix}element.")
        until = element_until(body.element.until, f"{prefix}element.until")
        return waits.element_condition(accessibility, session, query, until)
    assert body.clipboard is not None
    return waits.ClipboardCondition(body.clipboard.until)


def result_fields(result: waits.WaitResult) -> dict[str, Any]:
    """The fields a wait's answer (and a batch's wait step) carry."""
    return {"matched": result.matched, "match": result.matched_what, "last_state": result.last_state}
