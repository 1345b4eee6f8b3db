"""Filling native file dialogs: GTK 3's file chooser in zenity (open and save) and the one Chromium opens for a
page's `<input type=file>`. What the apps received is read from them: zenity prints the chosen path, the page
shows the chosen file's name and text (read through the accessibility tree)."""

from __future__ import annotations

import base64
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import assert_problem, wait_for
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 713, "width": 1280, "height": 800}
FILL = "/v1/desktop/file-dialog"

pytestmark = pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                                reason="needs zenity and chromium (scripts/setup.sh test installs them)")

PAGE = """<!doctype html><html><head><title>Upload form</title></head><body style="font: 16px sans-serif">
<input type="file" id="pick" style="position:absolute;left:40px;top:40px;width:300px;height:40px">
<p id="out" style="position:absolute;left:40px;top:150px">no file chosen</p>
<script>
document.getElementById('pick').addEventListener('change', async e => {
  const f = e.target.files[0];
  document.getElementById('out').textContent = 'chose ' + f.name + ' saying ' + (await f.text()).trim();
});
</script></body></html>"""


def output_of(api: httpx.Client, process_id: str) -> str:
    entries = api.get(f"/v1/processes/{process_id}/logs", params={"stream": "stdout"}).json()["entries"]
    return b"".join(base64.b64decode(e["data"]) if e.get("encoding") == "base64" else e["data"].encode()
                    for e in entries).decode()


def find_text(api: httpx.Client, text: str) -> list[dict[str, Any]]:
    response = api.post("/v1/desktop/accessibility/find", json={"nameContains": text})
    assert response.status_code == 200, response.text
    elements: list[dict[str, Any]] = response.json()["elements"]
    return elements


@pytest.fixture
def zenity(api: httpx.Client) -> Iterator[Callable[..., dict[str, Any]]]:
    started: list[str] = []

    def run(*args: str) -> dict[str, Any]:
        launched = api.post("/v1/desktop/launch", json={"app": "zenity", "wait": True, "waitTimeoutMs": 20000,
                                                       "args": ["--file-selection", *args]})
        assert launched.status_code == 200, launched.text
        started.append(launched.json()["processId"])
        body: dict[str, Any] = launched.json()
        return body

    yield run
    for process_id in started:
        api.post(f"/v1/processes/{process_id}/kill")


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    folder = tmp_path / "my files"
    folder.mkdir()
    (folder / "report.txt").write_text("quarterly numbers\n")
    (folder / "report.txt.bak").write_text("older\n")  # GTK's inline completion would pick this one
    return folder / "report.txt"


def test_gtk_open_dialog_chooses_the_path(api: httpx.Client, zenity: Callable[..., dict[str, Any]],
                                          a_file: Path) -> None:
    launched = zenity()
    filled = api.post(FILL, json={"path": str(a_file)})
    assert filled.status_code == 200, filled.text
    body = filled.json()
    assert body["windowId"] == launched["windowId"] and body["closed"] is True and body["path"] == str(a_file)
    assert body["app"].lower() == "zenity"
    wait_for(lambda: output_of(api, launched["processId"]).strip() == str(a_file), "zenity to print the path")


def test_gtk_save_dialog_takes_a_new_path_and_a_named_window(api: httpx.Client,
                                                             zenity: Callable[..., dict[str, Any]],
                                                             a_file: Path) -> None:
    launched = zenity("--save", "--title=Keep it")  # a title that says nothing: found by windowId
    new = a_file.parent / "new name ✓.txt"
    filled = api.post(FILL, json={"path": str(new), "windowId": launched["windowId"]})
    assert filled.status_code == 200, filled.text
    wait_for(lambda: output_of(api, launched["processId"]).strip() == str(new), "zenity to print the new path")


def test_paths_are_the_desktops_own(api: httpx.Client, zenity: Callable[..., dict[str, Any]]) -> None:
    """`~` is the desktop's HOME and a path is found in its view of the files, where its apps open it: the
    machine's /tmp (hidden from a sandboxed desktop) is not (docs/files-into-apps.md)."""
    written = api.put("/v1/desktop/fs/file", params={"path": "~/picked/for dialog.txt"}, content=b"mine\n")
    assert written.status_code == 200, written.text
    in_home = written.json()["path"]
    machine_only = Path(f"/tmp/only-the-machine-{uuid.uuid4().hex}/file.txt")  # its folder too: a save
    machine_only.parent.mkdir()                                                  # dialog takes a new file
    machine_only.write_text("not the desktop's\n")
    try:
        sandboxed = api.get("/v1/desktop/status").json().get("sandbox", {}).get("isolated")
        assert sandboxed or os.geteuid() != 0, "as root, the tests' desktops are sandboxed"
        if sandboxed:
            problem = assert_problem(api.post(FILL, json={"path": str(machine_only)}), 422, "path_not_found")
            assert problem["errors"][0]["field"] == "path"  # type: ignore[index]
            problem = assert_problem(api.post("/v1/desktop/drop", json={"paths": [str(machine_only)], "x": 5,
                                                                         "y": 5}), 422, "path_not_found")
            assert problem["errors"][0]["field"] == "paths[0]"  # type: ignore[index]
    finally:
        shutil.rmtree(machine_only.parent)
    launched = zenity()
    filled = api.post(FILL, json={"path": "~/picked/for dialog.txt"})
    assert filled.status_code == 200, filled.text
    assert filled.json()["path"] == in_home
    wait_for(lambda: output_of(api, launched["processId"]).strip() == in_home, "zenity to print the path")


def test_chromium_file_input_gets_the_file(api: httpx.Client, tmp_path: Path, a_file: Path) -> None:
    with desktop_page(api, tmp_path, "upload.html", PAGE) as launched:
        wait_for(lambda: find_text(api, "no file chosen"), "the page to load", 30)
        clicked = api.post("/v1/desktop/accessibility/act", json={
            "element": {"role": "push-button", "nameRegex": "(?i)choose file", "window": launched["windowId"]},
            "action": "click"})
        assert clicked.status_code == 200, clicked.text
        filled = wait_for(lambda: (r := api.post(FILL, json={"path": str(a_file)})).status_code != 404 and r,
                          "the file dialog to open and be filled", 20)
        assert filled.status_code == 200, filled.text
        assert filled.json()["app"].lower().startswith("chromium")
        wait_for(lambda: find_text(api, "chose report.txt saying quarterly numbers"), "the page to read the file")


def test_mistakes_and_missing_dialogs(api: httpx.Client, a_file: Path) -> None:
    problem = assert_problem(api.post(FILL, json={"path": "/no/such/folder/x.txt"}), 422, "path_not_found")
    assert problem["errors"][0]["field"] == "path"  # type: ignore[index]
    assert_problem(api.post(FILL, json={"path": str(a_file)}), 404, "file_dialog_not_found")
    problem = assert_problem(api.post(FILL, json={"path": str(a_file), "windowId": "12345"}), 404,
                             "file_dialog_not_found")
    assert problem["errors"][0]["field"] == "windowId"  # type: ignore[index]
    assert_problem(api.post(FILL, json={"path": str(a_file), "timeoutMs": 5}), 400, "desktop_invalid_action")
    assert_problem(api.post(FILL, json={}), 422, "invalid_request")
