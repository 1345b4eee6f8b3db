"""Whose processes a request of the process API is about (docs/processes.md, docs/security.md).

- `/v1/processes/...` is the server's: the admin's commands, run on the machine as the server's user with the
  default desktop's environment while it is active, and every process the server started.
- `/v1/desktop/processes/...` and `/v1/desktops/{id}/processes/...` are one desktop's: its commands run in its
  sandbox (its uid, namespaces and cgroup) from its HOME, with its session's environment, and only its own
  processes are listed or reached (another's id is a 404). A token scoped to the desktop may use them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from api.server.services import desktop_services, refuse_machine_access, server_of
from desktop.core.errors import NotFound
from desktop.lifecycle.runtime import Desktop
from desktop.processes import ManagedProcess, ProcessManager
from desktop.processes.child import Launcher
from sandbox_desktop_wire.enums import DesktopRuntimeState, ProcessOwner

SERVER_PREFIX = "/v1/processes"


@dataclass(frozen=True)
class ProcessScope:
    manager: ProcessManager
    desktop: Desktop | None
    """None: the server's scope."""
    default: Desktop
    """The default desktop, whose environment the server's commands get."""

    def env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        """A new command's environment: the desktop's session's (the server's scope: the machine's, with the
        default desktop's variables while it is active), then the request's."""
        if self.desktop is None:
            return server_process_env(self.default, extra)
        return {**self.desktop.session().env, **(extra or {})}

    def cwd(self, asked: str | None) -> str | None:
        """Where a new command starts: where it asked, else (in a desktop) the desktop's HOME."""
        if asked is not None or self.desktop is None:
            return asked
        return self.desktop.session().home

    @property
    def launcher(self) -> Launcher | None:
        return self.desktop.launcher() if self.desktop is not None else None

    @property
    def desktop_id(self) -> str | None:
        return self.desktop.id if self.desktop is not None else None

    def get(self, process_id: str) -> ManagedProcess:
        """One process of the scope; a 404 for one of another desktop, as for one that does not exist."""
        process = self.manager.get(process_id)
        if self.desktop is not None and process.desktop_id != self.desktop.id:
            raise NotFound("process", process_id)
        return process

    def list(self, owner: ProcessOwner | None) -> list[ManagedProcess]:
        processes = self.manager.list(owner)
        if self.desktop is None:
            return processes
        return [p for p in processes if p.desktop_id == self.desktop.id]


def server_process_env(default: Desktop, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the server's commands: the machine's, with the default desktop's variables while it
    is active (its display, its buses), then `extra`."""
    env = dict(os.environ)
    if default.current_state() == DesktopRuntimeState.ACTIVE and default.supervisor is not None:
        env.update(default.supervisor.outside_env())  # the admin's processes: a stop of the desktop leaves them
    env.update(extra or {})
    return env


def scope_of(connection: HTTPConnection) -> ProcessScope:
    """The scope of a request (or WebSocket) by its path."""
    server = server_of(connection)
    default = server.desktops.default.desktop
    if connection.scope["path"].startswith(SERVER_PREFIX):
        return ProcessScope(server.processes, None, default)
    desktop = desktop_services(connection).desktop
    refuse_machine_access(connection, desktop, "processes", "--no-process-api")
    return ProcessScope(server.processes, desktop, default)
