"""The accessibility tree, find and act against real apps nobody wrote for these tests: zenity's GTK 3
dialogs, GTK's widget factory, and Chromium on a local page (launched without any accessibility flag)."""

from __future__ import annotations

import base64
import io
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.conftest import assert_problem, wait_for
from tests.support.accessibility import ACT, FIND, act, find
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 231, "width": 1280, "height": 800}
TREE = "/v1/desktop/accessibility/tree"

pytestmark = pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                                reason="needs zenity and chromium (scripts/setup.sh test installs them)")

PAGE = """<!doctype html><html><head><title>Order form</title><style>
body { margin: 0; background: #fff; font: 16px sans-serif }
#save { position: absolute; left: 200px; top: 150px; width: 120px; height: 40px; background: #00c000;
        border: 0; color: #fff }
#name { position: absolute; left: 200px; top: 80px; width: 200px }
</style></head><body>
<label for="name" style="position:absolute;left:20px;top:80px">Customer name</label>
<input id="name" oninput="document.getElementById('echo').textContent = 'typed ' + this.value">
<button id="save" onclick="document.getElementById('out').textContent = 'Saved ' +
  document.getElementById('name').value">Save</button>
<button style="position:absolute;left:400px;top:150px">Cancel</button>
<p id="out" style="position:absolute;left:20px;top:250px">nothing yet</p>
<p id="echo" style="position:absolute;left:20px;top:300px"></p>
</body></html>"""




def find_one(api: httpx.Client, what: str, timeout: float = 15, **query: Any) -> dict[str, Any]:
    found: list[dict[str, Any]] = wait_for(lambda: find(api, **query), what, timeout)
    assert len(found) == 1, found
    return found[0]




def output_of(api: httpx.Client, process_id: str) -> str:
    entries = api.get(f"/v1/processes/{process_id}/logs", params={"stream": "stdout"}).json()["entries"]
    return b"".join(base64.b64decode(e["data"]) if e.get("encoding") == "base64" else e["data"].encode()
                    for e in entries).decode()


def exited(api: httpx.Client, process_id: str) -> dict[str, Any]:
    info: dict[str, Any] = wait_for(lambda: (i := api.get(f"/v1/processes/{process_id}").json())["status"]
                                    == "exited" and i, f"process {process_id} to exit")
    return info


@pytest.fixture
def zenity_form(api: httpx.Client) -> Iterator[str]:
    """A GTK 3 form dialog: two entries and OK; prints `name|city` when accepted."""
    started = api.post("/v1/processes", json={"command": "zenity", "args": [
        "--forms", "--title=Shipping", "--text=Where to?", "--add-entry=Full name", "--add-entry=City"]}).json()
    yield started["id"]
    api.post(f"/v1/processes/{started['id']}/kill")


@pytest.fixture(scope="module")
def page(api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Chromium showing PAGE, started the way a user would, with no accessibility flag: the desktop adds it."""
    with desktop_page(api, tmp_path_factory.mktemp("page"), "form.html", PAGE, size="900,700") as launched:
        yield launched


# -- GTK: a dialog filled, submitted and read back only through find and act -----------------------------


def test_a_gtk_form_is_filled_and_submitted_by_element(api: httpx.Client, zenity_form: str) -> None:
    name = find_one(api, "the Full name entry", role="textbox", name="Full name")
    city = find_one(api, "the City entry", role="textbox", name="City")
    assert "setValue" in name["actions"] and name["windowId"] and name["app"] == "zenity"
    done = act(api, name["id"], "setValue", value="Ada Lovelace ✓")
    assert done["through"] == "accessibility"
    act(api, {"role": "textbox", "name": "City"}, "setValue", value="London")
    assert find(api, role="textbox", name="City")[0]["value"] == "London"
    ok = act(api, {"role": "button", "name": "OK"}, "click")
    assert ok["through"] == "pointer" and ok["x"] is not None
    exited(api, zenity_form)
    assert output_of(api, zenity_form).strip() == "Ada Lovelace ✓|London"
    assert city["id"] != name["id"]


def test_a_click_by_element_lands_in_the_action_log(api: httpx.Client, zenity_form: str) -> None:
    cancel = find_one(api, "the Cancel button", role="push-button", name="Cancel")
    before = api.get("/v1/desktop/actions/log").json()["entries"]
    clicked = act(api, cancel["id"], "click")
    b = cancel["bounds"]
    assert b["x"] <= clicked["x"] < b["x"] + b["width"] and b["y"] <= clicked["y"] < b["y"] + b["height"]
    entries = api.get("/v1/desktop/actions/log").json()["entries"][len(before):]
    assert any(e["kind"] == "click" and (e.get("x"), e.get("y")) == (clicked["x"], clicked["y"]) for e in entries)
    info = exited(api, zenity_form)
    assert info["exitCode"] == 1  # zenity's answer to Cancel


def test_the_tree_of_the_focused_window_nests_and_filters(api: httpx.Client, zenity_form: str) -> None:
    find_one(api, "the dialog", role="textbox", name="City")
    tree = api.get(TREE, params={"window": "focused"}).json()
    [window] = tree["windows"]
    assert window["role"] == "dialog" and window["name"] == "Shipping" and window["windowId"]
    nodes = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node)
        for child in node.get("children") or []:
            walk(child)

    walk(window)
    assert tree["count"] == len(nodes)
    assert {"push-button", "text", "label"} <= {n["role"] for n in nodes}
    assert all("showing" in n["states"] for n in nodes)
    flat = api.get(TREE, params={"window": window["windowId"], "interactive": "true"}).json()["windows"][0]
    kept = flat["children"]
    assert {n["role"] for n in kept} <= {"push-button", "entry", "text", "toggle-button", "combo-box"}
    assert {n["name"] for n in kept} >= {"OK", "Cancel", "Full name", "City"}
    assert all(not n.get("children") for n in kept)
    shallow = api.get(TREE, params={"window": "focused", "depth": 1}).json()["windows"][0]
    assert all(not c.get("children") for c in shallow.get("children") or [])


def test_invoke_and_focus_use_the_toolkit(api: httpx.Client, zenity_form: str) -> None:
    city = find_one(api, "the City entry", role="textbox", name="City")
    assert act(api, city["id"], "focus")["through"] == "accessibility"
    wait_for(lambda: "focused" in find(api, role="textbox", name="City")[0]["states"], "the focus to move")
    act(api, {"role": "textbox", "name": "Full name"}, "setValue", value="Grace")
    act(api, {"role": "button", "name": "OK"}, "invoke")
    exited(api, zenity_form)
    assert output_of(api, zenity_form).strip() == "Grace|"


# -- Chromium: the page's tree, bounds against pixels, typing that the page hears -----------------------


def test_a_page_is_exposed_without_flags_and_bounds_match_pixels(api: httpx.Client, page: dict[str, Any]) -> None:
    save = find_one(api, "the page's Save button", role="button", name="Save", timeout=30)
    assert save["windowId"] == page["windowId"] and save["app"] == "Chromium"
    b = save["bounds"]
    cx, cy = b["x"] + b["width"] // 2, b["y"] + b["height"] // 2

    def painted() -> Image.Image | None:
        """The screen once the button is drawn: the page's tree is exposed before its first paint."""
        shot = Image.open(io.BytesIO(api.get("/v1/desktop/screenshot").content)).convert("RGB")
        red, green, _ = shot.getpixel((cx, cy))
        return shot if green > 150 and red < 60 else None

    shot: Image.Image = wait_for(painted, "the centre of the button's bounds to be the green button")
    for x, y in ((b["x"] - 3, cy), (b["x"] + b["width"] + 2, cy), (cx, b["y"] - 3), (cx, b["y"] + b["height"] + 2)):
        assert min(shot.getpixel((x, y))) > 200, f"({x}, {y}) just outside the bounds is the white page"


def test_typing_into_a_page_reaches_its_listeners(api: httpx.Client, page: dict[str, Any]) -> None:
    field = find_one(api, "the name field", role="textbox", name="Customer name", timeout=30)
    done = act(api, field["id"], "setValue", value="Zoë 42")
    assert done["through"] == "keyboard", "a page hears only real key events"
    wait_for(lambda: find(api, nameContains="typed Zoë 42"), "the page's input listener to run")
    act(api, {"role": "button", "name": "Save"}, "click")
    wait_for(lambda: find(api, name="Saved Zoë 42"), "the page's click handler to run")
    act(api, field["id"], "setValue", value="Al")
    wait_for(lambda: find(api, name="typed Al"), "the field to be replaced, not appended to")


def test_image_space_bounds_and_ambiguity(api: httpx.Client, page: dict[str, Any]) -> None:
    save = find_one(api, "the Save button", role="button", name="Save", timeout=30)
    scaled = api.post(FIND, json={"role": "button", "name": "Save", "coordinates": {
        "space": "image", "width": 640, "height": 400}}).json()["elements"][0]
    assert abs(scaled["bounds"]["x"] - save["bounds"]["x"] // 2) <= 1
    assert abs(scaled["bounds"]["width"] - save["bounds"]["width"] // 2) <= 1
    query = {"role": "button", "nameRegex": "^(Save|Cancel)$", "window": page["windowId"]}
    problem = assert_problem(api.post(ACT, json={"element": query, "action": "click"}), 409, "element_ambiguous")
    assert {c["name"] for c in problem["candidates"]} == {"Save", "Cancel"}
    assert all(c["id"] and c["bounds"]["width"] > 0 for c in problem["candidates"])


# -- mistakes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "field"), [
    ({"role": "buton"}, "role"),
    ({"nameRegex": "("}, "nameRegex"),
    ({"states": ["shiny"]}, "states"),
    ({"window": "front"}, "window"),
    ({"window": "\u00b3"}, "window"),  # a digit to str.isdigit(), not to int()
])
def test_a_wrong_query_names_its_field(api: httpx.Client, body: dict[str, Any], field: str) -> None:
    problem = assert_problem(api.post(FIND, json=body), 400, "invalid_request")
    assert problem["errors"][0]["field"] == field  # type: ignore[index]
    problem = assert_problem(api.post(ACT, json={"element": body, "action": "click"}), 400, "invalid_request")
    assert problem["errors"][0]["field"] == f"element.{field}"  # type: ignore[index]


def test_gone_and_missing_elements_are_404(api: httpx.Client) -> None:
    assert_problem(api.post(ACT, json={"element": "1.999:12345", "action": "click"}), 404, "element_not_found")
    assert_problem(api.post(ACT, json={"element": "not an id", "action": "click"}), 404, "element_not_found")
    assert_problem(api.post(ACT, json={"element": {"name": "No such thing anywhere"}, "action": "click"}), 404,
                   "element_not_found")
    assert_problem(api.get(TREE, params={"window": "123456789"}), 404, "window_not_found")
    assert_problem(api.post(ACT, json={"element": "1.2:3", "action": "explode"}), 422)


def test_an_action_the_element_cannot_do_is_409(api: httpx.Client, zenity_form: str) -> None:
    label = find_one(api, "the dialog's text", role="label", name="Where to?")
    problem = assert_problem(api.post(ACT, json={"element": label["id"], "action": "setValue", "value": "x"}), 409,
                             "element_action_unsupported")
    assert problem["actions"] == label["actions"]


def test_time_spent_waiting_is_bounded(api: httpx.Client) -> None:
    started = time.monotonic()
    assert find(api, name="nothing is called this") == []
    assert time.monotonic() - started < 5


def test_stopped_desktop_answers_409(tmp_path: Path, server_factory: Any) -> None:
    server = server_factory()
    with server.client() as api:
        assert_problem(api.get(TREE), 409)


# -- waits and batches by element ------------------------------------------------------------------


def test_waits_for_an_element_to_appear_change_and_go(api: httpx.Client) -> None:
    import threading

    answers: dict[str, Any] = {}

    def wait(name: str, element: dict[str, Any]) -> None:
        answers[name] = api.post("/v1/desktop/wait", json={"element": element, "timeoutMs": 20000}).json()

    appear = threading.Thread(target=wait, args=("present", {"role": "button", "name": "OK", "window": "all"}))
    appear.start()
    time.sleep(0.3)  # the wait is pending before the dialog exists
    started = api.post("/v1/processes", json={"command": "zenity", "args": [
        "--forms", "--title=Later", "--add-entry=Code"]}).json()
    try:
        appear.join(30)
        assert answers["present"]["matched"] and answers["present"]["condition"] == "element"
        # Answered when the dialog came, not by the last look a wait takes at its timeout (a regression did that).
        assert answers["present"]["elapsedMs"] < 15000, answers["present"]
        assert answers["present"]["match"]["element"]["name"] == "OK"
        focused = api.post("/v1/desktop/wait", json={"element": {"role": "textbox", "name": "Code",
                                                                 "until": "focused"}, "timeoutMs": 10000}).json()
        assert focused["matched"], focused
        miss = api.post("/v1/desktop/wait", json={"element": {"name": "Never there"}, "timeoutMs": 300}).json()
        assert not miss["matched"] and miss["lastState"] == {"elements": [], "count": 0}
        gone = threading.Thread(target=wait, args=("gone", {"role": "button", "name": "OK"}))
        gone.start()
        time.sleep(0.3)
        batch = api.post("/v1/desktop/actions", json={"actions": [
            {"type": "click", "element": {"role": "textbox", "name": "Code"}},
            {"type": "type", "text": "42"},
            {"type": "click", "element": {"role": "button", "name": "OK"}},
            {"type": "wait", "element": {"role": "button", "name": "OK", "until": "gone"}, "timeoutMs": 10000}]})
        assert batch.status_code == 200, batch.text
        results = batch.json()["results"]
        assert results[0]["element"] and results[2]["element"] and results[3]["matched"], results
        gone.join(30)
        assert answers["gone"]["matched"], answers["gone"]
        exited(api, started["id"])
        assert output_of(api, started["id"]).strip() == "42"
    finally:
        api.post(f"/v1/processes/{started['id']}/kill")


def test_batch_element_mistakes_name_the_step(api: httpx.Client) -> None:
    body = {"actions": [{"type": "click", "x": 5, "y": 5, "element": 3}]}
    problem = assert_problem(api.post("/v1/desktop/actions", json=body), 400)
    assert problem["errors"][0]["field"] == "actions[0].x"  # type: ignore[index]
    body = {"actions": [{"type": "click", "element": {"role": "nope"}}]}
    problem = assert_problem(api.post("/v1/desktop/actions", json=body), 400)
    assert problem["errors"][0]["field"] == "actions[0].element.role"  # type: ignore[index]
    wait = {"element": {"name": "x", "until": "sideways"}, "timeoutMs": 100}
    problem = assert_problem(api.post("/v1/desktop/wait", json=wait), 400)
    assert problem["errors"][0]["field"] == "element.until"  # type: ignore[index]
    missing = api.post("/v1/desktop/actions", json={"actions": [{"type": "click", "element": "1.999:77"}]}).json()
    assert missing["error"]["index"] == 0 and missing["error"]["problem"]["code"] == "element_not_found"
