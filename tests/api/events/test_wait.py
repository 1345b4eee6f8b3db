"""`POST /v1/desktop/wait` and the batch's `wait` action: windows of an independent X client appearing,
going and taking focus answer pending waits at once; timeouts answer `matched: false` with the last state;
every caller mistake is a 4xx naming the field."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from sandbox_desktop_client import Client
from tests.api.events.test_events import XWindow
from tests.conftest import ServerProcess, assert_problem, wait_for

DESKTOP = {"displayNum": 353, "width": 800, "height": 600}


def pending(api: httpx.Client, body: dict[str, Any], path: str = "/v1/desktop/wait") -> Callable[[], dict[str, Any]]:
    """Send the wait in a thread; the returned function joins it and gives the answer."""
    answer: dict[str, Any] = {}

    def send() -> None:
        answer.update(api.post(path, json=body).json())

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    time.sleep(0.3)  # the wait is subscribed and has checked once: what happens next must wake it

    def result() -> dict[str, Any]:
        thread.join(15)
        return answer
    return result


def test_present_answers_when_the_window_appears(api: httpx.Client, display: str) -> None:
    result = pending(api, {"window": {"title": "wait-present"}, "timeoutMs": 10_000})
    window = XWindow(display, "wait-present")
    try:
        mapped = time.monotonic()
        answer = result()
        assert time.monotonic() - mapped < 1.0  # generous: latency is measured in bench/wait_events.py
        assert answer["matched"] is True and answer["condition"] == "window"
        assert answer["match"]["window"]["windowId"] == window.id
    finally:
        window.close()


def test_regex_class_pid_focused_and_gone(api: httpx.Client, display: str) -> None:
    window = XWindow(display, "wait-Regex-42")
    try:
        found = api.post("/v1/desktop/wait", json={"window": {"titleRegex": r"Regex-\d+"}, "timeoutMs": 5000}).json()
        assert found["matched"] and found["match"]["window"]["title"] == "wait-Regex-42"
        result = pending(api, {"window": {"title": "wait-Regex-42", "until": "focused"}, "timeoutMs": 10_000})
        api.post(f"/v1/desktop/windows/{window.id}/focus").raise_for_status()
        assert result()["matched"] is True
        result = pending(api, {"window": {"titleRegex": "^wait-Regex", "until": "gone"}, "timeoutMs": 10_000})
    finally:
        window.close()
    gone = result()
    assert gone["matched"] is True and gone["match"]["window"]["windowId"] == window.id


def test_timeout_answers_with_the_last_state(api: httpx.Client, display: str) -> None:
    window = XWindow(display, "wait-bystander")
    try:
        api.post("/v1/desktop/wait", json={"window": {"title": "wait-bystander"}, "timeoutMs": 5000})
        answer = api.post("/v1/desktop/wait", json={"window": {"titleRegex": "bystander", "until": "gone"},
                                                    "timeoutMs": 200}).json()
        assert answer["matched"] is False and answer["elapsedMs"] >= 200
        assert [w["title"] for w in answer["lastState"]["windows"]] == ["wait-bystander"]
        none = api.post("/v1/desktop/wait", json={"clipboard": {}, "timeoutMs": 100}).json()
        assert none == {"matched": False, "condition": "clipboard", "lastState": {"changed": False},
                        "elapsedMs": none["elapsedMs"]}
    finally:
        window.close()


def test_a_still_screen_has_not_changed(api: httpx.Client, display: str) -> None:
    # Each wait makes the X damage object anew, whose first report (the whole screen) is the X server's.
    for _ in range(3):
        answer = api.post("/v1/desktop/wait", json={"screen": {"until": "changed"}, "timeoutMs": 300}).json()
        assert answer["matched"] is False and answer["lastState"]["changes"] == 0, answer


def test_screen_and_clipboard_conditions(api: httpx.Client, display: str) -> None:
    result = pending(api, {"screen": {"until": "changed", "region": {"x": 600, "y": 400, "width": 100, "height": 100}},
                           "timeoutMs": 10_000})
    square = XWindow(display, "wait-square", (620, 420, 40, 40), override_redirect=True)
    try:
        changed = result()
        assert changed["matched"] is True
        box = changed["match"]["changedRegion"]
        assert box["x"] <= 620 and box["x"] + box["width"] >= 660
        assert box["width"] < DESKTOP["width"], "what was drawn, not the whole screen"
        settled = api.post("/v1/desktop/wait", json={"screen": {"quietMs": 100}, "timeoutMs": 5000}).json()
        assert settled["matched"] is True and settled["elapsedMs"] >= 100
    finally:
        square.close()
    result = pending(api, {"clipboard": {"until": "changed"}, "timeoutMs": 10_000})
    api.post("/v1/desktop/clipboard", json={"text": "changed"}).raise_for_status()
    assert result()["match"]["selection"] == "clipboard"


@pytest.mark.parametrize(("body", "status", "fields"), [
    ({}, 422, ["window", "screen", "clipboard", "element"]),
    ({"clipboard": {}, "timeoutMs": None}, 422, ["timeoutMs"]),
    ({"window": {}, "clipboard": {}}, 400, ["window", "clipboard"]),
    ({"window": {"titleRegex": "(unclosed"}}, 400, ["window.titleRegex"]),
    ({"window": {"until": "maximised"}}, 422, ["window.until"]),
    ({"screen": {"region": {"x": 700, "y": 0, "width": 200, "height": 10}}}, 400, ["screen.region"]),
    ({"clipboard": {}, "timeoutMs": 10_000_000}, 400, ["timeoutMs"]),
])
def test_mistakes_name_the_field(api: httpx.Client, body: dict[str, Any], status: int, fields: list[str]) -> None:
    body = {"timeoutMs": 100, **body}
    if body["timeoutMs"] is None:
        del body["timeoutMs"]
    problem = assert_problem(api.post("/v1/desktop/wait", json=body), status)
    assert [e["field"] for e in problem["errors"]] == fields  # type: ignore[attr-defined]


def test_per_desktop_route(api: httpx.Client) -> None:
    answer = api.post("/v1/desktops/default/wait", json={"clipboard": {}, "timeoutMs": 50}).json()
    assert answer["matched"] is False
    assert_problem(api.post("/v1/desktops/nope/wait", json={"clipboard": {}, "timeoutMs": 50}), 404)


def test_batch_wait_action(api: httpx.Client, display: str) -> None:
    window = XWindow(display, "wait-batch")
    try:
        body = {"actions": [{"type": "wait", "durationMs": 10},
                            {"type": "wait", "window": {"title": "wait-batch"}, "timeoutMs": 5000},
                            {"type": "wait", "window": {"title": "absent"}, "timeoutMs": 100}]}
        results = api.post("/v1/desktop/actions", json=body).json()["results"]
        assert "matched" not in results[0]
        assert results[1]["matched"] is True and results[1]["match"]["window"]["windowId"] == window.id
        assert results[2]["matched"] is False and "lastState" in results[2]
    finally:
        window.close()
    both = api.post("/v1/desktop/actions", json={"actions": [{"type": "wait", "durationMs": 5, "clipboard": {}}]})
    assert assert_problem(both, 400)["errors"][0]["field"] == "actions[0].durationMs"  # type: ignore[index]
    untimed = api.post("/v1/desktop/actions", json={"actions": [{"type": "wait", "clipboard": {}}]})
    assert assert_problem(untimed, 422)["errors"][0]["field"] == "actions[0].timeoutMs"  # type: ignore[index]
    neither = api.post("/v1/desktop/actions", json={"actions": [{"type": "wait"}]})
    assert assert_problem(neither, 422)["errors"][0]["field"] == "actions[0].durationMs"  # type: ignore[index]


def test_python_client(srv: ServerProcess, display: str) -> None:
    with Client(srv.url, token=srv.token) as desk:
        events = desk.events(types=["window."], since=0)  # it subscribes at the first `next`: replay from 0
        window = XWindow(display, "wait-client")
        try:
            answer = desk.wait(window={"title": "wait-client"}, timeout_ms=5000)
            assert answer.matched and answer.match is not None
            # X reuses the ids of clients gone: the title tells this window from an earlier test's.
            created = next(e for e in events if e.type == "window.created"
                           and (e.model_extra or {})["title"] == "wait-client")
            assert (created.model_extra or {})["windowId"] == window.id and created.seq > 0
        finally:
            events.close()
            window.close()


# -- elements: the quick check of a change must keep `find`'s rules ---------------------------------------

SCOPE_PAGE = """<!doctype html><title>{title}</title><h1>{title}</h1>
<button onclick="setTimeout(() => {{ const box = document.createElement('div'); box.setAttribute('role', 'group');
  box.setAttribute('aria-label', 'Box ' + (++window.boxes || (window.boxes = 1)));
  const late = document.createElement('button'); late.textContent = 'Late'; box.append(late);
  document.body.append(box) }}, 300)">Add</button>
<button onclick="setTimeout(() => {{ const row = document.createElement('div');
  const label = document.createElement('label');
  label.textContent = 'Post code ' + (++window.fields || (window.fields = 1));
  row.append(label, ' ', document.createElement('input')); document.body.append(row) }}, 300)">Add field</button>"""


@pytest.fixture(scope="module")
def two_pages(api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two windows of one Chromium (one application on the bus), pages `Scope A` and `Scope B`: (A, B) ids."""
    if not shutil.which("chromium"):
        pytest.skip("needs chromium (scripts/setup.sh test installs it)")
    folder = tmp_path_factory.mktemp("scope")
    uris = []
    for title in ("Scope A", "Scope B"):
        path = folder / f"{title[-1]}.html"
        path.write_text(SCOPE_PAGE.format(title=title))
        uris.append(path.as_uri())
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--test-type", f"--user-data-dir={folder / 'profile'}",
             "--window-size=700,500"]
    first = api.post("/v1/desktop/launch", json={"app": "chromium", "wait": True, "waitTimeoutMs": 30000,
                                                 "args": [*flags, "--window-position=0,0", uris[0]]})
    assert first.status_code == 200, first.text
    # The same profile: the running browser opens the second window itself, in the same application.
    api.post("/v1/desktop/processes", json={"command": "chromium", "args": [*flags, "--new-window", uris[1]]})
    windows = []
    for title in ("Scope A", "Scope B"):  # Chromium titles its window after mapping it: a window wait sees that
        answer = api.post("/v1/desktop/wait", json={"window": {"titleRegex": f"^{title}"}, "timeoutMs": 30_000})
        assert answer.json()["matched"], answer.text
        windows.append(answer.json()["match"]["window"]["windowId"])
    for window in windows:  # both pages' trees are readable before a test relies on them
        api.post("/v1/desktop/wait", json={"element": {"role": "button", "name": "Add", "window": window},
                                           "timeoutMs": 30_000}).raise_for_status()
    yield windows[0], windows[1]
    api.post(f"/v1/desktop/processes/{first.json()['processId']}/kill")


def acted_while_waiting(api: httpx.Client, wait: dict[str, Any], act: dict[str, Any]) -> dict[str, Any]:
    """Send the wait, then act on an element while it is pending; the wait's answer."""
    result = pending(api, wait)
    acted = api.post("/v1/desktop/accessibility/act", json=act)
    assert acted.status_code == 200, acted.text
    return result()


def add_late(api: httpx.Client, window: str) -> None:
    """Press the page's Add: 300 ms later it appends a group holding a new `Late` button."""
    answer = api.post("/v1/desktop/accessibility/act", json={
        "element": {"role": "button", "name": "Add", "window": window}, "action": "invoke"})
    assert answer.status_code == 200, answer.text


def test_an_element_outside_the_scope_never_matches_and_one_in_a_new_container_does(
        api: httpx.Client, two_pages: tuple[str, str]) -> None:
    a, b = two_pages
    query = {"role": "button", "name": "Late", "window": a}
    result = pending(api, {"element": query, "timeoutMs": 20_000})
    add_late(api, b)  # the same application adds a matching button, in the other window
    late_in_b = wait_for(lambda: api.post("/v1/desktop/accessibility/find", json={
        "role": "button", "name": "Late", "window": b}).json()["elements"], "the Late button in window B")
    time.sleep(1.0)  # every change it announced has reached the wait by now
    early = api.post("/v1/desktop/wait", json={"element": query, "timeoutMs": 50}).json()
    assert early["matched"] is False, early  # nothing in A yet: a wait must not take B's
    add_late(api, a)
    answer = result()
    assert answer["matched"] is True, answer
    element = answer["match"]["element"]
    assert element["windowId"] == a and element["name"] == "Late" and element["role"] == "push-button"
    assert element["id"] not in {e["id"] for e in late_in_b}
    [late_in_a] = api.post("/v1/desktop/accessibility/find", json=query).json()["elements"]
    assert late_in_a["id"] == element["id"]  # the wait answers what `find` finds
    assert element["bounds"] == late_in_a["bounds"]


def test_a_new_container_in_the_wrong_window_is_not_taken(api: httpx.Client, two_pages: tuple[str, str]) -> None:
    a, b = two_pages
    late = {"role": "button", "name": "Late", "window": a}
    before = len(api.post("/v1/desktop/accessibility/find", json=late).json()["elements"])
    # Each page numbers its boxes: the next one added to A and the next one added to B have the same name.
    box = {"name": f"Box {before + 1}", "window": a}
    result = pending(api, {"element": box, "timeoutMs": 20_000})
    add_late(api, b)  # its own new box: the name the wait wants, in the other window
    time.sleep(1.0)
    add_late(api, a)
    answer = result()
    assert answer["matched"] is True and answer["match"]["element"]["windowId"] == a, answer
    assert len(api.post("/v1/desktop/accessibility/find", json=late).json()["elements"]) == before + 1


def test_a_field_named_by_the_label_beside_it_is_found_when_it_comes(
        api: httpx.Client, two_pages: tuple[str, str]) -> None:
    a, _b = two_pages
    fields = api.post("/v1/desktop/accessibility/find", json={"role": "textbox", "nameContains": "Post code",
                                                               "window": a}).json()["elements"]
    # The input has no name of its own: it takes the one of the label left of it (docs/accessibility.md "Names").
    query = {"role": "textbox", "name": f"Post code {len(fields) + 1}", "window": a}
    waited = acted_while_waiting(api, {"element": query, "timeoutMs": 20_000}, {
        "element": {"role": "button", "name": "Add field", "window": a}, "action": "invoke"})
    assert waited["matched"] is True, waited
    [found] = api.post("/v1/desktop/accessibility/find", json=query).json()["elements"]
    assert waited["match"]["element"]["id"] == found["id"] and waited["match"]["element"]["windowId"] == a


def test_a_gtk_page_switched_to_answers_with_what_find_finds(api: httpx.Client) -> None:
    if not shutil.which("gtk3-widget-factory"):
        pytest.skip("needs gtk3-widget-factory (scripts/setup.sh test installs it)")
    launched = api.post("/v1/desktop/launch", json={"app": "gtk3-widget-factory", "wait": True,
                                                    "waitTimeoutMs": 20_000})
    assert launched.status_code == 200, launched.text
    factory = launched.json()
    try:
        window = factory["windowId"]
        wait_for(lambda: api.post("/v1/desktop/accessibility/find", json={"role": "radio-button", "name": "Page 2"}
                                  ).json()["elements"], "the widget factory's tree")
        add_item = {"role": "button", "name": "Add item", "window": window}  # on its page 2: hidden until shown
        answer = acted_while_waiting(api, {"element": add_item, "timeoutMs": 20_000}, {
            "element": {"role": "radio-button", "name": "Page 2", "window": window}, "action": "click"})
        assert answer["matched"] is True, answer
        element = answer["match"]["element"]
        assert element["windowId"] == window and "showing" in element["states"]
        [found] = api.post("/v1/desktop/accessibility/find", json=add_item).json()["elements"]
        assert found["id"] == element["id"] and found["bounds"] == element["bounds"]
    finally:
        api.post(f"/v1/desktop/processes/{factory['processId']}/kill")
