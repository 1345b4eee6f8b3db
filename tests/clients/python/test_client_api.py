"""The Python client as a library (docs/client.md): keyword-only options, start options typed and matching
the server's request models, the sync and async clients alike, every public name documented, and the
package clean under `mypy --strict` as a user's own type checking sees it. No server needed."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import sandbox_desktop_client as sdc
from sandbox_desktop_client import AsyncClient, AsyncDesktopClient, AsyncDesktops, Client, DesktopClient, Desktops
from sandbox_desktop_client._types import CreateOptions, StartOptions
from sandbox_desktop_wire.desktop import DesktopStartRequest
from sandbox_desktop_wire.desktops import DesktopCreateRequest
from tests.conftest import REPO

NOWHERE = "http://127.0.0.1:9"  # discard port: a request would fail with a TransportError, not a TypeError
KEYWORD = inspect.Parameter.KEYWORD_ONLY


def members(cls: type) -> dict[str, Any]:
    """What `cls` and its bases of this package define, as `vars` gives it: the endpoints are on a base class
    that a client shares with its desktops' handles."""
    return {name: member for klass in reversed(cls.__mro__) if klass.__module__.startswith(sdc.__name__)
            for name, member in vars(klass).items()}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {name: fn for name, fn in members(cls).items() if not name.startswith("_") and callable(fn)}


def keyword_only(fn: Callable[..., Any]) -> set[str]:
    return {n for n, p in inspect.signature(fn).parameters.items() if p.kind is KEYWORD}


def test_options_are_keyword_only() -> None:
    with Client(NOWHERE, token="t") as client:
        for method, args in ((client.press, ("a", True)), (client.click, (1, 2, "right")),
                             (client.screenshot, ("jpeg",)), (client.launch, ("xterm", [], True)),
                             (client.type_text, ("x", 5)), (client.clipboard, ("primary",)),
                             (client.start, (800, 600)), (client.run, ("ls", [], 1000))):
            with pytest.raises(TypeError, match="positional"):
                method(*args)
    assert {"ctrl", "shift", "alt", "cmd"} == keyword_only(Client.press)
    assert {"format", "quality", "scale", "show_cursor", "region", "som"} == keyword_only(Client.screenshot)
    assert {"button", "count", "report_effect"} == keyword_only(Client.click)
    assert {"wait", "wait_timeout_ms"} == keyword_only(Client.launch)
    assert {"token", "timeout"} <= keyword_only(Client.__init__)


def test_a_mistyped_start_option_is_a_type_error() -> None:
    async def scenario() -> None:
        async with AsyncClient(NOWHERE, token="t") as client:
            with pytest.raises(TypeError, match="widht"):
                await client.start(widht=800)  # type: ignore[call-arg]
            with pytest.raises(TypeError, match="ttl"):
                await client.desktops.create(ttl=60)  # type: ignore[call-arg]

    with Client(NOWHERE, token="t") as client:
        with pytest.raises(TypeError, match="display"):
            client.start(display=99)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="idle_timeout"):
            client.desktops.create(idle_timeout=60)  # type: ignore[call-arg]
    asyncio.run(scenario())


@pytest.mark.parametrize(("method", "model", "options"), [
    (Client.start, DesktopStartRequest, StartOptions), (AsyncClient.start, DesktopStartRequest, StartOptions),
    (Desktops.create, DesktopCreateRequest, CreateOptions), (AsyncDesktops.create, DesktopCreateRequest, CreateOptions),
])
def test_start_and_create_take_every_option_the_server_does(method: Callable[..., Any], model: type[Any],
                                                            options: type[Any]) -> None:
    # A field added to the server's request model fails here until the client takes it too.
    parameters = dict(inspect.signature(method).parameters)
    parameters.pop("self")
    assert set(parameters) == set(model.model_fields) == set(get_type_hints(options))
    assert all(p.kind is KEYWORD and p.default is None for p in parameters.values())


@pytest.mark.parametrize(("sync", "coro"), [(Client, AsyncClient), (DesktopClient, AsyncDesktopClient),
                                            (Desktops, AsyncDesktops)])
def test_the_async_client_has_the_sync_ones_methods(sync: type, coro: type) -> None:
    renamed = {"close": "aclose"}
    methods = public_methods(sync)
    assert {renamed.get(n, n) for n in methods} == set(public_methods(coro))
    for name, fn in methods.items():
        other = getattr(coro, renamed.get(name, name))
        if isinstance(fn, property) or name == "bind":
            continue
        # `attach` builds a handle; `events` is an async generator (iterated, not awaited).
        assert inspect.iscoroutinefunction(other) or name == "attach" or inspect.isasyncgenfunction(other), name
        assert str(inspect.signature(fn)).replace("AsyncDesktopClient", "DesktopClient") == \
            str(inspect.signature(other)).replace("AsyncDesktopClient", "DesktopClient").replace(
                "AsyncIterator[", "Iterator["), name


def test_every_public_name_is_documented() -> None:
    assert sdc.__doc__ and "ApiError" in sdc.__doc__ and "NotFoundError" in sdc.__doc__
    missing = []
    for name in sdc.__all__:
        value = getattr(sdc, name)
        if not inspect.isclass(value):
            continue
        if not (value.__doc__ or "").strip():
            missing.append(name)
        for attr, member in members(value).items():
            target = member.fget if isinstance(member, property) else member
            if attr.startswith("_") or (not callable(target) and not isinstance(target, classmethod)):
                continue
            if not (getattr(target, "__doc__", None) or "").strip():
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_the_client_is_clean_under_mypy_strict(tmp_path: Path) -> None:
    # An empty configuration: the checkout's own (pyproject.toml) relaxes imports, a user's need not.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    # A user's code building wire models with only some fields: optional ones must look optional to a type
    # checker without pydantic's plugin (a positional `Field(None)` does not).
    user = tmp_path / "user_code.py"
    user.write_text("from sandbox_desktop_wire.elements import ElementQuery\n"
                    "from sandbox_desktop_wire.waits import ScreenCondition, WindowCondition\n"
                    "queries = [ElementQuery(role='textbox', name='City'), WindowCondition(title='Save'),\n"
                    "           ScreenCondition(quiet_ms=200)]\n")
    for targets in (["-p", "sandbox_desktop_client", "-p", "sandbox_desktop_wire"], [str(user)]):
        ran = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(config),
                              "--cache-dir", str(tmp_path / "cache"), *targets],
                             cwd=REPO / "client", capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
