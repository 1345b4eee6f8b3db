"""The pytest plugin (entry point `pytest11: sandbox_desktop`; docs/pytest.md): options, the fixtures
`desktop_server` and `desktop`, and the hooks that keep a failed test's files and name them in reports.

Nothing happens in a session whose tests use neither fixture: no server starts, no directory is made;
except under xdist with a shared server (`--desktop-server`), which the controller starts as the workers
start, before anyone can know whether a test will ask for it.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .options import SHARED_UP_TO, Isolation, RecordMode, ServerMode, parse_size

if TYPE_CHECKING:  # loaded by the fixtures, when a test first asks for a desktop (options.py says why)
    from .artifacts import Artifact, Collected
    from .handle import Desktop
    from .pool import DesktopPool
    from .server import DesktopServer

MARKER = ".sandbox-desktop-artifacts"
"""Written into the output directory: a later run empties a directory holding it, and only such a one
(a directory this plugin did not make holds someone else's files)."""
WORKERINPUT_KEY = "sandbox_desktop_shared_dir"
URL_ENV = "SANDBOX_DESKTOP_URL"
TOKEN_ENV = "SANDBOX_DESKTOP_TOKEN"
PHASES = pytest.StashKey[dict[str, pytest.TestReport]]()
"""Each test's reports by phase (`setup`, `call`), for its `desktop` fixture's teardown."""
COLLECTED = pytest.StashKey["Collected"]()
"""A test's files, for its teardown report (pytest-html extras)."""
SHARED_DIR = pytest.StashKey[Path]()
"""The controller's directory for the run's shared server (shared.py), once a worker is configured."""
SHARED_START = pytest.StashKey[threading.Thread]()
"""The controller's thread starting the shared server (shared.start_early)."""
SHARED_USERS = pytest.StashKey[set[str]]()
"""The controller's workers that may still use the shared server (their gateway ids)."""
SHARED_STOP_EARLY = pytest.StashKey[bool]()
"""False once a worker died: its replacement may still need the shared server, so it stops at the very end."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sandbox-desktop", "sandbox-desktop: a virtual Linux desktop per test (docs/pytest.md)")
    group.addoption("--desktop-url", default=os.environ.get(URL_ENV) or None, metavar="URL",
                    help=f"use the sandbox-desktop server at URL (default ${URL_ENV}; unset: start one)")
    group.addoption("--desktop-token", default=None, metavar="TOKEN",
                    help=f"its token (default ${TOKEN_ENV}, then the token a local server announced)")
    group.addoption("--desktop-size", type=parse_size, default=None, metavar="WxH",
                    help="each desktop's screen size (default: the server's, 1440x900)")
    group.addoption("--desktop-record", type=RecordMode, choices=list(RecordMode), default=RecordMode.RETAIN_ON_FAILURE,
                    help="record each test's desktop and keep the MP4: on, off, retain-on-failure (default)")
    group.addoption("--desktop-output", default="desktop-artifacts", metavar="DIR",
                    help="where a failed test's files go, one folder per test (default desktop-artifacts/)")
    group.addoption("--desktop-isolation", type=Isolation, choices=list(Isolation), default=Isolation.RESET,
                    help="reset (default: one desktop per worker, reset between tests) or fresh (one per test)")
    group.addoption("--desktop-server", type=ServerMode, choices=list(ServerMode), default=ServerMode.AUTO,
                    help="under xdist: one server for all workers (shared), a server per worker (per-worker), or "
                         f"auto (default): shared up to {SHARED_UP_TO} workers")


def _output(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir, config.getoption("desktop_output")).resolve()


def pytest_configure(config: pytest.Config) -> None:
    # The controller (or a run without xdist) empties the last run's output before any worker writes to it.
    output = _output(config)
    if not hasattr(config, "workerinput") and (output / MARKER).exists():
        shutil.rmtree(output, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """xdist, on the controller, before the workers start: with a shared server, start it while the workers
    start (shared.py)."""
    mode: ServerMode = config.getoption("desktop_server")
    if (config.getoption("desktop_url") or config.getoption("collectonly")
            or mode.resolve(len(specs)) is not ServerMode.SHARED):
        return
    import tempfile

    from .shared import start_early

    config.stash[SHARED_DIR] = Path(tempfile.mkdtemp(prefix="sandbox-desktop-pytest-"))
    config.stash[SHARED_START] = start_early(config.stash[SHARED_DIR])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, on the controller, for each worker: where the run's shared server is (shared.py)."""
    if SHARED_DIR in node.config.stash:
        node.workerinput[WORKERINPUT_KEY] = str(node.config.stash[SHARED_DIR])
        node.config.stash.setdefault(SHARED_USERS, set()).add(node.gateway.id)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    """xdist, on the controller: a worker finished its session (`error` None) or died. Once every worker
    has finished, none will use the shared server again: its stop begins (a died worker may be replaced by
    a new one, so then the stop waits for the end of the run)."""
    config: pytest.Config = node.config
    if SHARED_DIR not in config.stash:
        return
    users = config.stash.setdefault(SHARED_USERS, set())
    users.discard(node.gateway.id)
    if error is not None:
        config.stash[SHARED_STOP_EARLY] = False
    elif not users and config.stash.get(SHARED_STOP_EARLY, True):
        from .shared import begin_stop

        begin_stop(config.stash[SHARED_DIR])


def pytest_unconfigure(config: pytest.Config) -> None:
    if SHARED_DIR in config.stash:
        from .shared import stop_shared

        config.stash[SHARED_START].join()  # a start still under way (bounded by its timeouts) ends first
        stop_shared(config.stash[SHARED_DIR])


def _worker(config: pytest.Config) -> str:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.fixture(scope="session")
def desktop_server(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DesktopServer]:
    """The sandbox-desktop server: the one at `--desktop-url`, else one started on a free loopback port and
    stopped at the end of the run (under xdist: one for all workers, started by the controller, or one per
    worker: `--desktop-server`)."""
    from .server import DesktopServer, start_server

    url: str | None = pytestconfig.getoption("desktop_url")
    if url:
        token: str | None = pytestconfig.getoption("desktop_token")
        yield DesktopServer(url.rstrip("/"), token)
        return
    workerinput: dict[str, Any] = getattr(pytestconfig, "workerinput", {})
    if WORKERINPUT_KEY in workerinput:
        from .shared import server_for_worker

        yield server_for_worker(Path(workerinput[WORKERINPUT_KEY]))  # the controller stops it
        return
    server = start_server(tmp_path_factory.mktemp("sandbox-desktop"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _desktop_pool(pytestconfig: pytest.Config, desktop_server: DesktopServer) -> Iterator[DesktopPool]:
    from .pool import DesktopPool, DesktopSettings

    size: tuple[int, int] | None = pytestconfig.getoption("desktop_size")
    settings = DesktopSettings(size[0] if size else None, size[1] if size else None, _worker(pytestconfig))
    client = desktop_server.client()
    pool = DesktopPool(client, settings, pytestconfig.getoption("desktop_isolation"))
    try:
        yield pool
    finally:
        try:
            # A server this run started deletes its desktops as it stops (all at once, at the end of the run):
            # deleting each one first only made every worker wait for its desktop's processes to end.
            if not desktop_server.started_by_plugin:
                pool.close()
        finally:
            client.close()


@pytest.fixture
def desktop(request: pytest.FixtureRequest, _desktop_pool: DesktopPool) -> Iterator[Desktop]:
    """A desktop for this test alone, in its freshly started state; on failure its screenshot, recording,
    action log and accessibility tree go to `--desktop-output`/<test>/ (docs/pytest.md)."""
    from .artifacts import Watch, folder_name

    config = request.config
    item = request.node
    handle = _desktop_pool.acquire()
    item.user_properties.append(("desktop_id", handle.id))
    watch = Watch(handle, config.getoption("desktop_record"), _desktop_pool.log_cursor)
    try:
        yield handle
    finally:
        try:
            failed = _failed(item)
            collected = watch.finish(failed, _output(config) / folder_name(item.nodeid), MARKER)
        finally:
            _desktop_pool.release(handle, watch.last_seq)
        _report(item, collected)


def _failed(item: pytest.Item) -> bool:
    """The test failed, or its setup did after its desktop was made (another fixture, on the desktop)."""
    reports = item.stash.get(PHASES, {})
    return any(report.failed for report in reports.values())


def _report(item: pytest.Item, collected: Collected) -> None:
    item.stash[COLLECTED] = collected
    for artifact in collected.artifacts:
        item.user_properties.append((artifact.kind.property_name, _shown(item.config, artifact.path)))
    if collected.problems:
        item.user_properties.append(("desktop_artifact_problems", "; ".join(collected.problems)))


def _shown(config: pytest.Config, path: Path) -> str:
    """A path as reports show it: relative to where pytest was started when it lies under it."""
    try:
        return str(path.relative_to(config.invocation_params.dir.resolve()))
    except ValueError:
        return str(path)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if report.when in ("setup", "call"):
        item.stash.setdefault(PHASES, {})[report.when] = report
    elif report.when == "teardown" and COLLECTED in item.stash:
        _html_extras(item, report, item.stash[COLLECTED].artifacts)
    return report


def _html_extras(item: pytest.Item, report: pytest.TestReport, artifacts: list[Artifact]) -> None:
    """pytest-html (when installed and writing a report) shows the files under the test: the screenshot
    inline, the others as links relative to the report."""
    html_path = getattr(item.config.option, "htmlpath", None)
    if not html_path or not artifacts:
        return
    try:
        from pytest_html import extras
    except ImportError:
        return
    import base64

    from .artifacts import ArtifactKind

    report_dir = Path(item.config.invocation_params.dir, html_path).resolve().parent
    shown: list[dict[str, Any]] = list(getattr(report, "extras", []))
    for artifact in artifacts:
        match artifact.kind:
            case ArtifactKind.SCREENSHOT:
                shown.append(extras.png(base64.b64encode(artifact.path.read_bytes()).decode(), name="screenshot.png"))
            case ArtifactKind.RECORDING:
                shown.append(extras.mp4(os.path.relpath(artifact.path, report_dir), name="recording.mp4"))
            case ArtifactKind.ACTIONS | ArtifactKind.ACCESSIBILITY:
                shown.append(extras.url(os.path.relpath(artifact.path, report_dir), name=artifact.kind.value))
    report.extras = shown  # type: ignore[attr-defined]
