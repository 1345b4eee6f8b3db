"""The Python client's accessibility methods (`tree`, `find`, `act`, `marks`, `screenshot(som=True)`), sync and
async, on zenity's GTK 3 form, and the errors they raise."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Iterator

import httpx
import pytest

from sandbox_desktop_client import AsyncClient, Client, ClientError, ConflictError, NotFoundError
from sandbox_desktop_wire.accessibility import AccessibleNode
from sandbox_desktop_wire.elements import ElementQuery
from tests.api.accessibility.test_accessibility import exited, output_of
from tests.clients.python.test_client import png_size
from tests.conftest import ServerProcess, wait_for

DESKTOP = {"displayNum": 357, "width": 1024, "height": 768}

pytestmark = pytest.mark.skipif(not shutil.which("zenity"), reason="needs zenity (scripts/setup.sh test)")


@contextlib.contextmanager
def zenity_form(api: httpx.Client) -> Iterator[str]:
    """zenity's GTK 3 form on the module's desktop: entries `Full name` and `City`, OK and Cancel; on OK it
    prints `name|city`. Yields its process id."""
    started = api.post("/v1/processes", json={"command": "zenity", "args": [
        "--forms", "--title=Shipping", "--add-entry=Full name", "--add-entry=City"]})
    assert started.status_code == 200, started.text
    process_id: str = started.json()["id"]
    try:
        yield process_id
    finally:
        api.post(f"/v1/processes/{process_id}/kill")


@pytest.fixture(scope="module")
def desk(srv: ServerProcess) -> Iterator[Client]:
    with Client(srv.url, token=srv.token) as client:
        yield client


def entry(desk: Client, name: str) -> AccessibleNode:
    """The form's entry, once zenity has put it on the accessibility bus."""
    found: list[AccessibleNode] = wait_for(lambda: desk.find(role="textbox", name=name), f"the {name} entry", 15)
    [element] = found
    return element


def test_a_form_is_filled_by_element_and_submitted_by_mark(desk: Client, api: httpx.Client) -> None:
    with zenity_form(api) as process_id:
        name = entry(desk, "Full name")
        assert name.role == "text" and "setValue" in name.actions and name.bounds is not None
        assert desk.act(name.id, "setValue", value="Ada ✓").through == "accessibility"
        desk.act(ElementQuery(role="textbox", name="City"), "setValue", value="Oslo")
        assert [e.value for e in desk.find(role="textbox", name_contains="cit")] == ["Oslo"]

        [window] = desk.tree(window="focused").windows
        assert (window.role, window.name) == ("dialog", "Shipping") and window.children
        flat = desk.tree(window=window.window_id or "", interactive=True)
        [controls] = [w.children or [] for w in flat.windows]
        assert {c.name for c in controls} >= {"OK", "Cancel", "Full name", "City"}
        assert flat.count == 1 + len(controls)
        assert all(not c.children for c in desk.tree(window="focused", depth=1).windows[0].children or [])

        shot = desk.screenshot(som=True, scale=0.5)
        marks = desk.marks()
        assert shot.marks == len(marks) >= 4 and png_size(shot.data) == (512, 384)
        assert desk.screenshot().marks is None
        ok = next(m for m in marks if m.role == "push-button" and m.name == "OK")
        clicked = desk.act(ok.mark, "click")
        assert clicked.through == "pointer" and clicked.element.id == ok.id
        assert exited(api, process_id)["exitCode"] == 0
        assert output_of(api, process_id).strip() == "Ada ✓|Oslo"


def test_missing_ambiguous_and_wrong_queries_raise(desk: Client, api: httpx.Client) -> None:
    with zenity_form(api):
        entry(desk, "City")
        with pytest.raises(NotFoundError) as missing:
            desk.act({"name": "No such thing anywhere"}, "click")
        assert (missing.value.status, missing.value.code) == (404, "element_not_found")
        with pytest.raises(ConflictError) as ambiguous:
            desk.act({"role": "textbox"}, "focus")
        assert (ambiguous.value.status, ambiguous.value.code) == (409, "element_ambiguous")
        candidates = ambiguous.value.problem["candidates"]
        assert {c["name"] for c in candidates} == {"Full name", "City"}
        with pytest.raises(ClientError) as wrong:
            desk.find(role="buton")
        assert wrong.value.status == 400 and wrong.value.problem["errors"][0]["field"] == "role"


def test_the_async_client_finds_and_acts(srv: ServerProcess, desk: Client, api: httpx.Client) -> None:
    async def scenario() -> None:
        async with AsyncClient(srv.url, token=srv.token) as client:
            [city] = await client.find(role="textbox", name="City", window="focused")
            await client.act(city.id, "setValue", value="Rome")
            tree = await client.tree(window="focused", interactive=True)
            assert "Rome" in {c.value for w in tree.windows for c in w.children or []}
            await client.act({"role": "button", "name": "OK"}, "invoke")

    with zenity_form(api) as process_id:
        entry(desk, "City")
        asyncio.run(scenario())
        exited(api, process_id)
        assert output_of(api, process_id).strip() == "|Rome"
