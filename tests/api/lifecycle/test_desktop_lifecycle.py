"""Desktop lifecycle against a real Xvfb/openbox: start, status fields, supervision, stop."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem, launch_server
from tests.support.pids import child, child_host_pid, host_pid, in_namespace_of, parent_pid, pid_alive

RFC3339_NS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}\+00:00$")


def x_answers(display: str) -> bool:
    """An independent X client (xdpyinfo) can talk to the display."""
    done = subprocess.run(["xdpyinfo", "-display", display], capture_output=True, timeout=10)
    return done.returncode == 0


def child_pid(status: dict, name: str) -> int:
    """The pid of a running supervised child as the API and the desktop number it (lastExit, /v1/processes)."""
    return int(child(status, name)["pid"])


@pytest.fixture
def api(srv: ServerProcess) -> Iterator[httpx.Client]:
    with srv.client() as c:
        yield c
        c.post("/v1/desktop/stop")


def test_inactive_status_has_every_always_present_field(api: httpx.Client, srv: ServerProcess) -> None:
    body = api.get("/v1/desktop/status").json()
    assert body["state"] == "inactive"
    assert body["missingDependencies"] == []
    assert body["processes"] == []
    assert body["runtimeLogPath"] == str(srv.state_dir / "desktop-runtime.log")
    for absent in ("display", "resolution", "startedAt", "lastError", "installCommand", "windows"):
        assert absent not in body


def test_start_reports_every_status_field_and_a_real_display(api: httpx.Client, srv: ServerProcess) -> None:
    response = api.post("/v1/desktop/start", json={"width": 1024, "height": 768, "dpi": 110, "displayNum": 140})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["state"] == "active"
    assert re.fullmatch(r":\d+", body["display"])
    assert body["resolution"] == {"width": 1024, "height": 768, "dpi": 110, "maxWidth": 2560, "maxHeight": 1600}
    assert RFC3339_NS.match(body["startedAt"]), body["startedAt"]
    names = [p["name"] for p in body["processes"]]
    assert "Xvfb" in names and "openbox" in names
    if shutil.which("dbus-daemon"):
        assert "dbus" in names
    for proc in body["processes"]:
        assert proc["running"] and pid_alive(host_pid(proc))
        assert Path(proc["logPath"]).exists()
    assert "lastError" not in body and body["missingDependencies"] == []
    # The display is real: an independent X client sees the requested geometry.
    info = subprocess.run(["xdpyinfo", "-display", body["display"]], capture_output=True, text=True, timeout=10)
    assert "1024x768 pixels" in info.stdout
    # openbox reads its configuration from the desktop HOME under the state directory.
    assert (srv.state_dir / "home" / ".config" / "openbox" / "rc.xml").is_file()
    assert api.get("/v1/desktop/display/info").json() == {
        "display": body["display"],
        "resolution": {"width": 1024, "height": 768, "dpi": 110, "maxWidth": 2560, "maxHeight": 1600}}
    # Xvfb and openbox appear in the process registry, owned by the desktop.
    listed = api.get("/v1/processes", params={"owner": "desktop"}).json()["processes"]
    assert {p["pid"] for p in listed if p["status"] == "running"} >= {child_pid(body, "Xvfb"),
                                                                     child_pid(body, "openbox")}
    log = Path(body["runtimeLogPath"]).read_text()
    assert "starting desktop runtime" in log and f"desktop runtime active on {body['display']}" in log


def test_start_while_active_is_idempotent_but_refuses_another_size(api: httpx.Client) -> None:
    first = api.post("/v1/desktop/start", json={"displayNum": 140}).json()
    again = api.post("/v1/desktop/start", json={})
    assert again.status_code == 200 and again.json()["display"] == first["display"]
    resized = api.post("/v1/desktop/start", json={"width": 800, "height": 600})
    problem = assert_problem(resized, 409)
    assert "1440" in problem["detail"] and "stop" in problem["detail"]


def test_windows_appear_in_status(api: httpx.Client) -> None:
    display = api.post("/v1/desktop/start", json={"displayNum": 140}).json()["display"]
    env = dict(os.environ, DISPLAY=display)
    term = subprocess.Popen(["xterm", "-T", "status-probe", "-geometry", "40x10+30+40"], env=env)
    try:
        deadline = time.monotonic() + 10
        windows: list[dict] = []
        while time.monotonic() < deadline:
            windows = api.get("/v1/desktop/status").json().get("windows", [])
            if any(w["title"] == "status-probe" for w in windows):
                break
            time.sleep(0.05)
        probe = next(w for w in windows if w["title"] == "status-probe")
        assert probe["width"] > 100 and probe["height"] > 50 and probe["id"].isdigit()
        assert probe["pid"] == term.pid
        xwininfo = subprocess.run(["xwininfo", "-display", display, "-id", probe["id"]],
                                  capture_output=True, text=True, timeout=10).stdout
        assert f"Absolute upper-left X:  {probe['x']}" in xwininfo
        assert f"Absolute upper-left Y:  {probe['y']}" in xwininfo
        assert f"Width: {probe['width']}" in xwininfo
    finally:
        term.kill()
        term.wait()


def test_starting_is_observable_and_status_answers_during_start(api: httpx.Client, srv: ServerProcess) -> None:
    seen: list[str] = []
    result: list[httpx.Response] = []

    def start() -> None:
        with srv.client() as other:
            result.append(other.post("/v1/desktop/start", json={"displayNum": 140}))

    thread = threading.Thread(target=start)
    thread.start()
    deadline = time.monotonic() + 15
    while thread.is_alive() and time.monotonic() < deadline:
        seen.append(api.get("/v1/desktop/status").json()["state"])
    thread.join(15)
    assert result and result[0].status_code == 200
    assert "starting" in seen, seen
    # A second start during the transition is refused rather than queued.


def test_sigkill_of_xvfb_recovers_unattended(api: httpx.Client) -> None:
    body = api.post("/v1/desktop/start", json={"displayNum": 140}).json()
    display, old_x, old_wm = body["display"], child_host_pid(body, "Xvfb"), child_host_pid(body, "openbox")
    killed_at = time.monotonic()
    os.kill(old_x, signal.SIGKILL)
    # No request to the server until the display answers again: recovery must not need one.
    recovered = None
    while time.monotonic() - killed_at < 10:
        if not pid_alive(old_x) and x_answers(display):
            recovered = time.monotonic() - killed_at
            break
        time.sleep(0.02)
    assert recovered is not None, "X display did not come back"
    print(f"\nXvfb SIGKILL -> display answering again after {recovered * 1000:.0f} ms")
    status = _wait_for_state(api, "active")
    assert child_host_pid(status, "Xvfb") != old_x and child_host_pid(status, "openbox") != old_wm
    assert status["display"] == display
    assert status["restartCount"] >= 1
    assert status["lastExit"]["process"] in ("Xvfb", "openbox")


def test_sigkill_of_openbox_recovers_unattended(api: httpx.Client) -> None:
    body = api.post("/v1/desktop/start", json={"displayNum": 140}).json()
    old_wm = child_host_pid(body, "openbox")
    starter = parent_pid(old_wm)  # the desktop's init in its sandbox (the server itself without one)
    os.kill(old_wm, signal.SIGKILL)
    deadline = time.monotonic() + 10
    new_wm = None
    while time.monotonic() < deadline and new_wm is None:
        new_wm = _wm_pid_from_proc(old_wm, starter)
        time.sleep(0.02)
    assert new_wm is not None, "openbox was not restarted without a request"
    status = _wait_for_state(api, "active")
    assert child_host_pid(status, "openbox") == new_wm
    # lastExit names the process as the API did (the desktop's own pid).
    assert status["lastExit"] == {**status["lastExit"], "process": "openbox", "pid": child_pid(body, "openbox"),
                                  "signal": 9}


def test_repeated_crashes_end_in_failed_with_last_error(api: httpx.Client) -> None:
    body = api.post("/v1/desktop/start", json={"displayNum": 140}).json()
    deadline = time.monotonic() + 20
    status = body
    while time.monotonic() < deadline:
        status = api.get("/v1/desktop/status").json()
        if status["state"] == "failed":
            break
        wm = next((p for p in status["processes"] if p["name"] == "openbox" and p["running"]), None)
        if wm:
            with contextlib.suppress(ProcessLookupError):  # it crashed (was killed) after the status was read
                os.kill(host_pid(wm), signal.SIGKILL)
        time.sleep(0.05)
    assert status["state"] == "failed", status
    assert status["lastError"]["code"] == "desktop_runtime_failed"
    assert "openbox" in status["lastError"]["message"]
    assert_problem(api.get("/v1/desktop/windows"), 503, "desktop_runtime_failed")
    # A new start recovers from `failed`.
    assert api.post("/v1/desktop/start", json={"displayNum": 140}).json()["state"] == "active"


def squat_a_display(first: int) -> tuple[int, subprocess.Popen[bytes]]:
    """An X server of this test's own on the first number from `first` that it gets (a server of a test running
    beside this one may hold some): its number and its process."""
    for number in range(first, first + 20):
        squatter = subprocess.Popen(["Xvfb", f":{number}", "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while squatter.poll() is None and not x_answers(f":{number}") and time.monotonic() < deadline:
            time.sleep(0.05)
        if squatter.poll() is None and x_answers(f":{number}"):
            return number, squatter
        squatter.kill()
        squatter.wait()
    raise AssertionError(f"no display from :{first} to :{first + 19} could be taken")


def test_display_is_chosen_when_the_requested_one_is_taken(api: httpx.Client) -> None:
    number, squatter = squat_a_display(150)
    try:
        body = api.post("/v1/desktop/start", json={"displayNum": number}).json()
        # The next free number up, unless a desktop of a test running beside this one holds it.
        assert body["state"] == "active" and int(body["display"].removeprefix(":")) > number, body
        assert squatter.poll() is None
    finally:
        squatter.kill()
        squatter.wait()


def test_state_dir_from_the_request_is_honoured(api: httpx.Client, tmp_path: Path) -> None:
    state = tmp_path / "custom-state"
    body = api.post("/v1/desktop/start", json={"stateDir": str(state), "displayNum": 140}).json()
    assert body.get("state") == "active", body
    assert body["runtimeLogPath"] == str(state / "desktop-runtime.log")
    assert (state / "home" / ".config" / "openbox" / "rc.xml").is_file()
    assert (state / "recordings").is_dir()
    user_rc = state / "home" / ".config" / "openbox" / "rc.xml"
    user_rc.write_text(user_rc.read_text().replace("<number>1</number>", "<number>1</number><!-- mine -->"))
    api.post("/v1/desktop/stop")
    api.post("/v1/desktop/start", json={"stateDir": str(state), "displayNum": 140})
    assert "<!-- mine -->" in user_rc.read_text(), "a user's rc.xml must never be overwritten"


def test_stop_stops_everything_the_desktop_started(api: httpx.Client, srv: ServerProcess, tmp_path: Path) -> None:
    home = srv.state_dir / "home"
    autostart = home / ".config" / "openbox" / "autostart"
    autostart.parent.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "autostart-ran"  # a folder the desktop shares: the rest of the state directory is hidden
    # A daemon that double-forks out of openbox's process group.
    autostart.write_text(f"setsid sh -c 'echo $$ > {marker}; exec sleep 600' &\n")
    try:
        body = api.post("/v1/desktop/start", json={"displayNum": 140}).json()
        pids = [host_pid(p) for p in body["processes"]]
        deadline = time.monotonic() + 10
        while not (marker.exists() and marker.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.05)
        # `$$` is its pid in the desktop's pid namespace (Xvfb's); /proc tells which host process that is.
        daemon = in_namespace_of(child_host_pid(body, "Xvfb"), int(marker.read_text()))
        assert daemon is not None and pid_alive(daemon)
        stopped = api.post("/v1/desktop/stop").json()
        assert stopped["state"] == "inactive" and stopped["processes"] == []
        for absent in ("display", "resolution", "startedAt"):
            assert absent not in stopped
        time.sleep(0.2)
        assert not any(pid_alive(p) for p in pids)
        assert not pid_alive(daemon)
        assert api.post("/v1/desktop/stop").json()["state"] == "inactive"  # no-op
    finally:
        autostart.unlink()


def test_actions_before_start_are_409_inactive(api: httpx.Client) -> None:
    api.post("/v1/desktop/stop")
    problem = assert_problem(api.get("/v1/desktop/display/info"), 409, "desktop_runtime_inactive")
    assert problem["detail"] == "Desktop runtime has not been started"
    assert problem["type"] == "urn:sandbox-agent:error:desktop_runtime_inactive"


@pytest.mark.parametrize(("body", "field"), [
    ({"width": 0}, "width"), ({"height": -1}, "height"), ({"dpi": 0}, "dpi"), ({"displayNum": 0}, "displayNum"),
    ({"streamFrameRate": 0}, "streamFrameRate"), ({"recordingFps": 61}, "recordingFps"),
    ({"webrtcPortRange": "abc"}, "webrtcPortRange"), ({"streamVideoCodec": "gif"}, "streamVideoCodec"),
    ({"stateDir": "relative/dir"}, "stateDir"), ({"width": 100000}, "width"),
])
def test_start_validates_every_field(api: httpx.Client, body: dict, field: str) -> None:
    problem = assert_problem(api.post("/v1/desktop/start", json=body), 400, "desktop_invalid_action")
    assert problem["errors"][0]["field"] == field  # type: ignore[index]


def _wait_for_state(api: httpx.Client, state: str, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = api.get("/v1/desktop/status").json()
        if status["state"] == state or time.monotonic() > deadline:
            assert status["state"] == state, status
            return status  # type: ignore[no-any-return]
        time.sleep(0.02)


def _wm_pid_from_proc(old: int, starter: int) -> int | None:
    """A new openbox child of `starter` (the host pid that started the killed one) other than `old`, found
    through /proc (not through the API)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != old:
            try:
                if (entry / "comm").read_text().strip() == "openbox" and parent_pid(int(entry.name)) == starter \
                        and pid_alive(int(entry.name)):
                    return int(entry.name)
            except (OSError, ValueError, IndexError):
                continue
    return None


def test_missing_dependencies_are_reported_with_the_install_command(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("Xvfb", "xkbcomp", "xdg-open"):  # openbox left out on purpose
        (bin_dir / tool).symlink_to(shutil.which(tool) or "/bin/false")
    server = launch_server(tmp_path, env={"PATH": str(bin_dir)})
    try:
        with server.client() as api:
            status = api.get("/v1/desktop/status").json()
            assert status["state"] == "install_required"
            assert status["missingDependencies"] == ["openbox"]
            assert status["installCommand"] == "sandbox-desktop install desktop --yes"
            assert status["lastError"]["code"] == "desktop_dependencies_missing"
            assert "openbox" in status["lastError"]["message"]
            problem = assert_problem(api.post("/v1/desktop/start", json={}), 503, "desktop_dependencies_missing")
            assert problem["missingDependencies"] == ["openbox"]
            assert problem["installCommand"] == "sandbox-desktop install desktop --yes"
            assert_problem(api.get("/v1/desktop/windows"), 503, "desktop_dependencies_missing")
    finally:
        server.stop()
