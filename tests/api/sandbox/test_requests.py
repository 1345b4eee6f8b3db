"""Whatever a request to a desktop's own processes holds, it fails alone: the desktop's sandbox (its init, and with
it every program of the desktop) outlives it, and the caller gets a 4xx naming what is wrong (docs/processes.md,
docs/errors.md). Found by bench/fuzz.py: an environment variable named with a '=' ended a sandboxed desktop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.support.desktop_sandbox import created_desktop, run_in


@pytest.fixture(scope="module")
def desktop(server: ServerProcess) -> Iterator[tuple[httpx.Client, dict[str, Any]]]:
    with server.client() as api, created_desktop(api) as made:
        assert made["sandbox"]["isolated"] or not made["sandbox"]["layers"], made
        yield api, made


@pytest.mark.parametrize(("body", "field"), [
    ({"command": "true", "env": {"A=B": "x"}}, "env"),
    ({"command": "true", "env": {"": "x"}}, "env"),
    ({"command": "true", "args": ["\ud800"]}, None),  # a lone surrogate: no file name encodes it
    ({"command": "true", "env": {"NAME": "\udfff"}}, None),
    ({"command": "\x9a\U0004814d|"}, "command"),
], ids=["equals-in-a-name", "empty-name", "surrogate-argument", "surrogate-value", "strange-command"])
@pytest.mark.parametrize("path", ["processes", "processes/run"])
def test_a_request_no_program_can_take_is_a_4xx_and_the_desktop_lives_on(
        desktop: tuple[httpx.Client, dict[str, Any]], body: dict[str, Any], field: str | None, path: str) -> None:
    api, made = desktop
    # json.dumps escapes what UTF-8 cannot carry (a lone surrogate as \ud800), as a client in any language may.
    answer = api.post(f"/v1/desktops/{made['id']}/{path}", content=json.dumps(body),
                      headers={"content-type": "application/json"})
    assert 400 <= answer.status_code < 500, answer.text
    if field is not None:
        assert field in answer.text, answer.text
    state = api.get(f"/v1/desktops/{made['id']}").json()
    assert state["state"] == "active", state
    assert run_in(api, "echo alive", made["id"])["stdout"] == "alive\n"
