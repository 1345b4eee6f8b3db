"""Wire models of files into apps: drops onto windows and native file dialogs (docs/files-into-apps.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel

_PATH = "on the desktop's machine: absolute, `~/...` or relative to the server user's home, as in /v1/fs"


class DropRequest(WireModel):
    paths: list[str] = Field(min_length=1, max_length=1000, description=f"Files or folders to drop, {_PATH}")
    x: int = Field(description="Screen x of the drop point")
    y: int = Field(description="Screen y of the drop point")


class DropResponse(WireModel):
    window_id: str = Field(description="The window that took the drop (the one with `XdndAware` under the point)")
    action: str = Field(description="What it did: `copy` (what is offered), or `move`, `link`, `private`")
    uris: list[str] = Field(description="The `file://` URIs it was given, percent-encoded")
    xdnd_version: int = Field(description="The XDND protocol version spoken (the lower of the target's and 5)")


class FileDialogRequest(WireModel):
    path: str = Field(description=f"The file (or folder, for a folder chooser) to choose, {_PATH}; a save "
                      "dialog takes a path that does not exist yet")
    window_id: str | None = Field(default=None, description="The dialog's window; default: the one open file "
                                  "chooser")
    timeout_ms: int | None = Field(default=None, ge=100, le=60000, description="How long to wait for the "
                                   "dialog to close once the path is entered (default 5000)")


class FileDialogResponse(WireModel):
    window_id: str = Field(description="The dialog that was filled")
    title: str = Field(description="Its title")
    app: str = Field(description="The application that opened it")
    path: str = Field(description="The absolute path typed into it")
    closed: bool = Field(description="Always true: the dialog accepted the path and closed")
