"""The indexed router answers as Starlette's linear scan would, and spawn mistakes are typed exceptions."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import Scope

from api.app import create_app
from api.http.operations import Operation
from api.http.problems import problem_document, status_of
from api.http.router import IndexedRouter, first_match
from api.server.config import ServerConfig
from desktop.core import errors
from desktop.processes import SpawnError
from desktop.processes.spawn_errors import spawn_error
from sandbox_desktop_wire.problems import PROBLEMS
from tests.conftest import XAUTHORITY

PARAM = re.compile(r"\{(\w+)(?::(\w+))?\}")


def scan(routes: list[BaseRoute], scope: Scope) -> tuple[BaseRoute, Scope] | None:
    """What Starlette's Router picks scanning the whole table (the index must pick the same)."""
    return first_match(routes, scope)


def sample_paths(template: str) -> list[str]:
    """Paths a template matches, and near misses: a value per parameter, then the path with a slash more or
    less, a newline, an extra segment, its head alone."""
    filled = [PARAM.sub(lambda m, v=value: "a/b" if m.group(2) == "path" else v, template)  # type: ignore[misc]
              for value in ("x1", "7")]
    head = template.split("{")[0]
    out = [*filled, head, head.rstrip("/"), template]
    for path in filled:
        out += [path + "/", path.rstrip("/"), path + "\n", path + "/more", "/v1" + path, path.replace("/", "//")]
    return out


@pytest.fixture(scope="module", params=[frozenset(), frozenset({"processes", "fs"})], ids=["all", "disabled"])
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Starlette:
    return create_app(ServerConfig(token="t", state_dir=tmp_path_factory.mktemp("router"), xauthority=XAUTHORITY,
                                   disabled_apis=request.param))


def test_the_index_picks_what_the_scan_picks(app: Starlette) -> None:
    router = app.router
    assert isinstance(router, IndexedRouter)
    paths = {"/", "", "/v1", "/v1/", "/nope", "/ui", "/ui/", "/ui/index.html", "/v1/desktops/", "/v1/desktops//x"}
    for route in router.routes:
        paths.update(sample_paths(str(getattr(route, "path_format", getattr(route, "path", "/")))))
    checked = 0
    for path in sorted(paths):
        for kind, method in (("http", "GET"), ("http", "POST"), ("http", "DELETE"), ("websocket", "GET")):
            scope = {"type": kind, "method": method, "path": path, "root_path": "", "query_string": b"",
                     "headers": []}
            expected = scan(router.routes, scope)
            got = router.route_for(scope, path)
            assert (got and got[0]) is (expected and expected[0]), (kind, method, path)
            assert (got and got[1]) == (expected and expected[1]), (kind, method, path)
            checked += expected is not None
    assert checked > len(router.routes)  # most routes were found at least once


def test_routes_added_later_are_indexed(tmp_path: Path) -> None:
    app = create_app(ServerConfig(token="t", state_dir=tmp_path, xauthority=XAUTHORITY))
    router = app.router
    assert isinstance(router, IndexedRouter)
    scope = {"type": "http", "method": "GET", "path": "/v1/added/1", "root_path": "", "headers": []}
    assert router.route_for(scope, "/v1/added/1") is None
    from starlette.responses import Response
    from starlette.routing import Route

    async def added(request: object) -> Response:
        return Response()

    router.routes.append(Route("/v1/added/{n:int}", added))
    found = router.route_for(scope, "/v1/added/1")
    assert found is not None and found[1]["path_params"] == {"n": 1}


# -- typed exceptions --------------------------------------------------------------------------------------------

def failed(code: int, filename: str) -> OSError:
    return OSError(code, os.strerror(code), filename)


@pytest.mark.parametrize(("error", "cls", "status", "field"), [
    (failed(errno.ENOENT, "no-such-command-xyz"), errors.CommandNotFound, 422, "command"),
    (failed(errno.ETXTBSY, "no-such-command-xyz"), errors.CommandBusy, 409, "command"),
    (failed(errno.E2BIG, "no-such-command-xyz"), errors.ArgumentsTooLong, 422, "args"),
    (failed(errno.ENOENT, "/no/such/dir"), errors.WorkingDirectoryNotFound, 422, "cwd"),
    (failed(errno.ENOTDIR, "/no/such/dir"), errors.WorkingDirectoryNotDirectory, 422, "cwd"),
    (failed(errno.EACCES, "/no/such/dir"), errors.WorkingDirectoryNotAccessible, 422, "cwd"),
])
def test_each_spawn_mistake_is_its_own_type_with_a_fixed_code(error: OSError, cls: type[errors.SpawnError],
                                                              status: int, field: str) -> None:
    exc = spawn_error("no-such-command-xyz", "/no/such/dir", None, error)
    assert type(exc) is cls and isinstance(exc, SpawnError)
    assert exc.code == cls.code and status_of(exc) == status
    assert problem_document(exc)["errors"][0]["field"] == field


def test_a_file_without_the_execute_bit_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    exc = spawn_error(str(script), None, None, failed(errno.EACCES, str(script)))
    assert type(exc) is errors.CommandNotExecutable and exc.code == "command_not_executable"


def test_every_typed_exception_has_a_code_of_the_table() -> None:
    def subclasses(cls: type[errors.DomainError]) -> list[type[errors.DomainError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]
    for cls in subclasses(errors.DomainError):
        assert cls.code in PROBLEMS, cls
    assert errors.ApiDisabled("off").code == "api_disabled"


def test_an_operation_may_document_only_statuses_of_the_problem_table() -> None:
    async def handler(request: object) -> None:
        return None
    Operation("GET", "/v1/x", handler, "x", errors=(404, 409, 503))
    with pytest.raises(ValueError, match=r"GET /v1/x: no problem code is answered with \[418\]"):
        Operation("GET", "/v1/x", handler, "x", errors=(404, 418))
