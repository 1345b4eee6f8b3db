"""Trajectories: a recording and its actions exported as a dataset (docs/trajectories.md).

A test window changes colour between actions, so each step's "before" and "after" screens are checked
against what was on the screen, in the exported PNGs, in the Parquet file and through the Hugging Face
`datasets` library.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from desktop.events.action_log import WIRE
from recording.action_track import Tracked
from recording.trajectory import steps
from sandbox_desktop_client import Client
from sandbox_desktop_client.errors import ConflictError
from sandbox_desktop_wire.actions import ActionsRequest
from tests.api.recording.test_recording import PATCH, Painter, close_to, rgb, stop_recording
from tests.clients.cli.test_cli_client import cli
from tests.conftest import ServerProcess, assert_problem

DESKTOP = {"width": 640, "height": 400}
RED, BLUE, GREEN = 0xFF0000, 0x0000FF, 0x00FF00
PAUSE_S = 0.4
"""Between a paint and the next action: the frame source shows it well before."""


def entry(kind: str, t: float, **fields: Any) -> Tracked:
    """A track's entry as the file has it, read back."""
    wire = {"seq": 1, "kind": kind, "t": t, "videoMs": round(t * 1000), "source": "rest", "at": "", **fields}
    return Tracked.from_wire(WIRE.validate_python(wire))


def test_entries_fold_into_the_actions_a_caller_would_write() -> None:
    track = [
        entry("move", 0.1, x=5, y=5), entry("move", 0.2, x=10, y=10), entry("click", 0.3, x=10, y=10,
                                                                            button="left", count=1),
        entry("key_down", 1.0, keys="a"), entry("key_up", 1.05, keys="a"),
        entry("key_down", 2.0, keys="Shift_L"), entry("key_up", 3.0, keys="Shift_L"),
        entry("mouse_down", 4.0, x=1, y=2, button="left"), entry("mouse_up", 4.1, x=1, y=2, button="left"),
        entry("type", 5.0, text="abc", length=3), entry("press", 6.0, keys="ctrl+s"),
        entry("scroll", 7.0, x=3, y=4, deltaX=0, deltaY=2), entry("move", 8.0, x=50, y=60),
    ]
    result = steps(track, 9000)
    assert [s.action for s in result] == [
        {"type": "click", "x": 10, "y": 10, "button": "left"},
        {"type": "key", "keys": "a"},
        {"type": "hold_key", "keys": "Shift_L", "durationMs": 1000},
        {"type": "click", "x": 1, "y": 2, "button": "left"},
        {"type": "type", "text": "abc"},
        {"type": "key", "keys": "ctrl+s"},
        {"type": "scroll", "x": 3, "y": 4, "deltaX": 0, "deltaY": 2},
        {"type": "move", "x": 50, "y": 60},  # a move that leads nowhere is a step of its own
    ]
    # Every action is the batch format, as POST /v1/desktop/actions takes it.
    ActionsRequest.model_validate({"actions": [s.action for s in result]})
    # Each step sees the screen just before it and just before the next one.
    assert [(s.before_ms, s.after_ms) for s in result[:2]] == [(299, 999), (999, 1999)]
    assert result[-1].after_ms == 8999
    assert len(steps(track, 9000, keep_moves=True)) == len(result) + 2


@pytest.fixture(scope="module")
def painter(api: httpx.Client) -> Iterator[Painter]:
    p = Painter(api.get("/v1/desktop/status").json()["display"])
    yield p
    p.close()


@pytest.fixture(scope="module")
def recorded(api: httpx.Client, painter: Painter) -> dict[str, Any]:
    """A recording of three actions, the patch red before the first, blue after it, green after the second."""
    painter.fill(RED)
    assert api.post("/v1/desktop/recording/start", json={}).status_code == 200
    time.sleep(PAUSE_S)
    assert api.post("/v1/desktop/mouse/click", json={"x": 600, "y": 380}).status_code == 200
    painter.fill(BLUE)
    time.sleep(PAUSE_S)
    assert api.post("/v1/desktop/keyboard/press", json={"key": "Escape"}).status_code == 200
    painter.fill(GREEN)
    time.sleep(PAUSE_S)
    assert api.post("/v1/desktop/mouse/move", json={"x": 620, "y": 390}).status_code == 200
    time.sleep(PAUSE_S)
    return stop_recording(api)


def patch_colour(image: Image.Image) -> tuple[int, int, int]:
    x, y, w, h = PATCH
    pixel = image.convert("RGB").getpixel((x + w // 2, y + h // 2))
    assert isinstance(pixel, tuple)
    return pixel[0], pixel[1], pixel[2]


def export(api: httpx.Client, rec_id: str, **params: Any) -> zipfile.ZipFile:
    response = api.get(f"/v1/desktop/recordings/{rec_id}/trajectory", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(response.content))


def test_steps_and_their_screens(api: httpx.Client, recorded: dict[str, Any]) -> None:
    archive = export(api, recorded["id"])
    rows = [json.loads(line) for line in archive.read("steps.jsonl").decode().splitlines()]
    assert [r["action"] for r in rows] == [
        {"type": "click", "x": 600, "y": 380, "button": "left"},
        {"type": "key", "keys": "Escape"},
        {"type": "move", "x": 620, "y": 390},
    ]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["source"] == "rest" and r["at"] for r in rows)
    assert rows[0]["timestampMs"] < rows[1]["timestampMs"] < rows[2]["timestampMs"] <= recorded["durationMs"]
    assert rows[0]["after"] == rows[1]["before"], "a step's after is the next one's before: stored once"
    expected = [(RED, BLUE), (BLUE, GREEN), (GREEN, GREEN)]
    for row, (before, after) in zip(rows, expected, strict=True):
        for key, colour in (("before", before), ("after", after)):
            image = Image.open(io.BytesIO(archive.read(row[key])))
            assert image.format == "PNG" and image.size == (640, 400)
            assert close_to(patch_colour(image), rgb(colour)), (row["step"], key, patch_colour(image))
    assert len([n for n in archive.namelist() if n.startswith("images/")]) == 4


def test_jpeg_images(api: httpx.Client, recorded: dict[str, Any]) -> None:
    archive = export(api, recorded["id"], imageFormat="jpeg", parquet="false")
    assert "steps.parquet" not in archive.namelist()
    first = json.loads(archive.read("steps.jsonl").decode().splitlines()[0])
    image = Image.open(io.BytesIO(archive.read(first["before"])))
    assert image.format == "JPEG" and close_to(patch_colour(image), rgb(RED), tolerance=30)


def test_parquet_loads_with_datasets(api: httpx.Client, recorded: dict[str, Any], tmp_path: Any) -> None:
    datasets = pytest.importorskip("datasets")  # installed by the test extra: skipped only outside it
    archive = export(api, recorded["id"], parquet="true")
    archive.extract("steps.parquet", tmp_path)
    data = datasets.load_dataset("parquet", data_files=str(tmp_path / "steps.parquet"), split="train")
    assert data.num_rows == 3
    assert json.loads(data[0]["action"])["type"] == "click"
    before, after = data[0]["before"], data[0]["after"]
    assert isinstance(before, Image.Image) and before.size == (640, 400)
    assert close_to(patch_colour(before), rgb(RED)) and close_to(patch_colour(after), rgb(BLUE))


def test_mistakes(api: httpx.Client, recorded: dict[str, Any]) -> None:
    assert_problem(api.get("/v1/desktop/recordings/rec_999/trajectory"), 404)
    bad = api.get(f"/v1/desktop/recordings/{recorded['id']}/trajectory", params={"imageFormat": "gif"})
    assert bad.status_code in (400, 422) and "imageFormat" in bad.text
    assert api.post("/v1/desktop/recording/start", json={}).status_code == 200
    try:
        busy = api.get("/v1/desktop/recordings", params={}).json()["recordings"][-1]["id"]
        assert_problem(api.get(f"/v1/desktop/recordings/{busy}/trajectory"), 409)
    finally:
        stop_recording(api)


def test_client_and_cli(srv: ServerProcess, recorded: dict[str, Any], tmp_path: Any) -> None:
    with Client(srv.url, token=srv.token) as client:
        path = client.download_trajectory(recorded["id"], tmp_path / "t.zip", image_format="jpeg", parquet=False)
        with zipfile.ZipFile(path) as archive:
            assert "steps.jsonl" in archive.namelist() and "steps.parquet" not in archive.namelist()
            assert all(n.endswith(".jpg") for n in archive.namelist() if n.startswith("images/"))
        client.start_recording()
        try:
            with pytest.raises(ConflictError):
                client.download_trajectory(client.recordings()[-1].id, tmp_path / "busy.zip")
            assert not (tmp_path / "busy.zip").exists()
        finally:
            client.stop_recording()
    done = cli(srv, "record", "trajectory", recorded["id"], "-o", str(tmp_path / "cli.zip"), "--no-parquet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "cli.zip")
    with zipfile.ZipFile(tmp_path / "cli.zip") as archive:
        assert len(archive.read("steps.jsonl").decode().splitlines()) == 3
