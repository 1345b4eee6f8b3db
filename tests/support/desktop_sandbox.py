"""Code run inside a desktop's sandbox through the desktop's own process API (`/v1/desktops/{id}/processes/run`),
as an agent's commands run there: its uid, its namespaces, its cgroup, its network rules (docs/security.md).

Each helper takes either a client scoped to the desktop (an agent's, whose base URL is `.../v1/desktops/{id}`)
and no `desktop`, or a client of the server and the desktop's id.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import httpx

from tests.support.netns import PROBE

PYTHON = "/usr/bin/python3"
"""The machine's Python, which every desktop sees; `-I -S`: none of the tests' environment or site-packages."""


def run_in(api: httpx.Client, script: str, desktop: str | None = None, timeout_ms: int = 20000) -> dict[str, Any]:
    """`sh -c script` in the desktop, to completion: its exit code and output."""
    return command_in(api, "sh", ["-c", script], desktop, timeout_ms)


def python_in(api: httpx.Client, code: str, *argv: str, desktop: str | None = None) -> str:
    """Python `code` (dedented) run in the desktop with `argv`, which must succeed: its standard output."""
    done = command_in(api, PYTHON, ["-I", "-S", "-c", textwrap.dedent(code), *argv], desktop)
    assert done.get("exitCode") == 0, done
    return str(done["stdout"])


def display_reached_in(api: httpx.Client, display_number: str, desktop: str | None = None) -> list[str]:
    """From inside the desktop, connect to display `display_number`'s socket path and its abstract socket: for
    each, "reached" or "refused <errno>"."""
    out = python_in(api, f"""
        import socket
        for address in ("/tmp/.X11-unix/X{display_number}", "\\0/tmp/.X11-unix/X{display_number}"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(address)
                print("reached", repr(address))
            except OSError as exc:
                print("refused", exc.errno)
        """, desktop=desktop)
    return out.splitlines()


def assert_its_own_desktop_works(agent: httpx.Client, desktop: dict[str, Any]) -> None:
    """Through its own scoped client (`agent`), a sandboxed desktop's display, HOME, apps and screen work: the
    boundary takes nothing from the desktop itself. Its screen is 640x400."""
    done = run_in(agent, f"xdpyinfo -display {desktop['display']} | grep dimensions; echo note > $HOME/note.txt; "
                         "cat $HOME/note.txt")
    assert "640x400 pixels" in done["stdout"] and "note" in done["stdout"], done
    launched = agent.post("/launch", json={"app": "xterm", "args": ["-T", "inside"], "wait": True})
    assert launched.status_code == 200, launched.text
    windows = agent.get("/windows").json()["windows"]
    assert any(w["title"] == "inside" and w["pid"] == launched.json()["pid"] for w in windows)
    assert agent.get("/screenshot").headers["content-type"] == "image/png"


def command_in(api: httpx.Client, command: str, args: list[str], desktop: str | None = None,
               timeout_ms: int = 20000) -> dict[str, Any]:
    """`command args...` in the desktop, to completion (the run must be accepted: 200)."""
    path = f"/v1/desktops/{desktop}/processes/run" if desktop else "/processes/run"
    answer = api.post(path, json={"command": command, "args": args, "timeoutMs": timeout_ms})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def probe_in(api: httpx.Client, desktop: str | None, *targets: str) -> list[str]:
    """Connect from inside the desktop to each `host:port`, as its apps would (tests/support/netns.py `probe`):
    `ok:<banner>`, `refused` (nothing listens), `unreachable` (its rules refused it), `no-route` or `timeout`."""
    return list(json.loads(python_in(api, PROBE, *targets, desktop=desktop)))


SMALL = {"width": 320, "height": 240}
"""A desktop's screen where the test needs none bigger: the fewest pixels to allocate."""


@contextlib.contextmanager
def created_desktop(api: httpx.Client, **fields: Any) -> Iterator[dict[str, Any]]:
    """A desktop created with the wire's `fields` (on a small screen unless they say otherwise), as the server
    answered; deleted on leaving, whatever happened (one already deleted is left so)."""
    made = api.post("/v1/desktops", json={**SMALL, **fields})
    assert made.status_code == 201, made.text
    desktop = dict(made.json())
    try:
        yield desktop
    finally:
        api.delete(f"/v1/desktops/{desktop['id']}")


def assert_refused(response: httpx.Response, field: str) -> dict[str, Any]:
    """The caller's mistake: a 4xx problem+json whose `errors` name `field` (as the request spelled it)."""
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    problem = dict(response.json())
    assert field in [error.get("field") for error in problem.get("errors", [])], problem
    return problem
