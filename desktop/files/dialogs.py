"""Filling a native file dialog with a path: GTK's file chooser, which Chromium on Linux opens too.

The dialog is found among the desktop's windows: the one named by the caller, else a window whose title
reads like a file chooser's ("Open File", "Save File", "Select a File", ...), else one the accessibility
tree shows with the `file-chooser` role (a dialog with an unusual title). It is focused and filled as a
person would:

- an existing path is dropped on the dialog's file list (XDND, desktop/x11/xdnd.py): GTK opens its folder and
  selects it (a folder is opened, which is what a folder chooser then chooses);
- a new path (a save dialog's) is typed into the location entry (ctrl+L); a Delete drops GTK's inline
  completion, which would otherwise turn `a.txt` into `a.txt.bak`;

then the accept button (GTK puts it at the bottom right) is clicked. Return is not used: Chromium's dialog
closes on it without taking the file. The answer comes once the dialog window is gone; a dialog still open
after the timeout (an error shown, an overwrite to confirm) is `FileDialogNotClosed`. The waits are on the
event loop; the keys and clicks go through the desktop's keyboard and mouse (the action log records them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from desktop.accessibility.query import ElementQuery
from desktop.core.errors import DesktopError, DomainError, field_errors
from desktop.input.keys import parse_chord
from desktop.windows.control import parse_window_id
from desktop.windows.query import WindowInfo
from desktop.x11.xdnd import PathNotFound
from sandbox_desktop_wire.enums import FsEntryType
from sandbox_desktop_wire.problems import ProblemCode

if TYPE_CHECKING:
    from desktop.accessibility.service import Accessibility
    from desktop.clipboard.owner import Clipboard
    from desktop.input.keyboard import Keyboard
    from desktop.input.mouse import Mouse
    from desktop.windows.control import Windows
    from desktop.x11.session import Session


class Desktop(Protocol):
    """What filling a dialog uses of a desktop (desktop/lifecycle/runtime.py's `Desktop` is one)."""

    @property
    def accessibility(self) -> Accessibility: ...

    @property
    def windows(self) -> Windows: ...

    @property
    def clipboard(self) -> Clipboard: ...

    @property
    def keyboard(self) -> Keyboard: ...

    @property
    def mouse(self) -> Mouse: ...

    def session(self) -> Session: ...

logger = logging.getLogger("sandbox_desktop.file_dialogs")

CHOOSER_TITLE = re.compile(
    r"^\s*(open|save|select|choose|upload|import|export|attach|insert)\b[\w\s]{0,30}?"
    r"\b(files?|folders?|director(y|ies)|images?|documents?|pictures?)\b[\w\s]{0,30}(\.\.\.|…)?\s*$"
    r"|^\s*(open|save|save as)\s*(\.\.\.|…)?\s*$",
    re.IGNORECASE)
"""Titles GTK apps give their file choosers (Chromium: "Open File", "Save File"; zenity: "Select a File")."""
POLL_S = 0.05
ENTRY_SETTLE_S = 0.3
"""GTK shows the location entry after ctrl+L asynchronously: keys typed at once lose their first characters."""
COMPLETION_SETTLE_S = 0.5
"""GTK's entry completion reads the folder after each key: confirming before it has settled loses the path."""
SELECT_SETTLE_S = 0.7
"""GTK reads the dropped file's folder before it selects the file."""
ACCEPT_INSET = (25, 24)
"""From the dialog's bottom-right corner to inside its accept button (GTK 3's Adwaita: 7 px margins, 30 px high)."""
CLICK_AGAIN_S = 1.0
"""A dialog still open (and focused) this long after the click is clicked again: the first closed a popup."""
MAX_CLICKS = 3
ACCESSIBILITY_TIMEOUT_S = 3.0
"""How long the accessibility fallback may look for a file chooser whose title says nothing."""


class FileDialogNotFound(DesktopError):
    code = ProblemCode.FILE_DIALOG_NOT_FOUND


class FileDialogNotClosed(DesktopError):
    code = ProblemCode.FILE_DIALOG_NOT_CLOSED


@dataclass(frozen=True)
class FilledDialog:
    window_id: int
    title: str
    app: str


class PathKinds(Protocol):
    """Where the dialog's app finds its files: the desktop's view of them (desktop/files/filesystem.py `Files`)."""

    async def kind(self, path: Path) -> FsEntryType | None: ...


async def check_path(files: PathKinds, path: Path) -> bool:
    """Whether `path` exists; a new file in an existing folder (a save dialog's) is fine; else 422 naming `path`."""
    if await files.kind(path) is not None:
        return True
    if await files.kind(path.parent) is FsEntryType.DIRECTORY:
        return False
    raise PathNotFound("path", f"path {str(path)!r} does not exist and neither does its folder "
                       f"{str(path.parent)!r}: no file dialog can choose it")


async def _accessible_choosers(desktop: Desktop, session: Session) -> set[int]:
    """Windows the accessibility tree shows a file chooser in (empty if the tree cannot tell)."""
    query = ElementQuery(roles=frozenset({"file-chooser"}))
    try:
        found = await asyncio.wait_for(desktop.accessibility.find(session, query), ACCESSIBILITY_TIMEOUT_S)
    except (DomainError, TimeoutError) as exc:
        logger.info("file dialog: the accessibility tree could not be searched: %s", exc)
        return set()
    return {e.window_id for e in found if e.window_id is not None}


async def find_dialog(desktop: Desktop, session: Session, window_id: str | None) -> WindowInfo:
    """The file chooser to fill: `window_id`'s window, else the one open chooser (the focused one first)."""
    windows = await desktop.windows.list(session)
    if window_id is not None:
        wid = parse_window_id(window_id)
        chosen = next((w for w in windows if w.id == wid), None)
        if chosen is None:
            message = f"windowId {window_id} is not an open window"
            raise FileDialogNotFound(message, errors=field_errors("windowId", message))
        return chosen
    candidates = [w for w in windows if w.viewable and CHOOSER_TITLE.search(w.title)]
    if not candidates:
        accessible = await _accessible_choosers(desktop, session)
        candidates = [w for w in windows if w.viewable and w.id in accessible]
    if not candidates:
        titles = ", ".join(repr(w.title) for w in windows) or "none"
        raise FileDialogNotFound(f"no file chooser is open (windows: {titles}); open one first (click the "
                                 "page's file input, the app's Open...), or name it with windowId")
    # The focused chooser, else the newest (the client list is in mapping order).
    return next((w for w in candidates if w.is_active), candidates[-1])


async def _drop_into(desktop: Desktop, session: Session, dialog: WindowInfo, path: Path) -> None:
    """Drop `path` on the dialog's file list: GTK opens its folder and selects it (a folder: opens it)."""
    client = dialog.client
    await desktop.clipboard.drop(session, (path.as_uri(),), client.x + client.width * 3 // 5,
                                 client.y + client.height // 2)
    await asyncio.sleep(SELECT_SETTLE_S)


async def _type_location(desktop: Desktop, session: Session, path: Path) -> None:
    """Type `path` into the location entry (a save dialog's name entry, which takes a whole path too)."""
    keyboard = desktop.keyboard
    await keyboard.press_keysyms(session, parse_chord("ctrl+l"))
    await asyncio.sleep(ENTRY_SETTLE_S)
    await keyboard.press_keysyms(session, parse_chord("ctrl+a"))  # replace a proposed name
    await keyboard.type_text(session, str(path))
    await keyboard.press_keysyms(session, parse_chord("Delete"))
    await asyncio.sleep(COMPLETION_SETTLE_S)


def accept_point(dialog: WindowInfo) -> tuple[int, int]:
    """Inside the accept button (Open, Save, Select, Upload, OK): GTK puts it last, at the bottom right."""
    client = dialog.client
    return client.x + client.width - ACCEPT_INSET[0], client.y + client.height - ACCEPT_INSET[1]


async def fill_file_dialog(desktop: Desktop, files: PathKinds, path: Path, window_id: str | None,
                           timeout: float) -> FilledDialog:
    """Choose `path` (as the desktop's apps see the files) in the open file dialog and wait until it closes."""
    session = desktop.session()
    exists = await check_path(files, path)
    dialog = await find_dialog(desktop, session, window_id)
    app = dialog.wm_class[1] if dialog.wm_class else ""
    await desktop.windows.focus(session, str(dialog.id))
    if exists:
        await _drop_into(desktop, session, dialog, path)
    else:
        await _type_location(desktop, session, path)
    x, y = accept_point(dialog)
    await desktop.mouse.click(session, x, y)
    clicks, last_click = 1, time.monotonic()
    deadline = last_click + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        still = next((w for w in await desktop.windows.list(session) if w.id == dialog.id and w.viewable), None)
        if still is None:
            return FilledDialog(dialog.id, dialog.title, app)
        # Only while the dialog has the focus and has not moved: a click must never land on a window behind it.
        if still.is_active and still.client == dialog.client and clicks < MAX_CLICKS and \
                time.monotonic() - last_click >= CLICK_AGAIN_S:
            await desktop.mouse.click(session, x, y)
            clicks, last_click = clicks + 1, time.monotonic()
    with contextlib.suppress(DomainError):
        still_titles = [w.title for w in await desktop.windows.list(session) if w.id == dialog.id]
        logger.info("file dialog %s still open after the path was entered: %s", dialog.id, still_titles)
    raise FileDialogNotClosed(f"the file dialog {dialog.title!r} (window {dialog.id}) is still open {timeout:g} s "
                              f"after {str(path)!r} was chosen: it may show an error (a path it cannot open, a "
                              "filter that hides it) or ask to confirm an overwrite; look at a screenshot")
