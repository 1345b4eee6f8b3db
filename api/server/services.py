"""How a request reaches what the server holds: `ServerServices` (the server-wide parts, set on the app once
by `create_app`) and the accessors routes use, `server_of(request)` and `desktop_services(request)` (the path's
`{desktop_id}`, or the `default` desktop under `/v1/desktop`); docs/architecture.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection, Request

from api.http.desktop_paths import DEFAULT_DESKTOP_ID
from api.server.desktop_services import DesktopServices
from desktop.control.approvals import ApprovalBook
from desktop.core.errors import ApiDisabled
from desktop.files.filesystem import Files
from desktop.lifecycle.runtime import Desktop
from desktop.processes import ProcessManager
from desktop.sandbox.host import SandboxHost
from recording.manager import RecordingManager

if TYPE_CHECKING:
    from api.server.config import ServerConfig
    from api.server.metrics import Metrics
    from api.server.registry import DesktopRegistry
    from api.server.scoped_tokens import TokenStore


@dataclass(frozen=True)
class ServerServices:
    """What the whole server shares; one per app."""

    config: ServerConfig
    processes: ProcessManager
    desktops: DesktopRegistry
    metrics: Metrics
    tokens: TokenStore
    """Tokens scoped to one desktop (api/server/scoped_tokens.py); the server token is `config.token`."""
    version: str
    sandboxes: SandboxHost | None = None
    """What this machine allows of sandboxes, and the server's zygote, networks and cgroups (docs/security.md)."""
    approvals: ApprovalBook = field(default_factory=ApprovalBook)
    """Agent actions held for a person's decision, on every desktop (docs/approvals.md)."""


def server_of(connection: HTTPConnection) -> ServerServices:
    """The app's ServerServices (`create_app` sets them once)."""
    services: ServerServices = connection.app.state.services
    return services


def desktop_services(connection: HTTPConnection) -> DesktopServices:
    """The desktop a request is about (404 `desktop_not_found` if there is none by that id); counts as
    activity for its idle timeout."""
    desktop_id = connection.path_params.get("desktop_id", DEFAULT_DESKTOP_ID)
    services = server_of(connection).desktops.get(desktop_id)
    services.lifecycle.touch()
    return services


def desktop_of(connection: HTTPConnection) -> Desktop:
    """The Desktop of the request's path: `/v1/desktops/{desktop_id}/...`, or the default one."""
    return desktop_services(connection).desktop


def refuse_machine_access(connection: HTTPConnection, desktop: Desktop, api: str, flag: str) -> None:
    """A desktop's own commands and files act inside its sandbox, which `--no-process-api` and
    `--no-file-api` leave on; a desktop without one (`--isolation off`, a machine that cannot isolate) would
    act on the machine as the server's user, which those flags switched off: 403 `api_disabled` then."""
    if api in server_of(connection).config.disabled_apis and not desktop.sandbox_report().isolated:
        raise ApiDisabled(f"desktop {desktop.id} is not isolated, so its {api} would act on the machine as the "
                          f"server's user, and this server was started with {flag}")


DEFAULT_FILES = Files()


def files_of(request: Request) -> Files:
    """The app's Files (`app.state.files`, e.g. with a fixed home), else the server user's home."""
    files: Files | None = getattr(request.app.state, "files", None)
    return files or DEFAULT_FILES


def recordings_of(request: Request) -> RecordingManager:
    return desktop_services(request).recordings
