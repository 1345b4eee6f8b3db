"""Shared fixtures: a real `sandbox-desktop server` subprocess on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from starlette.routing import Mount, Route, WebSocketRoute

from api.app import create_app
from api.server import stack_dump
from api.server.config import ServerConfig
from tests.support.xprobe import Probe

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")
if "sandbox-desktop-tests-" not in os.environ.get("XAUTHORITY", ""):  # never a person's own file; xdist workers
    os.environ["XAUTHORITY"] = f"/tmp/sandbox-desktop-tests-{os.getpid()}.xauth"  # take their controller's
XAUTHORITY = Path(os.environ["XAUTHORITY"])
"""The X cookies of every desktop the tests' servers run (`--xauthority`): the tests' own X clients (xdotool,
xclip, xwininfo, python-xlib) find them through $XAUTHORITY, as the server's do (docs/security.md)."""

SHARED: list[Path] = []
"""This test process's temporary folders (pytest's basetemp), shared with every desktop its servers run
(`--share`): tests hand files to the apps they launch, and read what those apps write, through them."""


@pytest.fixture(scope="session", autouse=True)
def shared_temporary_folders(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp()
    base.chmod(0o755)
    SHARED[:] = [base]


_mktemp = pytest.TempPathFactory.mktemp


def _mktemp_shared(self: pytest.TempPathFactory, basename: str, numbered: bool = True) -> Path:
    """pytest makes its folders 0700; a desktop's apps run as a uid of their own (docs/security.md), and must
    write the logs and read the files tests put there."""
    path = _mktemp(self, basename, numbered)
    path.chmod(0o777)
    return path


pytest.TempPathFactory.mktemp = _mktemp_shared  # type: ignore[method-assign]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    """A running server: its URL, token, state directory and process."""

    url: str
    token: str | None
    state_dir: Path
    proc: subprocess.Popen[bytes]
    log_path: Path
    args: list[str] = field(default_factory=list)

    def client(self, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        kwargs.setdefault("timeout", 30)
        return httpx.Client(base_url=self.url, headers=headers, **kwargs)  # type: ignore[arg-type]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stacks(self, timeout: float = 3, lines: int = 150) -> str:
        """The log's last `lines` before what the server logged of each of its threads and tasks (its SIGUSR1
        dump, api/server/stack_dump.py), and the whole dump: what a request that never answered was waiting on."""
        before = self.log().count(stack_dump.MARK)
        self.proc.send_signal(stack_dump.SIGNAL)
        deadline = time.monotonic() + timeout
        while self.log().count(stack_dump.MARK) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        log = self.log().splitlines()
        dumps = [i for i, line in enumerate(log) if line.endswith(stack_dump.MARK)]
        return "\n".join(log[max(0, (dumps[-1] if dumps else len(log)) - lines):])

    def stop(self, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


OCCUPY = ("import os, sys\n"
          "while os.open(os.devnull, os.O_RDONLY) < int(sys.argv[1]): pass\n"
          "[os.set_inheritable(fd, True) for fd in range(3, int(sys.argv[1]) + 1)]\n"
          "os.execv(sys.argv[2], sys.argv[2:])")
"""Take descriptors 3 to argv[1], keep them across exec, and become the server (same pid)."""


def launch_server(tmp: Path, *extra: str, token: str | None = "", env: dict[str, str] | None = None,
                  wait: bool = True, occupy_fds: int = 0) -> ServerProcess:
    """Start a server; `token=""` makes a random one (passed with --token), `None` passes no token flag (the
    server then reads $SANDBOX_DESKTOP_TOKEN or makes its own; pass "--no-token" for an open server).

    Its announcement for local clients goes to `tmp/xdg-state` ($XDG_STATE_HOME), never the user's own.
    `occupy_fds`: it starts with descriptors 3 to `occupy_fds` taken (/dev/null), so its own come after them,
    as in a server holding many desktops."""
    if token == "":
        token = secrets.token_urlsafe(16)
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    state_dir = tmp / f"state-{port}"
    log_path = tmp / f"server-{port}.log"
    args = [sys.executable, "-m", "api.cli.main", "server", "--port", str(port), "--state-dir", str(state_dir),
            "--log-level", "warning", "--xauthority", str(XAUTHORITY),
            *(f"--share={path}" for path in SHARED), *extra]
    if token:
        args.append(f"--token={token}")  # `=`: a token may start with "-"
    if occupy_fds:
        args = [sys.executable, "-c", OCCUPY, str(occupy_fds), *args]
    full_env = {k: v for k, v in os.environ.items() if k != "SANDBOX_DESKTOP_TOKEN"}
    full_env["XDG_STATE_HOME"] = str(tmp / "xdg-state")
    full_env.update(env or {})
    log = open(log_path, "wb")  # noqa: SIM115 - the child owns it for its lifetime
    proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                            start_new_session=True)
    server = ServerProcess(f"http://127.0.0.1:{port}", token, state_dir, proc, log_path, args)
    if wait:
        wait_healthy(server)
    return server


def wait_healthy(server: ServerProcess, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"server exited with {server.proc.returncode}:\n{server.log()}")
        try:
            if httpx.get(server.url + "/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"server did not become healthy in {timeout} s:\n{server.log()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test of a module's server (`srv`) reports what the server was doing: a request that timed out
    shows where it waited (docs/operations.md, "What is it doing?")."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    server = getattr(item, "funcargs", {}).get("srv")
    if report.when == "call" and report.failed and isinstance(server, ServerProcess) and server.proc.poll() is None:
        report.sections.append(("server log and stacks (api/server/stack_dump.py)", server.stacks()))


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the whole session (desktop not started)."""
    srv = launch_server(tmp_path_factory.mktemp("server"))
    yield srv
    srv.stop()


@contextlib.contextmanager
def running_server(tmp: Path, *extra: str, desktop: dict[str, Any] | None = None,
                   **kwargs: Any) -> Iterator[ServerProcess]:
    """`launch_server(tmp, *extra, **kwargs)` with the desktop of the start request `desktop` (if given) active;
    stopped on leaving, whatever happened inside."""
    server = launch_server(tmp, *extra, **kwargs)
    try:
        if desktop is not None:
            with server.client() as api:
                body = api.post("/v1/desktop/start", json=desktop).json()
                assert body.get("state") == "active", body
        yield server
    except Exception as exc:  # what the server was doing, in the failure's report (as for a module's server)
        if server.proc.poll() is None:
            exc.add_note(f"server log and stacks (api/server/stack_dump.py):\n{server.stacks()}")
        raise
    finally:
        server.stop()


@pytest.fixture(scope="session")
def osworld_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The desktops' Python for OSWorld tasks as users get it: `sandbox-desktop install osworld`, its Python part,
    in a folder shared with every desktop (a server's `--osworld-python`; docs/osworld.md). Skips where the
    machine lacks python3-venv or python3-tk (that command's apt part installs them)."""
    if subprocess.run(["/usr/bin/python3", "-c", "import tkinter, venv"], capture_output=True).returncode != 0:
        pytest.skip("needs python3-tk and python3-venv (`sandbox-desktop install osworld --only python`)")
    folder = tmp_path_factory.mktemp("osworld-python") / "venv"
    done = subprocess.run([sys.executable, "-m", "api.cli.main", "install", "osworld", "--only", "python",
                           "--no-apt", "--yes", "--python-dir", str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.fixture(scope="module")
def srv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of the test module's own; a module-level `DESKTOP = {...}` start request starts a desktop, and
    `OSWORLD_PYTHON = True` gives it the desktops' Python for OSWorld tasks (`osworld_python`)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    extra = [f"--osworld-python={request.getfixturevalue('osworld_python')}"] \
        if getattr(request.module, "OSWORLD_PYTHON", False) else []
    with running_server(tmp_path_factory.mktemp(name), *extra,
                        desktop=getattr(request.module, "DESKTOP", None)) as server:
        yield server


@pytest.fixture(scope="module")
def api(srv: ServerProcess) -> Iterator[httpx.Client]:
    """A client of the module's server."""
    with srv.client() as c:
        yield c


@pytest.fixture(scope="module")
def display(api: httpx.Client) -> str:
    """The X display of the module's desktop (`DESKTOP = {...}`)."""
    return str(api.get("/v1/desktop/display/info").json()["display"])


@pytest.fixture
def streaming(api: httpx.Client) -> Iterator[None]:
    """The module desktop's live view is on for the test and off afterwards."""
    started = api.post("/v1/desktop/stream/start")
    assert started.status_code == 200 and started.json()["active"] is True, started.text
    yield
    api.post("/v1/desktop/stream/stop")


@contextlib.contextmanager
def managed_probe(api: httpx.Client, display: str, out: Path, title: str,
                  geometry: str = "800x500+100+100") -> Iterator[tuple[Probe, dict[str, Any]]]:
    """A window-manager-managed xprobe window and its client rectangle as the server lists it."""
    probe = Probe(display, out, geometry, override_redirect=False, title=title)
    try:
        rect = wait_for(lambda: next((w for w in api.get("/v1/desktop/windows").json()["windows"]
                                      if w["title"] == title), None), f"the {title} window")
        yield probe, rect
    finally:
        probe.close()


def run(scenario: Callable[[], Coroutine[Any, Any, T]], timeout: float = 90) -> T:
    """`asyncio.run(scenario())`, failing after `timeout` seconds rather than hanging the test."""
    return asyncio.run(asyncio.wait_for(scenario(), timeout))


async def poll(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Await until `check()` is truthy (returned), or fail naming `what`: `wait_for` inside a coroutine."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for(check: Callable[[], Any], what: str, timeout: float = 10) -> Any:
    """Poll `check` until it returns something truthy (returned), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start extra servers with their own flags; all are stopped after the test."""
    started: list[ServerProcess] = []

    def make(*extra: str, **kwargs: object) -> ServerProcess:
        srv = launch_server(tmp_path, *extra, **kwargs)  # type: ignore[arg-type]
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def procs(client: httpx.Client) -> Iterator[list[str]]:
    """Ids to kill and delete after the test, so the shared server stays clean."""
    ids: list[str] = []
    yield ids
    for process_id in ids:
        client.post(f"/v1/processes/{process_id}/kill", params={"waitMs": 2000})
        client.delete(f"/v1/processes/{process_id}")


def assert_problem(response: httpx.Response, status: int, code: str | None = None) -> dict[str, object]:
    """The response is a problem+json document with this status (and code)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status
    for key in ("type", "title", "detail", "code"):
        assert isinstance(body.get(key), str) and body[key], body
    if code is not None:
        assert body["code"] == code, body
    return dict(body)


SAMPLE_IDS = {"recordings": "rec_1", "processes": "proc_1", "windows": "4194305"}


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """(method, path) of every route the app really has ("WS" for WebSockets), so none can be missed."""
    app = create_app(ServerConfig(token="t", state_dir=tmp_path_factory.mktemp("routes"), xauthority=XAUTHORITY))
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            found.append(("WS", route.path))
        elif isinstance(route, Route):
            found += [(method, route.path) for method in sorted(route.methods or ())]
        elif isinstance(route, Mount):
            found.append(("GET", route.path + "/"))
        else:
            raise AssertionError(f"unknown route type {route!r}: teach this test about it")
    return found


def concrete(path: str) -> str:
    """`/v1/processes/{id}/logs` → `/v1/processes/proc_1/logs`."""
    parts = path.split("/")
    return "/".join(SAMPLE_IDS.get(parts[i - 1], "1") if p.startswith("{") else p for i, p in enumerate(parts))
