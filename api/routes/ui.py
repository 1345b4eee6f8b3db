"""`/ui/`: the inspector, a static page (no build step) that drives the API from the browser.

The page holds no data, so it is served without the token; it asks for the token and sends it
on every API call itself. `ROUTES` is mounted by api/app.py next to the API routes.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

UI_DIR = Path(__file__).resolve().parent.parent / "ui"

# The page talks only to this server (HTTP and its WebSocket) and shows blobs it fetched itself.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
        "connect-src 'self'; style-src 'self'; script-src 'self'; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    # Revalidate every load: an upgraded server must not run against a cached old app.js.
    "Cache-Control": "no-cache",
}


class InspectorFiles(StaticFiles):
    """StaticFiles plus the page's security and caching headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code < 400:
            response.headers.update(HEADERS)
        return response


async def to_index(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=307)


ROUTES: list[BaseRoute] = [
    Route("/ui", to_index, methods=["GET", "HEAD"]),
    Mount("/ui", app=InspectorFiles(directory=UI_DIR, html=True), name="ui"),
]
