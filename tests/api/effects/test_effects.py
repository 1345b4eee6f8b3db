"""Actions that report their effect (docs/effects.md): typing into an xterm, a click on the empty desktop, a
window opened and one closed by a key, an element's value set, a batch, the vendors' acknowledgements, an open
model's answer, the client, and a desktop started with `reportEffects`; against real X clients (xterm, xmessage,
zenity's GTK form)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox_desktop_client import Client
from sandbox_desktop_wire.effects import Effect
from tests.api.input.test_keyboard import focus
from tests.conftest import ServerProcess, wait_for
from tests.support.accessibility import act, find

DESKTOP = {"displayNum": 386, "width": 1024, "height": 768}
EMPTY = (1000, 740)
"""A point of the root window that no test window covers (each opens at the top left)."""

pytestmark = pytest.mark.skipif(not (shutil.which("xterm") and shutil.which("xmessage")),
                                reason="needs xterm and xmessage (scripts/setup.sh test installs them)")


class Term:
    """An xterm at the top left running `command`, focused; its window's rectangle as the server lists it."""

    def __init__(self, api: httpx.Client, display: str, command: str) -> None:
        self.title = f"effects-{time.monotonic_ns()}"
        env = dict(os.environ, DISPLAY=display, LC_ALL="C.UTF-8")
        self.proc = subprocess.Popen(["xterm", "-T", self.title, "-geometry", "60x10+10+10", "-e", "sh", "-c",
                                      command], env=env, stderr=subprocess.DEVNULL)
        focus(display, self.title)
        self.rect: dict[str, Any] = wait_for(lambda: next(
            (w for w in api.get("/v1/desktop/windows").json()["windows"] if w["title"] == self.title), None),
            f"the {self.title} window")
        # openbox draws the frame (and redraws it when the focus arrives) after the window is listed: wait until
        # the screen is quiet, or that drawing lands in the next action's effect.
        settled = api.post("/v1/desktop/actions", json={"actions": [], "settle": {"quietMs": 300, "timeoutMs": 5000}})
        assert settled.status_code == 200 and settled.json()["settled"], settled.text

    def covers(self, region: dict[str, int]) -> bool:
        r = self.rect
        return (r["x"] <= region["x"] and region["x"] + region["width"] <= r["x"] + r["width"]
                and r["y"] <= region["y"] and region["y"] + region["height"] <= r["y"] + r["height"])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def cat(api: httpx.Client, display: str, tmp_path: Path) -> Iterator[Term]:
    """An xterm echoing what is typed into a file nobody reads."""
    term = Term(api, display, f"exec cat > {tmp_path / 'typed.txt'}")
    yield term
    term.close()


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_typing_into_an_xterm_reports_a_change_over_the_terminal(api: httpx.Client, cat: Term) -> None:
    text = "hello effects"
    body = ok(api.post("/v1/desktop/keyboard/type", json={"text": text, "reportEffect": True}))
    effect = body["effect"]
    assert effect["changed"] is True and effect["regions"], effect
    assert all(cat.covers(region) for region in effect["regions"]), (effect, cat.rect)
    # Every character, not only the first drawings: xterm's glyphs are 6 px wide, so the line is at least 5 each.
    assert effect["regions"][0]["width"] >= 5 * len(text), effect
    assert effect["summary"].startswith("screen changed in "), effect
    assert effect["windowsOpened"] == [] and effect["windowsClosed"] == [] and "focus" not in effect


def quiet_desktop(api: httpx.Client, base: str = "/v1/desktop") -> None:
    """No window of an earlier test left, and nothing being drawn: what comes next is the action's own."""
    wait_for(lambda: not api.get(f"{base}/windows").json()["windows"], "the earlier tests' windows to go")
    settled = ok(api.post(f"{base}/wait", json={"screen": {"until": "settled", "quietMs": 300},
                                                "timeoutMs": 10_000}))
    assert settled["matched"] is True, settled


def test_a_click_on_the_empty_desktop_reports_none_observed(api: httpx.Client) -> None:
    quiet_desktop(api)
    body = ok(api.post("/v1/desktop/mouse/click", json={"x": EMPTY[0], "y": EMPTY[1], "reportEffect": True}))
    effect = body["effect"]
    assert effect["changed"] is False and effect["regions"] == [], effect
    assert effect["summary"].startswith("no visible change within "), effect
    assert "missed" in effect["summary"]
    assert (body["x"], body["y"]) == EMPTY


def test_the_client_reads_the_typed_effect(srv: ServerProcess, cat: Term) -> None:
    with Client(srv.url, token=srv.token) as desk:
        clicked = desk.click(EMPTY[0], EMPTY[1], report_effect=True)
        assert isinstance(clicked.effect, Effect) and clicked.effect.summary
        batch = desk.actions([{"type": "type", "text": "client"}], report_effect=True)
        assert batch.effect is not None and batch.effect.changed and batch.effect.regions, batch.effect
        assert desk.click(EMPTY[0], EMPTY[1]).effect is None


def test_effects_are_off_by_default(api: httpx.Client, cat: Term) -> None:
    assert "effect" not in ok(api.post("/v1/desktop/keyboard/type", json={"text": "quiet"}))
    assert "effect" not in ok(api.post("/v1/desktop/mouse/click", json={"x": EMPTY[0], "y": EMPTY[1]}))
    batch = ok(api.post("/v1/desktop/actions", json={"actions": [{"type": "type", "text": "x"}]}))
    assert "effect" not in batch
    assert ok(api.post("/v1/desktop/keyboard/press", json={"key": "a", "reportEffect": False})) == {"ok": True}


def test_a_key_that_opens_a_window_reports_it_in_a_batch(api: httpx.Client, display: str) -> None:
    title = f"opened-{time.monotonic_ns()}"
    term = Term(api, display, f"read line; exec xmessage -title {title} -geometry +300+300 hello")
    try:
        # The batch waits for the window, so the effect's window is the whole launch however slow it is.
        body = ok(api.post("/v1/desktop/actions", json={"reportEffect": True, "actions": [
            {"type": "key", "keys": "Return"},
            {"type": "wait", "window": {"title": title}, "timeoutMs": 15_000}]}))
        assert body["results"][1]["matched"] is True, body
        effect = body["effect"]
        assert [w["title"] for w in effect["windowsOpened"]] == [title], effect
        assert f"window '{title}' opened" in effect["summary"], effect
        assert effect["changed"] is True and effect["regions"]
    finally:
        term.close()


def test_a_key_that_closes_a_window_reports_it_and_the_focus(api: httpx.Client, display: str, cat: Term) -> None:
    title = f"closing-{time.monotonic_ns()}"
    env = dict(os.environ, DISPLAY=display)
    dialog = subprocess.Popen(["xmessage", "-title", title, "-default", "okay", "-geometry", "+300+300", "closing"],
                              env=env, stderr=subprocess.DEVNULL)
    try:
        focus(display, title)
        body = ok(api.post("/v1/desktop/keyboard/press", json={"key": "Return", "reportEffect": True}))
        effect = body["effect"]
        assert [w["title"] for w in effect["windowsClosed"]] == [title], effect
        assert effect["focus"]["title"] == cat.title, effect
        assert effect["summary"].startswith(f"window '{title}' closed; focus moved to '{cat.title}'"), effect
        assert dialog.wait(10) == 0
    finally:
        dialog.kill()
        dialog.wait()


def test_a_batch_that_settles_reports_its_effect(api: httpx.Client, cat: Term) -> None:
    body = ok(api.post("/v1/desktop/actions", json={
        "reportEffect": True, "settle": {"quietMs": 100, "timeoutMs": 3000},
        "actions": [{"type": "type", "text": "batch"}, {"type": "key", "keys": "Return"}]}))
    assert body["settled"] is True
    effect = body["effect"]
    assert effect["changed"] is True and all(cat.covers(r) for r in effect["regions"]), (effect, cat.rect)


def test_the_anthropic_toolset_acknowledgement_carries_the_summary(api: httpx.Client, cat: Term) -> None:
    tool = {"type": "computer_toolset_20260801"}
    body = ok(api.post("/v1/desktop/anthropic/computer", json={
        "tool": tool, "name": "type", "input": {"text": "toolset"}, "reportEffect": True}))
    [block] = body["content"]
    assert block["text"].startswith("Typed. Effect: screen changed in "), block
    plain = ok(api.post("/v1/desktop/anthropic/computer", json={"tool": tool, "name": "type", "input": {"text": "x"}}))
    assert plain["content"] == [{"type": "text", "text": "Typed."}]


def test_an_anthropic_screenshot_result_has_the_summary_before_the_image(api: httpx.Client, cat: Term) -> None:
    tool = {"type": "computer_20250124", "display_width_px": DESKTOP["width"], "display_height_px": DESKTOP["height"]}
    body = ok(api.post("/v1/desktop/anthropic/computer", json={
        "tool": tool, "input": {"action": "type", "text": "shot"}, "reportEffect": True,
        "settle": {"quietMs": 100, "timeoutMs": 3000}}))
    text, image = body["content"]
    assert text["type"] == "text" and text["text"].startswith("Effect: screen changed in "), text
    assert image["type"] == "image"


def test_the_gemini_function_response_carries_the_summary(api: httpx.Client, cat: Term) -> None:
    body = ok(api.post("/v1/desktop/gemini/computer", json={
        "functionCall": {"name": "key_combination", "args": {"keys": "g"}}, "reportEffect": True,
        "settle": {"quietMs": 100, "timeoutMs": 3000}}))
    response = body["parts"][0]["functionResponse"]["response"]
    assert response["effect"].startswith("screen changed in "), response


def test_an_open_model_answer_carries_the_effect(api: httpx.Client, cat: Term) -> None:
    body = ok(api.post("/v1/desktop/models/act", json={
        "family": "ui-tars-1.5", "text": "Thought: Type.\nAction: type(content='model')", "screenshot": False,
        "reportEffect": True}))
    assert [a["kind"] for a in body["actions"]] == ["type"], body
    effect = body["effect"]
    assert effect["changed"] is True and all(cat.covers(r) for r in effect["regions"]), (effect, cat.rect)


@pytest.mark.skipif(not shutil.which("zenity"), reason="needs zenity")
def test_an_element_act_reports_its_value_change(api: httpx.Client) -> None:
    started = ok(api.post("/v1/processes", json={"command": "zenity", "args": [
        "--forms", "--title=Effects form", "--add-entry=Full name"]}))
    try:
        field = wait_for(lambda: find(api, role="textbox", name="Full name"), "the Full name entry", 20)[0]
        done = act(api, field["id"], "setValue", value="Ada", reportEffect=True)
        element = done["effect"]["element"]
        assert element["id"] == field["id"] and element["valueAfter"] == "Ada", done["effect"]
        assert element["valueBefore"] in (None, ""), element
        assert "'Full name': value '' -> 'Ada'" in done["effect"]["summary"], done["effect"]
    finally:
        api.post(f"/v1/processes/{started['id']}/kill")


def test_a_desktop_started_with_report_effects_answers_every_action(api: httpx.Client) -> None:
    created = api.post("/v1/desktops", json={"width": 640, "height": 480, "reportEffects": True})
    assert created.status_code == 201, created.text
    base = f"/v1/desktops/{created.json()['id']}"
    try:
        quiet_desktop(api, base)
        clicked = ok(api.post(f"{base}/mouse/click", json={"x": 600, "y": 400}))
        assert clicked["effect"]["changed"] is False, clicked
        assert "effect" not in ok(api.post(f"{base}/mouse/click", json={"x": 600, "y": 400, "reportEffect": False}))
        # Starting the running desktop again with the option changes it there and then.
        assert ok(api.post(f"{base}/start", json={"reportEffects": False}))["state"] == "active"
        assert "effect" not in ok(api.post(f"{base}/mouse/click", json={"x": 600, "y": 400}))
    finally:
        assert api.delete(base).status_code == 204
