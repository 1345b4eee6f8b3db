"""The MCP accessibility tools (`tree`, `find`, `act`, `screenshot` with `som`) through the `mcp` client SDK,
on zenity's GTK 3 form: filled, submitted and read back only by element."""

from __future__ import annotations

import base64
import re
import shutil

import httpx
import pytest

from api.mcp.accessibility import element_line
from sandbox_desktop_wire.accessibility import AccessibleNode
from tests.api.accessibility.test_accessibility import exited, output_of
from tests.clients.mcp.test_mcp import images, mcp, png_size, texts, until
from tests.clients.python.test_client_accessibility import zenity_form
from tests.conftest import ServerProcess

pytest.importorskip("mcp", reason="the `mcp` package is not installed (pip install 'sandbox-desktop[mcp]')")

from mcp import ClientSession, types

DESKTOP = {"displayNum": 356, "width": 1024, "height": 768}
# `role "name" value="..." [states] (id) at x,y wxh`, value, states and bounds optional.
LINE = re.compile(r'(?P<indent> *)(?P<role>[a-z-]+) (?P<name>"(?:[^"\\]|\\.)*")(?: value="(?:[^"\\]|\\.)*")?'
                  r'(?: \[(?P<states>[a-z-]+(?:, [a-z-]+)*)\])? \((?P<id>[^ ()]+)\)(?: at \d+,\d+ \d+x\d+)?')
MARK = re.compile(r'(?P<mark>\d+): (?P<role>[a-z-]+) (?P<name>"(?:[^"\\]|\\.)*") \((?P<id>[^ ()]+)\)')

needs_zenity = pytest.mark.skipif(not shutil.which("zenity"), reason="needs zenity (scripts/setup.sh test)")


def lines(result: types.CallToolResult) -> list[re.Match[str]]:
    """The element lines of a tree or find answer, each checked against the format."""
    assert not result.isError, texts(result)
    [text] = texts(result)
    matched = [LINE.fullmatch(line) for line in text.splitlines()]
    assert all(matched), text
    return [m for m in matched if m]


def named(found: list[re.Match[str]], role: str, name: str) -> re.Match[str]:
    return next(m for m in found if m["role"] == role and m["name"] == f'"{name}"')


async def field_named(s: ClientSession, name: str) -> re.Match[str]:
    """The form's entry, once zenity has put it on the accessibility bus."""

    async def found() -> list[re.Match[str]]:
        return lines(await s.call_tool("find", {"role": "textbox", "name": name}))

    [entry] = await until(found, f"the {name} entry", 15)
    return entry


def test_lines_show_what_matters_on_one_line_each() -> None:
    node = AccessibleNode.model_validate({
        "id": "1.42:318", "role": "text", "name": 'Say "hi"\nthere', "value": "x" * 300, "app": "zenity",
        "states": ["enabled", "focused", "showing", "visible", "editable"], "actions": ["click"],
        "bounds": {"x": 10, "y": 20, "width": 30, "height": 40}})
    line = element_line(node, 2)
    assert line == f'    text "Say \\"hi\\"\\nthere" value="{"x" * 200}…" [focused] (1.42:318) at 10,20 30x40'
    hidden = node.model_copy(update={"states": ["checked"], "bounds": None, "value": None})
    assert element_line(hidden) == 'text "Say \\"hi\\"\\nthere" [checked, disabled, hidden] (1.42:318)'


@needs_zenity
def test_a_form_is_filled_and_submitted_by_find_and_act(srv: ServerProcess, api: httpx.Client) -> None:
    async def use(s: ClientSession) -> list[types.CallToolResult]:
        name = await field_named(s, "Full name")
        return [await s.call_tool("act", {"element": name["id"], "action": "setValue", "value": "Ada ✓"}),
                await s.call_tool("act", {"element": {"role": "textbox", "name": "City"}, "action": "setValue",
                                          "value": "Oslo"}),
                await s.call_tool("act", {"element": {"role": "textbox"}, "action": "focus"}),
                await s.call_tool("act", {"element": {"name": "No such thing anywhere"}, "action": "click"}),
                await s.call_tool("act", {"element": {"role": "button", "name": "OK"}, "action": "click"})]

    with zenity_form(api) as process_id:
        name, city, ambiguous, missing, ok = mcp(srv, use)
        assert exited(api, process_id)["exitCode"] == 0
        assert output_of(api, process_id).strip() == "Ada ✓|Oslo"
    for done in (name, city, ok):
        assert not done.isError, texts(done)
    first, element = texts(name)[0].splitlines()
    assert first == "setValue done through accessibility"
    assert LINE.fullmatch(element) and element.startswith('text "Full name" ')
    assert re.fullmatch(r"click done through pointer at \d+,\d+", texts(ok)[0].splitlines()[0])
    detail, *candidates = texts(ambiguous)[0].splitlines()
    assert ambiguous.isError and "(code: element_ambiguous, HTTP 409)" in detail
    assert {LINE.fullmatch(c)["name"] for c in candidates} == {'"Full name"', '"City"'}  # type: ignore[index]
    assert missing.isError and "(code: element_not_found, HTTP 404)" in texts(missing)[0]


@needs_zenity
def test_tree_and_marked_screenshot_name_the_dialog_and_its_buttons(srv: ServerProcess, api: httpx.Client) -> None:
    async def use(s: ClientSession) -> tuple[types.CallToolResult, ...]:
        await field_named(s, "City")
        tree = await s.call_tool("tree", {"window": "focused"})
        flat = await s.call_tool("tree", {"window": "focused", "interactive": True})
        shot = await s.call_tool("screenshot", {"som": True, "scale": 0.5})
        mark = next(m for m in map(MARK.fullmatch, texts(shot)[1].splitlines()) if m and m["name"] == '"Cancel"')
        return tree, flat, shot, await s.call_tool("act", {"element": int(mark["mark"]), "action": "click"})

    with zenity_form(api) as process_id:
        tree, flat, shot, cancel = mcp(srv, use)
        assert exited(api, process_id)["exitCode"] == 1  # zenity's answer to Cancel
    window, *below = lines(tree)
    assert (window["indent"], window["role"], window["name"]) == ("", "dialog", '"Shipping"')
    assert "active" in (window["states"] or "")
    for button in ("OK", "Cancel"):
        assert len(named(below, "push-button", button)["indent"]) >= 2
    assert named(below, "label", "Full name")
    window, *controls = lines(flat)
    assert {m["indent"] for m in controls} == {"  "}, "interactive: one flat level under the window"
    assert {m["name"] for m in controls} >= {'"OK"', '"Cancel"', '"Full name"', '"City"'}
    [image] = images(shot)
    assert png_size(base64.b64decode(image.data)) == (512, 384)
    frame, marks = texts(shot)
    assert "image 512x384" in frame
    assert all(MARK.fullmatch(line) for line in marks.splitlines()), marks
    assert not cancel.isError and texts(cancel)[0].startswith("click done through pointer")
