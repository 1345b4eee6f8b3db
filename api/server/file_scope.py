"""Whose files a request of the file API is about (docs/files.md "Files of one desktop", docs/security.md).

- `/v1/fs/...` is the server's: paths on the machine, as the server's user, `~` its home (`files_of` of
  api/server/services.py).
- `/v1/desktop/fs/...` and `/v1/desktops/{id}/fs/...` are one running desktop's: in its sandbox, as its user
  and in its view of the files (its own /tmp, the server's state hidden), `~` and relative paths from its
  HOME. A desktop without a sandbox (`--isolation off`) gets the machine's files as the server's user, from
  its HOME; a desktop that is not running has no files to act in (409 `desktop_inactive`, as its processes).
  A token scoped to the desktop may use them.
"""

from __future__ import annotations

from starlette.requests import Request

from api.server.services import desktop_services, refuse_machine_access
from api.server.services import files_of as server_files
from desktop.files.filesystem import MACHINE, Files, InSandbox

SERVER_PREFIX = "/v1/fs"


def files_of(request: Request) -> Files:
    """The Files of a request by its path."""
    path: str = request.scope["path"]
    if path == SERVER_PREFIX or path.startswith(SERVER_PREFIX + "/"):
        return server_files(request)
    refuse_machine_access(request, desktop_services(request).desktop, "fs", "--no-file-api")
    return desktop_files(request)


def desktop_files(request: Request) -> Files:
    """The Files of the request's desktop, in its view: where the paths of a drop or a file dialog are found,
    since the apps that open them run there (docs/files-into-apps.md)."""
    desktop = desktop_services(request).desktop
    home = desktop.session().home  # raises the reason a desktop that is not running has no files
    sandbox = desktop.launcher()
    return Files(home, InSandbox(sandbox) if sandbox is not None else MACHINE)
