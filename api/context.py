"""What route handlers reach through the request: the app's Desktop."""

from __future__ import annotations

from starlette.requests import Request

from desktop.runtime import Desktop


def desktop_of(request: Request) -> Desktop:
    """The Desktop the app was built around (`create_app` puts it on `app.state`)."""
    desktop: Desktop = request.app.state.desktop
    return desktop
