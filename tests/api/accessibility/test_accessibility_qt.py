"""The accessibility tree of a Qt 5 app nobody wrote for these tests (FeatherPad, a text editor).

Qt's bridge differs from GTK's and Chromium's (docs/accessibility.md "Qt"): an empty cache, no
`Collection`, a crash on `Properties.GetAll`, no text for `GetText(0, n)` past the end. These tests read
its tree, act on it and check the app is still alive after each read.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.accessibility.test_accessibility import TREE, find_one
from tests.conftest import wait_for
from tests.support.accessibility import FIND, act, find

DESKTOP = {"displayNum": 236, "width": 1280, "height": 800}

pytestmark = pytest.mark.skipif(not shutil.which("featherpad"),
                                reason="needs featherpad (scripts/setup.sh test installs it)")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def editor(api: httpx.Client) -> Iterator[dict[str, Any]]:
    launched = api.post("/v1/desktop/launch", json={"app": "featherpad", "wait": True, "waitTimeoutMs": 20000})
    assert launched.status_code == 200, launched.text
    body: dict[str, Any] = launched.json()
    yield body
    api.delete(f"/v1/processes/{body['processId']}")


def nodes(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for window in tree["windows"]:
        stack = [window]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.get("children", []))


def test_the_tree_of_a_qt_window(api: httpx.Client, editor: dict[str, Any]) -> None:
    tree = wait_for(lambda: (t := api.get(TREE, params={"window": editor["windowId"]}).json())["count"] and t,
                    "FeatherPad's tree")
    [window] = tree["windows"]
    assert window["role"] == "frame" and window["app"] == "FeatherPad" and window["pid"] == editor["pid"]
    every = list(nodes(tree))
    menus = {n["name"] for n in every if n["role"] == "menu-item"}
    assert {"File", "Edit", "Help"} <= menus, menus
    [text] = [n for n in every if n["role"] == "text" and "multi-line" in n["states"]]
    box = window["bounds"]
    b = text["bounds"]
    assert box["x"] <= b["x"] and b["x"] + b["width"] <= box["x"] + box["width"], (b, box)
    assert box["y"] <= b["y"] and b["y"] + b["height"] <= box["y"] + box["height"], (b, box)
    assert alive(editor["pid"]), "reading the tree must not crash Qt (Properties.GetAll does)"


def test_set_value_and_read_it_back(api: httpx.Client, editor: dict[str, Any]) -> None:
    query = {"role": "text", "states": ["multi-line"], "window": editor["windowId"]}
    done = act(api, query, "setValue", value="written by the API")
    assert done["through"] == "accessibility", done
    [field] = find(api, **query)
    assert field["value"] == "written by the API"
    assert alive(editor["pid"])


def test_a_menu_opened_by_element(api: httpx.Client, editor: dict[str, Any]) -> None:
    help_menu = find_one(api, "the Help menu", role="menu-item", name="Help", window=editor["windowId"])
    act(api, help_menu["id"], "click")
    about = api.post("/v1/desktop/wait", json={"element": {"role": "menu-item", "nameContains": "About",
                                                           "window": "all"}, "timeoutMs": 10000}).json()
    assert about["matched"], about
    assert api.post("/v1/desktop/keyboard/press", json={"key": "Escape"}).status_code == 200
    gone = api.post("/v1/desktop/wait", json={"element": {"role": "menu-item", "nameContains": "About",
                                                          "window": "all", "until": "gone"},
                                              "timeoutMs": 10000}).json()
    assert gone["matched"], gone
    assert alive(editor["pid"]) and api.post(FIND, json={"role": "frame"}).status_code == 200
