"""What an action needs to know about the running desktop."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.x11.thread import XThread


@dataclass(frozen=True)
class Session:
    """The running desktop as actions see it; obtained from `Desktop.session()`."""

    display: str
    """The X display name, e.g. `":99"`."""
    width: int
    height: int
    x: XThread
    """The X thread: mouse, keyboard, window actions and status run here as short jobs; input actions
    also hold `x.input`, the desktop's input lock, which keeps them in arrival order (desktop/x11/thread.py)."""
    env: dict[str, str]
    """The environment of desktop processes (DISPLAY, HOME, session bus...); shared by every action of the
    same session (`Desktop.session()` keeps one): read it, copy it before changing anything."""
    home: str
    """The desktop HOME directory."""
