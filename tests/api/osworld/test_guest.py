"""A desktop's OSWorld guest API (docs/osworld.md), called with the request shapes of OSWorld's harness
(`desktop_env/controllers/python.py` and `setup.py`): on a real server and real sandboxed desktops, each guest
acting in its own desktop only, its port reported and closed with it."""

from __future__ import annotations

import io
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.conftest import ServerProcess, launch_server, wait_for

SMALL = {"width": 640, "height": 400}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = launch_server(tmp_path_factory.mktemp("osworld"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api(srv: ServerProcess) -> Iterator[httpx.Client]:
    with srv.client(timeout=60) as client:
        yield client


def create(api: httpx.Client, **extra: Any) -> dict[str, Any]:
    created = api.post("/v1/desktops", json={**SMALL, **extra})
    assert created.status_code == 201, created.text
    return dict(created.json())


@pytest.fixture(scope="module")
def desktops(api: httpx.Client) -> Iterator[list[dict[str, Any]]]:
    made = [create(api, osworld=True) for _ in range(2)]
    yield made
    for desktop in made:
        api.delete(f"/v1/desktops/{desktop['id']}")


@pytest.fixture(scope="module")
def guest(desktops: list[dict[str, Any]]) -> Iterator[httpx.Client]:
    """The first desktop's guest, as the harness reaches it: its base URL, no token."""
    with httpx.Client(base_url=desktops[0]["osworld"]["url"], timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def other(desktops: list[dict[str, Any]]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=desktops[1]["osworld"]["url"], timeout=60) as client:
        yield client


def execute(guest: httpx.Client, command: str | list[str], shell: bool = False) -> dict[str, Any]:
    answer = guest.post("/execute", json={"command": command, "shell": shell})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_the_port_is_reported_and_each_desktop_has_its_own(api: httpx.Client, desktops: list[dict[str, Any]]) -> None:
    ports = {d["osworld"]["port"] for d in desktops}
    assert len(ports) == 2
    for desktop in desktops:
        assert desktop["osworld"]["url"] == f"http://127.0.0.1:{desktop['osworld']['port']}"
        assert api.get(f"/v1/desktops/{desktop['id']}").json()["osworld"] == desktop["osworld"]
    assert create_without(api) is None


def create_without(api: httpx.Client) -> Any:
    desktop = create(api)
    try:
        return desktop.get("osworld")
    finally:
        api.delete(f"/v1/desktops/{desktop['id']}")


def test_screen_platform_cursor_and_screenshot(guest: httpx.Client) -> None:
    assert guest.get("/platform").text == "Linux"
    assert guest.post("/screen_size").json() == {"width": 640, "height": 400}
    x, y = guest.get("/cursor_position").json()
    assert 0 <= x < 640 and 0 <= y < 400
    shot = guest.get("/screenshot")
    assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(shot.content)).size == (640, 400)


def test_a_command_runs_as_the_desktops_user_in_its_home(api: httpx.Client, guest: httpx.Client, other: httpx.Client,
                                                         desktops: list[dict[str, Any]]) -> None:
    uid = execute(guest, ["id", "-u"])
    assert uid["status"] == "success" and uid["returncode"] == 0 and uid["error"] == ""
    own = api.post(f"/v1/desktops/{desktops[0]['id']}/processes/run", json={"command": "id", "args": ["-u"]})
    # The desktop's own user (as its process API runs commands), not the server's root.
    assert uid["output"] == own.json()["stdout"] and int(uid["output"]) != 0
    assert execute(guest, ["id", "-u"])["output"] != execute(other, ["id", "-u"])["output"]
    where = execute(guest, "echo $HOME; pwd; echo $DISPLAY", shell=True)["output"].split()
    assert where[0] == where[1] and where[0].endswith(f"{desktops[0]['id']}/home")
    assert where[2] == desktops[0]["display"]
    assert execute(guest, "ls ~/", shell=False)["returncode"] == 0  # `~/` items expand to its HOME, as upstream
    failed = execute(guest, "exit 3", shell=True)
    assert failed["status"] == "success" and failed["returncode"] == 3
    missing = guest.post("/setup/execute", json={"command": ["no-such-command-here"], "shell": False})
    assert missing.status_code == 500 and missing.json()["status"] == "error"


def test_execute_with_verification(guest: httpx.Client) -> None:
    passed = guest.post("/setup/execute_with_verification", json={
        "command": "touch ~/verified.txt", "shell": True,
        "verification": {"command_success": "test -f ~/verified.txt"}, "max_wait_time": 5, "check_interval": 0.2})
    assert passed.status_code == 200, passed.text
    assert passed.json()["verification"] == "passed" and passed.json()["returncode"] == 0
    failed = guest.post("/execute_with_verification", json={
        "command": ["true"], "verification": {"window_exists": "no-such-window"}, "max_wait_time": 1,
        "check_interval": 0.2})
    assert failed.status_code == 500
    assert failed.json()["status"] == "verification_failed" and failed.json()["verification"] == "failed"
    plain = guest.post("/execute_with_verification", json={"command": ["echo", "hi"]}).json()
    assert plain == {"status": "success", "output": "hi\n", "error": "", "returncode": 0}


def test_commands_see_only_their_own_desktops_processes(guest: httpx.Client, other: httpx.Client) -> None:
    launched = other.post("/setup/launch", json={"command": "sleep 4321", "shell": True})
    assert launched.status_code == 200 and "launched successfully" in launched.text
    wait_for(lambda: execute(other, ["pgrep", "-f", "sleep 4321"])["returncode"] == 0, "the sleep in its desktop")
    assert execute(guest, ["pgrep", "-f", "sleep 4321"])["returncode"] == 1
    execute(other, ["pkill", "-f", "sleep 4321"])


def test_run_python_and_bash_script(guest: httpx.Client) -> None:
    done = guest.post("/run_python", json={"code": "import os, sys\nprint(os.getcwd())\nprint('e', file=sys.stderr)"})
    body = done.json()
    assert done.status_code == 200 and body["status"] == "success" and body["return_code"] == 0
    assert body["output"].strip().endswith("/home") and body["error"] == "e\n" and body["need_more"] is False
    failed = guest.post("/run_python", json={"code": "raise SystemExit(2)"}).json()
    assert failed["status"] == "error" and failed["return_code"] == 2 and "exited with code 2" in failed["error"]
    assert guest.post("/run_python", json={}).status_code == 400

    script = guest.post("/run_bash_script", json={"script": "pwd; echo err >&2; exit 4", "timeout": 20,
                                                  "working_dir": "/tmp"})
    assert script.status_code == 200, script.text
    assert script.json() == {"status": "error", "output": "/tmp\nerr\n", "error": "", "returncode": 4}
    ok = guest.post("/run_bash_script", json={"script": "echo $BASH_VERSION | cut -c1"}).json()
    assert ok["status"] == "success" and ok["returncode"] == 0 and ok["output"].strip().isdigit()
    assert guest.post("/run_bash_script", json={}).status_code == 400
    nowhere = guest.post("/run_bash_script", json={"script": "true", "working_dir": "/no/such/dir"})
    assert nowhere.status_code == 400 and nowhere.json()["returncode"] == -1
    slow = guest.post("/run_bash_script", json={"script": "sleep 5", "timeout": 1})
    assert slow.status_code == 500 and "timed out after 1 seconds" in slow.json()["output"]


def test_files_upload_read_list_and_download(guest: httpx.Client, other: httpx.Client) -> None:
    uploaded = guest.post("/setup/upload", data={"file_path": "~/Desktop/notes/a.txt"},
                          files={"file_data": ("a.txt", b"hello osworld")})
    assert uploaded.status_code == 200 and uploaded.text == "File Uploaded: 13 bytes"
    read = guest.post("/file", data={"file_path": "~/Desktop/notes/a.txt"})
    assert read.status_code == 200 and read.content == b"hello osworld"
    assert "attachment" in read.headers["content-disposition"]
    assert guest.post("/file", data={"file_path": "~/nope.txt"}).status_code == 404
    assert guest.post("/file", data={}).status_code == 400
    assert guest.post("/setup/upload", data={"file_path": "~/x"}).status_code == 400
    home = execute(guest, "echo $HOME", shell=True)["output"].strip()
    tree = guest.post("/list_directory", json={"path": f"{home}/Desktop"}).json()["directory_tree"]
    assert tree == {"type": "directory", "name": "Desktop", "children": [
        {"type": "directory", "name": "notes", "children": [{"type": "file", "name": "a.txt"}]}]}
    assert guest.post("/list_directory", json={"path": f"{home}/Desktop/notes/a.txt"}).status_code == 400
    assert guest.post("/list_directory", json={}).status_code == 400
    assert guest.post("/desktop_path").json() == {"desktop_path": f"{home}/Desktop"}
    # The other desktop has its own HOME: the file is not there.
    assert other.post("/file", data={"file_path": "~/Desktop/notes/a.txt"}).status_code == 404

    # A file served inside the desktop's own network namespace, on its loopback: the download runs there too.
    guest.post("/setup/launch", json={"command": ["python3", "-m", "http.server", "8765", "--bind", "127.0.0.1",
                                                  "--directory", f"{home}/Desktop/notes"]})
    wait_for(lambda: execute(guest, ["python3", "-c", "import urllib.request as u; "
                                     "u.urlopen('http://127.0.0.1:8765/a.txt')"])["returncode"] == 0,
             "the desktop's file server")
    fetched = guest.post("/setup/download_file", json={"url": "http://127.0.0.1:8765/a.txt", "path": "~/dl/b.txt"})
    assert fetched.status_code == 200 and fetched.text == "File downloaded successfully: 13 bytes"
    assert guest.post("/file", data={"file_path": "~/dl/b.txt"}).content == b"hello osworld"
    # The other desktop's loopback is its own: the same URL reaches nothing from there.
    failed = other.post("/setup/download_file", json={"url": "http://127.0.0.1:8765/a.txt", "path": "~/b.txt"})
    assert failed.status_code == 500 and failed.text.startswith("Failed to download")
    assert guest.post("/setup/download_file", json={"url": "http://127.0.0.1:8765/a.txt"}).status_code == 400
    execute(guest, ["pkill", "-f", "http.server 8765"])


def test_windows_launch_open_activate_size_and_close(guest: httpx.Client) -> None:
    titles = lambda: execute(guest, "xdotool search --name guest- getwindowname %@", shell=True)["output"]  # noqa: E731
    opened = guest.post("/setup/open_file", json={"path": "xterm", "timeout_seconds": 20})
    assert opened.status_code == 200, opened.text
    assert guest.post("/setup/launch", json={"command": ["xterm", "-T", "guest-two"]}).status_code == 200
    wait_for(lambda: "guest-two" in titles(), "the launched xterm")
    assert guest.post("/setup/activate_window", json={"window_name": "GUEST-TWO"}).status_code == 200
    # Focus is the window manager's to give: the route waits for it a while, a loaded machine's openbox may take longer.
    wait_for(lambda: execute(guest, "xdotool getactivewindow getwindowname", shell=True)["output"].strip()
             == "guest-two", "the window manager to activate guest-two")
    # Lenient as upstream: nothing matching is still a 200; no name is a 400.
    assert guest.post("/setup/activate_window", json={"window_name": "nothing-like-it"}).status_code == 200
    assert guest.post("/setup/activate_window", json={}).status_code == 400
    size = guest.post("/window_size", data={"app_class_name": "XTerm"}).json()
    assert size["width"] > 0 and size["height"] > 0
    assert guest.post("/window_size", data={}).status_code == 400
    closed = guest.post("/setup/close_window", json={"window_name": "guest-two", "strict": True})
    assert closed.status_code == 200 and closed.text == "Window closed successfully."
    wait_for(lambda: "guest-two" not in titles(), "the closed window gone")
    assert guest.post("/setup/close_window", json={"window_name": "xterm", "by_class": True}).status_code == 200
    missing = guest.post("/setup/open_file", json={"path": "~/no-such-file.odt", "timeout_seconds": 1})
    assert missing.status_code == 404 and missing.text.startswith("Application/file not found")


ST = "{https://accessibility.ubuntu.example.org/ns/state}"
CP = "{https://accessibility.ubuntu.example.org/ns/component}"


def test_accessibility_tree_and_terminal(guest: httpx.Client) -> None:
    """A GTK dialog's tree in upstream's XML: its application, its buttons by role and name, their states
    and screen boxes, its entry's text."""
    launched = guest.post("/setup/launch", json={"command": ["zenity", "--entry", "--title", "guest-zen",
                                                             "--text", "Your name", "--entry-text", "Ada"]})
    assert launched.status_code == 200

    def tree() -> ET.Element | None:
        root = ET.fromstring(guest.get("/accessibility").json()["AT"])
        return root if root.find(".//push-button[@name='OK']") is not None else None

    root = wait_for(tree, "zenity's OK button in the tree", timeout=20)
    assert root.tag == "desktop-frame"
    app = next(a for a in root.findall("application") if a.find(".//push-button[@name='OK']") is not None)
    assert app.get("name") == "zenity"
    ok = app.find(".//push-button[@name='OK']")
    assert ok is not None and ok.get(f"{ST}showing") == "true" and ok.get(f"{ST}enabled") == "true"
    x, y = (int(v) for v in (ok.get(f"{CP}screencoord") or "").strip("()").split(","))
    width, height = (int(v) for v in (ok.get(f"{CP}size") or "").strip("()").split(","))
    assert 0 <= x < 640 and 0 <= y < 400 and width > 0 and height > 0
    entry = next(e for e in app.iter("text") if e.text == "Ada")
    assert entry.get(f"{ST}single_line") == "true" and entry.get(f"{ST}editable") == "true"  # pyatspi's names
    assert guest.get("/terminal").json() == {"output": None, "status": "success"}
    guest.post("/setup/close_window", json={"window_name": "guest-zen"})


def test_recording_and_wallpaper(guest: httpx.Client) -> None:
    assert guest.post("/end_recording").status_code == 400
    started = guest.post("/start_recording")
    assert started.status_code == 200 and started.json()["status"] == "success"
    assert guest.post("/start_recording").status_code == 400
    time.sleep(1)
    video = guest.post("/end_recording")
    assert video.status_code == 200 and video.content[4:8] == b"ftyp"

    png = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(png, "PNG")
    guest.post("/setup/upload", data={"file_path": "~/wall.png"}, files={"file_data": ("wall.png", png.getvalue())})
    assert guest.post("/setup/change_wallpaper", json={"path": "~/wall.png"}).status_code == 200
    assert guest.post("/wallpaper").content == png.getvalue()
    assert guest.post("/setup/change_wallpaper", json={"path": "~/none.png"}).status_code == 404
    assert guest.post("/setup/change_wallpaper", json={}).status_code == 400


def test_a_foreign_host_name_is_refused(guest: httpx.Client) -> None:
    """No auth upstream, so no page of another site may reach it by rebinding a name to loopback."""
    assert guest.get("/platform", headers={"Host": "evil.example"}).status_code == 403
    assert guest.get("/platform", headers={"Host": "localhost:1"}).status_code == 200


def test_patch_turns_it_on_and_off_and_delete_closes_it(api: httpx.Client) -> None:
    desktop = create(api)
    base = f"/v1/desktops/{desktop['id']}"
    try:
        on = api.patch(base, json={"osworld": True}).json()["osworld"]
        assert httpx.get(f"{on['url']}/platform").text == "Linux"
        assert api.patch(base, json={"osworld": False}).json().get("osworld") is None
        assert refused(on["port"])
        again = api.patch(base, json={"osworld": True}).json()["osworld"]
        assert httpx.get(f"{again['url']}/platform").text == "Linux"
        # A paused desktop answers in upstream's error shape, and again once resumed.
        assert api.post(f"{base}/pause").status_code == 200
        paused = httpx.post(f"{again['url']}/screen_size")
        assert paused.status_code == 500 and paused.json()["status"] == "error"
        assert api.post(f"{base}/resume").status_code == 200
        assert httpx.post(f"{again['url']}/screen_size").json() == {"width": 640, "height": 400}
    finally:
        assert api.delete(base).status_code == 204
    assert refused(again["port"])


def test_a_desktop_may_want_a_token_on_its_guest(srv: ServerProcess, api: httpx.Client,
                                                 desktops: list[dict[str, Any]]) -> None:
    desktop = create(api, osworld=True, osworldToken=True)
    base = f"/v1/desktops/{desktop['id']}"
    url = desktop["osworld"]["url"]

    def token(desktop_id: str, role: str) -> str:
        return str(api.post(f"/v1/desktops/{desktop_id}/tokens", json={"role": role}).json()["token"])

    def answer(given: str | None) -> int:
        headers = {"Authorization": f"Bearer {given}"} if given is not None else {}
        return httpx.get(f"{url}/platform", headers=headers).status_code

    try:
        assert desktop["osworld"]["tokenRequired"] is True
        assert answer(None) == 401 and answer("wrong") == 401
        assert answer(srv.token) == 200
        assert answer(token(desktop["id"], "control")) == 200
        assert answer(token(desktop["id"], "view")) == 401  # a viewer may not run commands
        assert answer(token(desktops[0]["id"], "control")) == 401  # another desktop's
        assert api.patch(base, json={"osworldToken": False}).json()["osworld"]["tokenRequired"] is False
        assert answer(None) == 200
    finally:
        api.delete(base)
