"""Which messages the command socket runs directly (api/commands/direct.py): each JSON operation the router gives
a message, found through the app's own router; everything else (images, uploads, ranges, streams, a switched-off
API, a 404 or a 405) is left to the whole app. In process, on the app `create_app` builds."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute

from api.app import create_app
from api.commands.direct import DirectRun, runs_directly
from api.commands.socket import COMMAND_SOCKET_PATH, CommandSocket
from api.http.operations import OperationRoute
from api.http.router import IndexedRouter
from api.server.config import ServerConfig
from tests.conftest import XAUTHORITY


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Starlette:
    return create_app(ServerConfig(token="t", state_dir=tmp_path_factory.mktemp("direct"), xauthority=XAUTHORITY,
                                   disabled_apis=frozenset({"processes"})))


def direct_of(app: Starlette) -> tuple[IndexedRouter, DirectRun]:
    router = app.router
    assert isinstance(router, IndexedRouter)
    socket = next(r for r in router.routes if isinstance(r, WebSocketRoute) and r.path == COMMAND_SOCKET_PATH)
    commands = socket.endpoint.__self__  # type: ignore[attr-defined]  # the bound CommandSocket.serve
    assert isinstance(commands, CommandSocket) and commands.direct is not None
    return router, commands.direct


def scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}


def test_every_json_operation_runs_directly_and_nothing_else(app: Starlette) -> None:
    router, direct = direct_of(app)
    routes = [route for route in router.routes if isinstance(route, OperationRoute)]
    counted = {True: 0, False: 0}
    for route in routes:
        path = route.path.replace("{desktop_id}", "d1").replace("{", "").replace("}", "")  # a value per parameter
        for method, operation in route.operations.items():
            found = direct.found(router, scope(method, path))
            if runs_directly(operation):
                assert found is not None and found[1] is operation, (method, route.path)
            else:
                assert found is None, (method, route.path)
            counted[found is not None] += 1
    # Most of the table is JSON in and out; screenshots, files, recordings and the like are not.
    assert counted[True] > 100 and counted[False] > 10, counted


def test_the_whole_app_answers_what_is_not_a_json_operation(app: Starlette) -> None:
    router, direct = direct_of(app)
    for method, path in (("GET", "/v1/desktop/screenshot"),  # an image
                         ("PUT", "/v1/fs/file"),  # an upload
                         ("GET", "/v1/desktop/events"),  # a stream
                         ("GET", "/v1/processes"), ("POST", "/v1/processes/run"),  # switched off: its 403
                         ("GET", "/v1/desktop/mouse/click"),  # a 405
                         ("HEAD", "/v1/desktop/status"),  # HEAD is the app's
                         ("GET", "/v1/desktop/no/such/thing"), ("POST", "/v1/desktop/mouse/click/")):  # 404, redirect
        assert direct.found(router, scope(method, path)) is None, (method, path)


def test_a_desktops_path_runs_directly_with_its_path_parameters(app: Starlette) -> None:
    router, direct = direct_of(app)
    found = direct.found(router, scope("POST", "/v1/desktops/abc/mouse/click"))
    assert found is not None
    route, operation, child = found
    assert route.path == "/v1/desktops/{desktop_id}/mouse/click" and operation.method == "POST"
    assert child["path_params"] == {"desktop_id": "abc"}
    again = direct.found(router, scope("POST", "/v1/desktops/abc/mouse/click"))
    assert again is found  # kept: the same few ops come over and over
