"""What route handlers reach through the request: the Desktop it is about (api/services.py)."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from api.services import desktop_services
from desktop.runtime import Desktop


def desktop_of(connection: HTTPConnection) -> Desktop:
    """The Desktop of the request's path: `/v1/desktops/{desktop_id}/...`, or the default one."""
    return desktop_services(connection).desktop
