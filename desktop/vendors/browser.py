"""The desktop's browser for Gemini's browser functions: found (or launched) and focused, and its page's URL read
back through accessibility (docs/vendors.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re

from desktop.accessibility.atspi import AtspiError
from desktop.accessibility.query import ElementQuery, WindowScope
from desktop.accessibility.service import Accessibility
from desktop.actions import batch
from desktop.actions.waits import element_condition
from desktop.apps.launch import Apps
from desktop.core.errors import DomainError
from desktop.vendors.gemini import Browser, browser_keys
from desktop.windows.control import Windows
from desktop.windows.query import WindowInfo
from desktop.x11.session import Session

BROWSER_CLASSES = frozenset({"chromium", "chromium-browser", "google-chrome"})
"""WM_CLASS class names of Chromium-family windows (Debian's chromium, Ubuntu's, Google Chrome)."""
LAUNCH_WAIT_MS = 30_000
DOCUMENT = "org.a11y.atspi.Document"
URL_ATTRIBUTES = ("URI", "DocURL")
"""The page's document attribute holding its URL: Chromium's name, then Firefox's (the omnibox's text would lack
the scheme)."""
ADDRESS_BAR = ElementQuery(roles=frozenset({"entry"}), name_regex=re.compile(r"^Address and search bar$"),
                           states=frozenset({"focused"}), window=WindowScope.FOCUSED)
"""Chromium's omnibox once it has the keyboard focus (its name in an English UI)."""
ADDRESS_BAR_WAIT_MS = 2000
"""How long a navigation waits for the address bar to take the focus after Ctrl+L before it types anyway: keys
typed before Chromium's UI thread has handled Ctrl+L go to the page and are lost (an UI in another language, whose
bar has another name, waits this long and types as before)."""
URL_READ_S = 3.0
"""Reading the URL is a courtesy: an answer without one beats a slow one."""


def is_browser(window: WindowInfo) -> bool:
    return window.viewable and window.wm_class is not None and window.wm_class[1].lower() in BROWSER_CLASSES


def launch_args(url: str) -> list[str]:
    # A desktop's fresh profile would otherwise open a first-run page over the URL; Chromium refuses to start as
    # root without --no-sandbox.
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
    return ["--no-first-run", "--no-default-browser-check", *sandbox, url]


async def focus_browser(windows: Windows, apps: Apps, session: Session, url: str) -> bool:
    """Focus the desktop's browser window (the focused one, else the topmost); launch Chromium at `url` when there
    is none. True when it was launched (it is then at `url` already)."""
    found = [w for w in await windows.list(session) if is_browser(w)]
    if found:
        window = next((w for w in found if w.is_active), found[-1])
        if not window.is_active:
            await windows.focus(session, str(window.id))
        return False
    launched = await apps.launch(session, "chromium", launch_args(url), wait=True, wait_ms=LAUNCH_WAIT_MS)
    if launched.window_id:
        with contextlib.suppress(DomainError):
            await windows.focus(session, str(launched.window_id))
    return True


def address_bar_focused(accessibility: Accessibility, session: Session) -> batch.Wait:
    """A batch step that waits (ADDRESS_BAR_WAIT_MS at most) for the focused browser's address bar to take the
    keyboard focus."""
    return batch.Wait(ADDRESS_BAR_WAIT_MS, element_condition(accessibility, session, ADDRESS_BAR, "present"))


async def browser_steps(windows: Windows, apps: Apps, accessibility: Accessibility, session: Session,
                        move: Browser) -> list[batch.Step]:
    """Carry out the first half of a browser move (Gemini's browser functions, Fara's visit_url and history_back):
    focus the browser, or launch it at the URL; then the keys still to type, none for a browser just launched there."""
    launched = await focus_browser(windows, apps, session, move.url or "about:blank")
    return [] if launched else browser_keys(move, address_bar_focused(accessibility, session))


async def focused_url(windows: Windows, accessibility: Accessibility, session: Session) -> str | None:
    """The URL of the page in the focused Chromium window (its document's `URI`), or None (no browser focused, nothing
    readable in time)."""
    try:
        window = await windows.focused(session)
    except DomainError:
        return None
    if not is_browser(window):
        return None
    try:
        async with asyncio.timeout(URL_READ_S):
            # Every object, hidden ones too: a query for the role alone prunes the page's subtree before reaching
            # it, and Chromium's page object is not always `visible`. Only roles are needed, no details.
            everything = ElementQuery(include_hidden=True).prefilter
            scoped = await accessibility.scoped(session, window.id, everything, whole=False)
            pages = [e for e in scoped.elements() if e.role == "document-web"]
            # The shown tab's page before background tabs'; in reading order a page comes before its frames.
            page = next((e for e in pages if "showing" in e.states), pages[0] if pages else None)
            if page is None:
                return None
            bus = await accessibility.bus(session)
            [attributes] = await bus.call(page.bus, page.path, DOCUMENT, "GetAttributes")
    except (DomainError, AtspiError, TimeoutError):
        return None
    value = next((attributes.get(key) for key in URL_ATTRIBUTES if attributes.get(key)), None)
    return value if isinstance(value, str) else None

