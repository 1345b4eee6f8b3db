"""Acting on elements of pages and lists that scroll: real Chromium on local pages, and a real GTK list.

A page's layout boxes do not clip what overflows them, so an element outside its parent's box can be
on the screen; an element out of view is scrolled into it by `act`, or refused with where it is
(docs/accessibility.md "Where an element is")."""

from __future__ import annotations

import base64
import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import assert_problem, wait_for
from tests.support.accessibility import ACT, act, find
from tests.support.browser import desktop_page

DESKTOP = {"displayNum": 647, "width": 1280, "height": 800}

pytestmark = pytest.mark.skipif(not (shutil.which("zenity") and shutil.which("chromium")),
                                reason="needs zenity and chromium (scripts/setup.sh test installs them)")

SAY = "document.getElementById('out').textContent"
FRAME_BUTTON = f"<button onclick=&quot;parent.{SAY} = 'frame clicked'&quot;>Frame button</button>"
# `html, body` as tall as the window and one wrapper that long: the page's content overflows them, as on
# many real pages, so what is below the first screen lies outside its parents' boxes.
PAGE = f"""<!doctype html><html><head><title>Long page</title><style>
html, body {{ margin: 0; height: 100%; font: 16px sans-serif }}
#out {{ position: fixed; top: 0; right: 20px; margin: 0; background: #ff0 }}
</style></head><body><section aria-label="Wrapper" style="height: 100%">
<p id="out">nothing yet</p>
<div style="height: calc(100vh + 30px)">top spacer</div>
<button onclick="{SAY} = 'middle clicked'">Middle button</button>
<div style="height: 1500px">middle spacer</div>
<button onclick="{SAY} = 'far clicked'">Far button</button>
<div id="box" style="height: 150px; width: 400px; overflow: auto; border: 1px solid">
  <div style="height: 600px">inner spacer</div>
  <button onclick="{SAY} = 'inner clicked'">Inner button</button>
</div>
<iframe srcdoc="<div style='height: 500px'>frame spacer</div>{FRAME_BUTTON}" style="height: 200px; width: 400px">
</iframe>
<div style="height: 600px">bottom spacer</div>
<input aria-label="Low field" oninput="{SAY} = 'typed ' + this.value">
<div style="height: 300px">end</div>
</section></body></html>"""






def said(api: httpx.Client, text: str) -> None:
    """The page's fixed status line (always on the screen) reads `text`: its handler ran."""
    wait_for(lambda: find(api, name=text), f"the page to say {text!r}")


@pytest.fixture
def page(api: httpx.Client, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A fresh page per test: each scrolls it."""
    with desktop_page(api, tmp_path, "long.html", PAGE, size="900,650") as launched:
        wait_for(lambda: find(api, name="nothing yet"), "the page's tree", 30)
        yield launched


def hidden(api: httpx.Client, role: str, name: str) -> dict[str, Any]:
    found = find(api, role=role, name=name, includeHidden=True)
    assert len(found) == 1, found
    return found[0]


def test_a_button_showing_outside_its_parents_box_is_clicked(api: httpx.Client, page: dict[str, Any]) -> None:
    """The issue: the page scrolled by hand, the button showing well inside the window, yet outside the
    wrapper's box (which ends one window-height down): it is clicked where it is, with no scrolling."""
    def in_window() -> list[dict[str, Any]]:
        found = find(api, role="button", name="Middle button")
        return found if found and found[0]["bounds"] and found[0]["bounds"]["y"] + 21 <= 640 else []

    # The button starts 30 px below the window: one or two wheel clicks (about 100 px each) show it, while
    # the wrapper's end stays on the screen for a whole window-height of scrolling.
    for _ in range(2):
        api.post("/v1/desktop/mouse/scroll", json={"x": 450, "y": 400, "deltaY": 1})
        with contextlib.suppress(AssertionError):
            wait_for(in_window, "the button to show", 5)  # the page reports the scroll in its own time
            break
    wait_for(in_window, "the wheel to scroll the middle button into the window")

    def settled() -> dict[str, Any] | None:
        """The button once its bounds hold still: Chromium scrolls smoothly, over a few frames after the wheel."""
        before = in_window()
        time.sleep(0.3)
        after = in_window()
        return after[0] if before and after and before[0]["bounds"] == after[0]["bounds"] else None

    button = wait_for(settled, "the page to stop scrolling")
    b = button["bounds"]
    wrap = wait_for(lambda: find(api, role="landmark", name="Wrapper"), "the wrapper showing")[0]["bounds"]
    assert b["y"] >= wrap["y"] + wrap["height"], "the button lies outside the wrapper's box"
    done = act(api, button["id"], "click", scrollIntoView=False)
    assert done["through"] == "pointer" and b["y"] <= done["y"] < b["y"] + b["height"]
    # About one run in three under load, the page does not hear the first click that follows the wheel, though it
    # lands inside the button's bounds (under investigation: see the session's closing note). Once more, then fail.
    try:
        wait_for(lambda: find(api, name="middle clicked"), "the page to say 'middle clicked'", 5)
    except AssertionError:
        act(api, button["id"], "click", scrollIntoView=False)
        said(api, "middle clicked")


def test_a_button_far_down_is_scrolled_into_view_and_clicked(api: httpx.Client, page: dict[str, Any]) -> None:
    far = hidden(api, "button", "Far button")
    assert "showing" not in far["states"]
    done = act(api, {"role": "button", "name": "Far button", "includeHidden": True}, "click")
    assert "showing" in done["element"]["states"] and 0 < done["y"] < 650
    said(api, "far clicked")


def test_set_value_into_a_field_below_the_fold(api: httpx.Client, page: dict[str, Any]) -> None:
    field = hidden(api, "textbox", "Low field")
    done = act(api, field["id"], "setValue", value="Zoë 7")
    assert done["through"] == "keyboard" and done["element"]["value"] == "Zoë 7"
    said(api, "typed Zoë 7")


def test_a_button_in_a_nested_scrolling_box(api: httpx.Client, page: dict[str, Any]) -> None:
    act(api, hidden(api, "button", "Inner button")["id"], "click")
    said(api, "inner clicked")


def test_a_button_in_an_iframe(api: httpx.Client, page: dict[str, Any]) -> None:
    done = act(api, hidden(api, "button", "Frame button")["id"], "click")
    assert 0 < done["y"] < 650
    said(api, "frame clicked")


def test_with_scroll_into_view_off_an_element_out_of_view_is_refused(api: httpx.Client,
                                                                     page: dict[str, Any]) -> None:
    far = hidden(api, "button", "Far button")
    problem = assert_problem(api.post(ACT, json={"element": far["id"], "action": "click", "scrollIntoView": False}),
                             409, "element_action_unsupported")
    assert problem["element"] == far["id"]
    assert "'Far button' is scrolled out of view" in problem["detail"] and "below" in problem["detail"]
    assert "scrollIntoView is off" in problem["detail"]
    assert find(api, name="nothing yet"), "nothing was clicked"
    assert not find(api, role="button", name="Far button"), "nor scrolled"


# -- GTK: a list longer than its window --------------------------------------------------------------


@pytest.fixture
def zenity_list(api: httpx.Client) -> Iterator[str]:
    """A GTK 3 list of 80 rows in a small dialog; prints the chosen row when accepted."""
    rows = [f"Row {n:02d}" for n in range(1, 81)]
    started = api.post("/v1/processes", json={"command": "zenity", "args": [
        "--list", "--title=Pick", "--column=Item", "--width=300", "--height=300", *rows]}).json()
    yield started["id"]
    api.post(f"/v1/processes/{started['id']}/kill")


def output_of(api: httpx.Client, process_id: str) -> str:
    entries = api.get(f"/v1/processes/{process_id}/logs", params={"stream": "stdout"}).json()["entries"]
    return b"".join(base64.b64decode(e["data"]) if e.get("encoding") == "base64" else e["data"].encode()
                    for e in entries).decode()


def test_a_row_far_down_a_gtk_list_is_scrolled_to_and_clicked(api: httpx.Client, zenity_list: str) -> None:
    wait_for(lambda: find(api, role="cell", name="Row 01"), "the list", 20)
    row = wait_for(lambda: find(api, role="cell", name="Row 70", includeHidden=True), "row 70 in the tree")[0]
    done = act(api, row["id"], "click")
    assert done["through"] == "pointer"
    wait_for(lambda: find(api, role="cell", name="Row 70", states=["selected"]), "row 70 to be selected")
    act(api, {"role": "button", "name": "OK"}, "click")
    wait_for(lambda: output_of(api, zenity_list).strip() == "Row 70", "zenity to print the chosen row")
