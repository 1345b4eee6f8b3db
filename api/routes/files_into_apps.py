"""Files into apps: drop files onto a window (`/v1/desktop/drop`, XDND) and fill a native file dialog
(`/v1/desktop/file-dialog`). docs/files-into-apps.md."""

from __future__ import annotations

from starlette.requests import Request

from api.http.operations import Operation
from api.server.file_scope import desktop_files
from api.server.services import desktop_of
from desktop.core.errors import invalid_action
from desktop.events import action_log as logged
from desktop.files.dialogs import fill_file_dialog
from desktop.x11.xdnd import PathNotFound
from sandbox_desktop_wire.files_into_apps import (
    DropRequest,
    DropResponse,
    FileDialogRequest,
    FileDialogResponse,
)
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
TAGS = ("files into apps",)


async def drop(request: Request, body: DropRequest) -> DropResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    for name, value, size in (("x", body.x, session.width), ("y", body.y, session.height)):
        if not 0 <= value < size:
            raise invalid_action(f"{name} {value} is off the {session.width}x{session.height} screen "
                                 f"(0 to {size - 1})", name)
    # The paths are the desktop's, as the app it drops on sees them (its sandbox's view; docs/files-into-apps.md).
    files = desktop_files(request)
    paths = [files.resolve(raw, f"paths[{i}]") for i, raw in enumerate(body.paths)]
    for i, path in enumerate(paths):
        if await files.kind(path) is None:  # a dangling link counts as missing
            raise PathNotFound(f"paths[{i}]", f"paths[{i}] {body.paths[i]!r} does not exist on the desktop "
                               "(upload it with PUT /v1/desktop/fs/file first)")
    uris = tuple(path.as_uri() for path in paths)
    result = await desktop.clipboard.drop(session, uris, body.x, body.y)
    # In the action log with the input it stands for (a trajectory export skips kinds it has no action for).
    desktop.action_log.record(logged.Drop(body.x, body.y, tuple(str(p) for p in paths), str(result.target.window)))
    return DropResponse(window_id=str(result.target.window), action=result.action, uris=list(result.uris),
                        xdnd_version=result.target.version)


async def file_dialog(request: Request, body: FileDialogRequest) -> FileDialogResponse:
    desktop = desktop_of(request)
    files = desktop_files(request)
    path = files.resolve(body.path, "path")
    filled = await fill_file_dialog(desktop, files, path, body.window_id, (body.timeout_ms or 5000) / 1000)
    return FileDialogResponse(window_id=str(filled.window_id), title=filled.title, app=filled.app,
                              path=str(path), closed=True)


OPERATIONS = [
    Operation("POST", "/v1/desktop/drop", drop,
              "Drop files onto the application window at a point, as a file manager does (XDND)",
              body=DropRequest, response=DropResponse, invalid_code=INVALID, errors=(409, 422, 503, 504),
              body_required=True, tags=TAGS),
    Operation("POST", "/v1/desktop/file-dialog", file_dialog,
              "Choose a path in the open native file dialog (GTK's, Chromium's): type it and confirm",
              body=FileDialogRequest, response=FileDialogResponse, invalid_code=INVALID,
              errors=(404, 409, 422, 503), body_required=True, tags=TAGS),
]
