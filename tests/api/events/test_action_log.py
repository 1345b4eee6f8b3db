"""The action log: every executed action with its source, and a recording's track aligned to video time."""

from __future__ import annotations

import itertools
import re
import time

import httpx

from tests.conftest import ServerProcess, assert_problem

DESKTOP = {"displayNum": 383, "width": 1024, "height": 768}
TOOL = {"type": "computer_20251124", "name": "computer", "display_width_px": 1024, "display_height_px": 768}
FAST = {"quietMs": 50, "timeoutMs": 500}
CUE = re.compile(r"^(\d{2}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2}):(\d{2}):(\d{2})\.(\d{3})$")


def last_seq(api: httpx.Client) -> int:
    entries = api.get("/v1/desktop/actions/log").json()["entries"]
    return int(entries[-1]["seq"]) if entries else 0


def test_every_route_is_logged_in_order_with_its_source(api: httpx.Client) -> None:
    since = last_seq(api)
    assert api.post("/v1/desktop/mouse/click", json={"x": 512, "y": 300}).status_code == 200
    assert api.post("/v1/desktop/keyboard/type", json={"text": "héllo"}).status_code == 200
    batch = api.post("/v1/desktop/actions", json={"actions": [{"type": "click", "x": 40, "y": 50, "button": "right"},
                                                              {"type": "key", "keys": "ctrl+a"}]})
    assert batch.status_code == 200 and "error" not in batch.json(), batch.text
    vendor = api.post("/v1/desktop/anthropic/computer",
                      json={"tool": TOOL, "input": {"action": "left_click", "coordinate": [100, 200]}, "settle": FAST})
    assert vendor.status_code == 200, vendor.text

    entries = api.get("/v1/desktop/actions/log", params={"since": since}).json()["entries"]
    seen = [(e["source"], e["kind"], e.get("x"), e.get("y")) for e in entries]
    assert seen[:4] == [("rest", "click", 512, 300), ("rest", "type", None, None),
                        ("batch", "click", 40, 50), ("batch", "press", None, None)], seen
    assert ("anthropic", "click", 100, 200) in seen[4:], seen
    assert entries[1]["text"] == "héllo" and entries[1]["length"] == 5
    assert entries[2]["button"] == "right" and entries[0]["count"] == 1
    assert entries[3]["keys"].lower().startswith("control")
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(entries))
    assert entries[0]["at"].endswith("+00:00")
    page = api.get("/v1/desktop/actions/log", params={"since": since, "limit": 2}).json()["entries"]
    assert [e["seq"] for e in page] == [entries[0]["seq"], entries[1]["seq"]]
    assert_problem(api.get("/v1/desktop/actions/log", params={"limit": 0}), 400)


def vtt_ms(h: str, m: str, s: str, ms: str) -> int:
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)


def test_a_recording_keeps_its_actions_in_video_time(api: httpx.Client, srv: ServerProcess) -> None:
    before = time.monotonic()
    started = api.post("/v1/desktop/recording/start", json={"fps": 10})
    t_start = (before + time.monotonic()) / 2
    assert started.status_code == 200, started.text
    rec = started.json()["id"]
    try:
        time.sleep(max(0.0, t_start + 1.0 - time.monotonic()))
        t_click = time.monotonic()
        api.post("/v1/desktop/mouse/click", json={"x": 300, "y": 200})
        time.sleep(max(0.0, t_start + 2.0 - time.monotonic()))
        t_type = time.monotonic()
        api.post("/v1/desktop/keyboard/type", json={"text": "a-->b"})
    finally:
        assert api.post("/v1/desktop/recording/stop").status_code == 200
    api.post("/v1/desktop/mouse/move", json={"x": 10, "y": 10})  # after the stop: not in the track

    body = api.get(f"/v1/desktop/recordings/{rec}/actions").json()
    assert body["recordingId"] == rec
    entries = body["entries"]
    assert [e["kind"] for e in entries] == ["click", "type"], entries
    for entry, moment in zip(entries, (t_click, t_type), strict=True):
        assert abs(entry["videoMs"] - (moment - t_start) * 1000) < 300, (entry, moment - t_start)
    assert (srv.state_dir / "recordings" / f"{rec}.actions.jsonl").is_file()

    vtt = api.get(f"/v1/desktop/recordings/{rec}/actions.vtt")
    assert vtt.status_code == 200 and vtt.headers["content-type"].startswith("text/vtt")
    lines = vtt.text.splitlines()
    assert lines[0] == "WEBVTT"
    cues = [CUE.match(line) for line in lines if "-->" in line and CUE.match(line)]
    assert len(cues) == 2, vtt.text
    spans = [(vtt_ms(*c.groups()[:4]), vtt_ms(*c.groups()[4:])) for c in cues if c]
    assert spans[0][0] == entries[0]["videoMs"] and spans[0][1] <= spans[1][0] < spans[1][1]
    assert "click left (300,200)" in vtt.text and '"a->b"' in vtt.text

    assert api.delete(f"/v1/desktop/recordings/{rec}").status_code == 204
    assert not (srv.state_dir / "recordings" / f"{rec}.actions.jsonl").exists()
    assert_problem(api.get(f"/v1/desktop/recordings/{rec}/actions"), 404)
