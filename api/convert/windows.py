"""Windows between the wire and the domain: the window model, and the list filter of a query."""

from __future__ import annotations

import re

from desktop.core.errors import invalid_action
from desktop.windows.control import WindowFilter
from desktop.windows.query import WindowInfo
from sandbox_desktop_wire.windows import (
    DesktopRect,
    DesktopWindowInfo,
    WindowListQuery,
)


def window_model(w: WindowInfo) -> DesktopWindowInfo:
    return DesktopWindowInfo(
        id=str(w.id), title=w.title, x=w.client.x, y=w.client.y, width=w.client.width,
        height=w.client.height, is_active=w.is_active, pid=w.pid,
        frame=DesktopRect(x=w.frame.x, y=w.frame.y, width=w.frame.width, height=w.frame.height),
        minimized=w.minimized, maximized=w.maximized, always_on_top=w.above,
        instance_name=w.wm_class[0] if w.wm_class else None, class_name=w.wm_class[1] if w.wm_class else None,
    )


def window_filter(query: WindowListQuery) -> WindowFilter | None:
    """The listing's filter, or None when the query asks for none (the plain, cheaper listing)."""
    if query.pid is None and query.class_ is None and query.title_regex is None and not query.minimized:
        return None
    title = None
    if query.title_regex is not None:
        try:
            title = re.compile(query.title_regex)
        except re.error as exc:
            raise invalid_action(f"titleRegex is not a valid regular expression: {exc}", "titleRegex",
                                 "query") from None
    return WindowFilter(pid=query.pid, wm_class=query.class_, title=title, minimized=query.minimized)
