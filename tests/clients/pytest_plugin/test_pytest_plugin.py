"""The pytest plugin (pytest_sandbox_desktop, docs/pytest.md), used as a user uses it: `python -m pytest` in a
subprocess on a project of its own, the plugin found through the distribution's `pytest11` entry point.
Its artefacts are opened the way a person would: the PNG with Pillow, the MP4 decoded with PyAV, the JSON
parsed, the JUnit XML and pytest-html report read for the paths they name."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import av
import httpx
import pytest
from PIL import Image

from pytest_sandbox_desktop.artifacts import folder_name
from pytest_sandbox_desktop.options import parse_size
from tests.clients.python.test_client_wheel import build_wheel, fresh_venv
from tests.conftest import ServerProcess
from tests.support.paths import REPO

RUN_TIMEOUT = 600
ARTEFACTS = {"screenshot.png", "recording.mp4", "actions.json", "accessibility.json"}


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m pytest` as a user runs it: this Python, whose environment has the distribution installed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SANDBOX_DESKTOP_", "PYTEST_")) and k != "DISPLAY"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def junit_cases(path: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Each test case's name -> (its outcome, its properties)."""
    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        properties = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        cases[case.get("name", "")] = (outcome, properties)
    return cases


def project(tmp_path: Path, source: str) -> Path:
    """A project outside the repository: one test file, no configuration."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_app.py").write_text(textwrap.dedent(source))
    return root


FAILING_PROJECT = """
    import pytest


    def test_passes(desktop):
        desktop.launch("xterm", ["-title", "passing"], wait=True)
        desktop.type_text("echo from the passing test\\n")


    def test_fails(desktop):
        desktop.launch("xterm", ["-title", "failing"], wait=True)
        desktop.type_text("echo from the failing test\\n")
        desktop.expect_window(title="never there", timeout=0.3)


    @pytest.fixture
    def broken_app(desktop):
        desktop.launch("xterm", ["-title", "half set up"], wait=True)
        raise RuntimeError("the fixture broke")


    def test_setup_error(broken_app):
        pass


    def test_typing_changes_the_screen(desktop):
        desktop.launch("xterm", ["-title", "typing"], wait=True)
        window = desktop.expect_window(title="typing")
        with desktop.expect_screen_change(region=(window["x"], window["y"], window["width"], window["height"])):
            desktop.type_text("echo changed\\n")


    def test_nothing_changes_the_screen(desktop):
        with desktop.expect_screen_change(region=(0, 0, 40, 40), timeout=0.3):
            pass


    def test_no_such_element(desktop):
        desktop.expect_element(role="button", name="Launch", timeout=0.3)
"""


def test_a_failing_test_leaves_files_that_play_and_reports_name_them(tmp_path: Path) -> None:
    root = project(tmp_path, FAILING_PROJECT)
    result = run_pytest(root, "--junitxml=junit.xml", "--html=report.html", "--desktop-size=800x600")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "3 failed, 2 passed, 1 error" in result.stdout, result.stdout
    # The helpers fail as an assert does, saying what the desktop showed.
    assert "AssertionError: expected a window title='never there' to be present within 0.3 s" in result.stdout
    assert "windows on the desktop: 'failing'" in result.stdout
    assert "expected the screen to change in region (0, 0, 40, 40) within 0.3 s" in result.stdout
    assert "expected an element role='button' name='Launch' to be present within 0.3 s" in result.stdout
    assert "handle.py" not in result.stdout, "the helpers' own frames are hidden: the test's line is shown"

    output = root / "desktop-artifacts"
    folders = {p.name for p in output.iterdir() if p.is_dir()}
    assert folders == {"test_app.py-test_fails", "test_app.py-test_setup_error",
                       "test_app.py-test_nothing_changes_the_screen", "test_app.py-test_no_such_element"}, folders
    failed = output / "test_app.py-test_fails"
    assert {p.name for p in failed.iterdir()} == ARTEFACTS

    with Image.open(failed / "screenshot.png") as shot:
        assert shot.size == (800, 600)
        assert len(shot.convert("RGB").getcolors(1 << 16) or []) > 2, "the xterm is on it, not an empty screen"
    with av.open(str(failed / "recording.mp4")) as container:
        stream = container.streams.video[0]
        frames = [frame for frame in container.decode(stream)]
        assert frames and (frames[0].width, frames[0].height) == (800, 600)
    actions = json.loads((failed / "actions.json").read_text())
    typed = [e.get("text") for e in actions["entries"] if e["kind"] == "type"]
    assert typed == ["echo from the failing test\n"], "this test's stretch of the log only"
    tree = json.loads((failed / "accessibility.json").read_text())
    assert "windows" in tree

    setup = output / "test_app.py-test_setup_error"
    assert {p.name for p in setup.iterdir()} == ARTEFACTS, "a setup error on a desktop keeps its files too"

    cases = junit_cases(root / "junit.xml")
    outcome, properties = cases["test_fails"]
    assert outcome == "failure"
    named = {name: value for name, value in properties.items() if name != "desktop_id"}
    assert named == {"desktop_screenshot": "desktop-artifacts/test_app.py-test_fails/screenshot.png",
                     "desktop_recording": "desktop-artifacts/test_app.py-test_fails/recording.mp4",
                     "desktop_actions": "desktop-artifacts/test_app.py-test_fails/actions.json",
                     "desktop_accessibility": "desktop-artifacts/test_app.py-test_fails/accessibility.json"}
    assert all((root / value).is_file() for value in named.values())
    assert cases["test_setup_error"][0] == "error" and "desktop_recording" in cases["test_setup_error"][1]
    passed = cases["test_passes"][1]
    assert set(passed) == {"desktop_id"} and passed["desktop_id"].startswith("dsk_")
    assert cases["test_typing_changes_the_screen"][0] == "passed"

    report = (root / "report.html").read_text()
    assert "test_app.py-test_fails/recording.mp4" in report and "test_app.py-test_fails/actions.json" in report
    assert any(p.suffix == ".png" for p in (root / "assets").iterdir()), "the screenshot is shown in the report"


ONE_PASS_ONE_FAIL = """
    def test_passes(desktop):
        desktop.launch("xterm", wait=True)


    def test_fails(desktop):
        desktop.launch("xterm", wait=True)
        assert desktop.windows() == []
"""


def test_recording_off_and_on_against_a_server_by_url(tmp_path: Path, server: ServerProcess) -> None:
    root = project(tmp_path, ONE_PASS_ONE_FAIL)
    options = (f"--desktop-url={server.url}", f"--desktop-token={server.token}", "--desktop-size=640x480")

    result = run_pytest(root, *options, "--desktop-record=off")
    assert result.returncode == 1 and "1 failed, 1 passed" in result.stdout, result.stdout + result.stderr
    output = root / "desktop-artifacts"
    assert {p.name for p in output.iterdir() if p.is_dir()} == {"test_app.py-test_fails"}
    assert {p.name for p in (output / "test_app.py-test_fails").iterdir()} == ARTEFACTS - {"recording.mp4"}
    (output / "from-an-earlier-run").mkdir()

    result = run_pytest(root, *options, "--desktop-record=on", "--desktop-output=desktop-artifacts")
    assert result.returncode == 1, result.stdout + result.stderr
    folders = {p.name for p in output.iterdir() if p.is_dir()}
    assert folders == {"test_app.py-test_fails", "test_app.py-test_passes"}, "the earlier run's output is gone"
    assert {p.name for p in (output / "test_app.py-test_passes").iterdir()} == {"recording.mp4"}
    assert {p.name for p in (output / "test_app.py-test_fails").iterdir()} == ARTEFACTS

    with server.client() as api:
        left = [d for d in api.get("/v1/desktops").json()["desktops"] if "pytest-worker" in d.get("tags", {})]
        assert left == [], "the plugin deletes the desktops it made on a server it did not start"
        assert api.get("/v1/desktop/recordings").status_code == 200


def test_a_directory_the_plugin_did_not_make_is_left_alone(tmp_path: Path, server: ServerProcess) -> None:
    root = project(tmp_path, "def test_passes(desktop):\n    pass\n")
    mine = root / "desktop-artifacts" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("mine")
    result = run_pytest(root, f"--desktop-url={server.url}", f"--desktop-token={server.token}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert mine.read_text() == "mine"


XDIST_PROJECT = """
    import os

    import pytest


    @pytest.mark.parametrize("n", range(6))
    def test_a_desktop_of_its_own(desktop, desktop_server, record_property, n):
        record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
        record_property("server", desktop_server.url)
        assert desktop.windows() == [], "no other test's windows: reset between tests, never shared"
        desktop.launch("xterm", ["-title", f"test {n}"], wait=True)
        desktop.expect_window(title=f"test {n}")


    def test_fails_on_a_worker(desktop, desktop_server, record_property):
        record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
        record_property("server", desktop_server.url)
        desktop.type_text("echo on a worker")
        assert False, "on purpose"
"""


@pytest.mark.parametrize("servers", ["per-worker", None])
def test_xdist_workers_each_drive_their_own_desktop(tmp_path: Path, servers: str | None) -> None:
    """A server each, or (the default at two workers) one that the controller started for both."""
    root = project(tmp_path, XDIST_PROJECT)
    result = run_pytest(root, "-n", "2", "--junitxml=junit.xml", "--desktop-size=640x480",
                        *([f"--desktop-server={servers}"] if servers else []))
    assert result.returncode == 1 and "1 failed, 6 passed" in result.stdout, result.stdout + result.stderr
    cases = junit_cases(root / "junit.xml")
    outcome, failed = cases.pop("test_fails_on_a_worker")
    assert outcome == "failure" and all(outcome == "passed" for outcome, _ in cases.values()), cases
    folder = root / "desktop-artifacts" / "test_app.py-test_fails_on_a_worker"
    assert {p.name for p in folder.iterdir()} == ARTEFACTS, "a worker keeps a failed test's files too"
    assert failed["desktop_recording"] == "desktop-artifacts/test_app.py-test_fails_on_a_worker/recording.mp4"
    cases["test_fails_on_a_worker"] = (outcome, failed)
    desktops_of: dict[str, set[str]] = {}
    for _, properties in cases.values():
        desktops_of.setdefault(properties["worker"], set()).add(properties["desktop_id"])
    assert set(desktops_of) == {"gw0", "gw1"}, desktops_of
    assert all(len(ids) == 1 for ids in desktops_of.values()), "one desktop per worker, reset between its tests"
    assert desktops_of["gw0"].isdisjoint(desktops_of["gw1"]), "workers never share a desktop"
    urls = {properties["server"] for _, properties in cases.values()}
    assert len(urls) == (2 if servers == "per-worker" else 1), urls
    for url in urls:
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/v1/health", timeout=5)  # stopped at the end of the run


@pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                    reason="needs zenity and chromium (scripts/setup.sh test installs them)")
def test_the_example_suite_passes(tmp_path: Path) -> None:
    result = run_pytest(REPO, "examples/gtk_and_browser", f"--junitxml={tmp_path / 'junit.xml'}",
                        f"--desktop-output={tmp_path / 'artefacts'}")
    assert result.returncode == 0, result.stdout + result.stderr
    cases = junit_cases(tmp_path / "junit.xml")
    assert len(cases) == 5 and all(outcome == "passed" for outcome, _ in cases.values()), cases
    assert not (tmp_path / "artefacts").exists(), "nothing failed, nothing kept"


INSTALLED_PROJECT = """
    import pathlib
    import sys

    import pytest_sandbox_desktop


    def test_the_plugin_is_the_installed_one(desktop):
        assert pathlib.Path(pytest_sandbox_desktop.__file__).is_relative_to(sys.prefix)
        desktop.launch("xterm", ["-title", "installed"], wait=True)
        desktop.expect_window(title="installed")


    def test_fails(desktop):
        desktop.launch("xterm", ["-title", "failing"], wait=True)
        desktop.type_text("echo before the failure\\n")
        assert desktop.windows() == [], "fails on purpose: its files are kept"
"""


def test_the_built_wheels_installed_into_a_venv_of_their_own_run_a_project(tmp_path: Path) -> None:
    """The server's and the client's wheels, installed into a fresh venv as a user installs them; the
    third-party packages they need come from this venv (one line in a .pth: CI does not download them
    again), so the plugin, its entry point, the server it starts and its artefacts are the wheels' own."""
    dist = tmp_path / "dist"
    wheels = [build_wheel(dist, REPO, "sandbox_desktop"), build_wheel(dist)]
    python = fresh_venv(tmp_path / "venv")
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    root = project(tmp_path, INSTALLED_PROJECT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SANDBOX_DESKTOP_", "PYTEST_")) and k not in ("DISPLAY", "PYTHONPATH")}
    result = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=junit.xml",
                             "--desktop-size=640x480"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=RUN_TIMEOUT)
    assert result.returncode == 1 and "1 failed, 1 passed" in result.stdout, result.stdout + result.stderr
    failed = root / "desktop-artifacts" / "test_app.py-test_fails"
    assert {p.name for p in failed.iterdir()} == ARTEFACTS
    with av.open(str(failed / "recording.mp4")) as container:
        assert next(container.decode(video=0)).width == 640


def test_folder_names_are_safe_and_distinct() -> None:
    assert folder_name("tests/test_ui.py::TestDialog::test_ok[a/b c]") == "tests-test_ui.py-TestDialog-test_ok-a-b-c"
    long_one, other = "t.py::test_" + "x" * 300 + "[1]", "t.py::test_" + "x" * 300 + "[2]"
    assert len(folder_name(long_one)) <= 130 and folder_name(long_one) != folder_name(other)
    assert folder_name("../..::") not in ("", ".", "..")
    assert parse_size("1280x800") == (1280, 800)
    with pytest.raises(argparse.ArgumentTypeError, match="WIDTHxHEIGHT"):
        parse_size("1280")
