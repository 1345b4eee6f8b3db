"""The pure parts of accessibility: ids, states, queries, label and window matching, Chromium detection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from desktop.accessibility import browsers
from desktop.accessibility.atspi import STATE_BITS, decode_states, role_name
from desktop.accessibility.labels import _label_for
from desktop.accessibility.query import ElementQuery, roles_named
from desktop.accessibility.tree import Bounds, Element, element_id, parse_element_id, usable_bounds
from desktop.accessibility.windows import assign_windows
from desktop.windows import Rect, WindowInfo


def element(role: str = "push-button", name: str = "OK", states: tuple[str, ...] = ("showing", "visible"),
            **extra: object) -> Element:
    return Element(bus=":1.7", path="/org/a11y/atspi/accessible/42", role=role, name=name, description="",
                   states=frozenset(states), interfaces=frozenset(), parent=None, index=0, **extra)  # type: ignore[arg-type]


def test_ids_round_trip_and_refuse_anything_else() -> None:
    assert element_id(":1.42", "/org/a11y/atspi/accessible/318") == "1.42:318"
    assert parse_element_id("1.42:318") == (":1.42", "/org/a11y/atspi/accessible/318")
    assert parse_element_id("1.42:root") == (":1.42", "/org/a11y/atspi/accessible/root")
    for bad in ("", "318", "a.b:3", "1.4:", ":3", "1.4:../../x", "1.4:3 4"):
        assert parse_element_id(bad) is None, bad


def test_state_words_decode_to_names() -> None:
    words = [(1 << STATE_BITS["focused"]) | (1 << STATE_BITS["enabled"]), 1 << (STATE_BITS["read-only"] - 32)]
    assert decode_states(words) == {"focused", "enabled", "read-only"}
    assert decode_states([]) == frozenset()
    assert role_name(43) == "push-button" and role_name(9999) == "unknown"


def test_junk_bounds_are_no_bounds() -> None:
    assert usable_bounds(-2147483648, -2147483648, 10, 10) is None  # GTK: not laid out
    assert usable_bounds(5, 5, 0, 20) is None  # Chromium: hidden
    assert usable_bounds(5, 6, 7, 8) == Bounds(5, 6, 7, 8)


def test_queries_match_roles_by_alias_names_and_states() -> None:
    assert roles_named("Button") == {"push-button", "toggle-button", "push-button-menu"}
    assert roles_named("push button") == {"push-button"}
    with pytest.raises(ValueError):
        roles_named("buton")
    ok = element(states=("showing", "visible", "enabled"))
    assert ElementQuery(roles=roles_named("button"), name=" OK ").matches(ok)
    assert ElementQuery(name_contains="ok").matches(ok)
    assert ElementQuery(name_regex=re.compile("^O")).matches(ok)
    assert not ElementQuery(states=frozenset({"checked"})).matches(ok)
    hidden = element(states=("enabled",))
    assert not ElementQuery(name="OK").matches(hidden)
    assert ElementQuery(name="OK", include_hidden=True).matches(hidden)


def test_an_unnamed_field_takes_the_label_left_of_it_or_right_above() -> None:
    field = Bounds(200, 100, 150, 30)
    labels = [("Far away", Bounds(0, 105, 40, 20)), ("City", Bounds(120, 105, 60, 20)),
              ("Heading", Bounds(200, 60, 100, 20))]
    assert _label_for(field, labels) == "City"
    assert _label_for(field, labels[2:]) == "Heading"
    assert _label_for(field, [("Below", Bounds(200, 140, 60, 20))]) is None


def test_frames_match_windows_by_pid_title_and_geometry() -> None:
    a = element(role="frame", name="Editor", pid=10, bounds=Bounds(0, 0, 400, 300))
    b = element(role="frame", name="Other", pid=10, bounds=Bounds(500, 0, 200, 200))
    hidden = element(role="frame", name="", pid=10, bounds=None)
    windows = [WindowInfo(7, "Other", Rect(500, 0, 200, 200), Rect(500, 0, 200, 220), False, 10),
               WindowInfo(8, "Editor", Rect(0, 0, 400, 300), Rect(0, 0, 400, 320), True, 10)]
    assign_windows([a, b, hidden], windows)
    assert (a.window_id, b.window_id, hidden.window_id) == (8, 7, None)


def test_chromium_family_gets_the_renderer_switch(tmp_path: Path) -> None:
    assert browsers.with_accessibility("/usr/bin/chromium", ["--x"]) == [browsers.SWITCH, "--x"]
    assert browsers.with_accessibility("/usr/bin/chromium", [browsers.SWITCH]) == [browsers.SWITCH]
    electron = tmp_path / "app" / "my-app"
    electron.parent.mkdir()
    electron.write_text("")
    assert not browsers.is_chromium_family(str(electron))
    (electron.parent / "v8_context_snapshot.bin").write_text("")
    assert browsers.is_chromium_family(str(electron))
    assert browsers.with_accessibility("/usr/bin/xterm", ["-T", "x"]) == ["-T", "x"]


def test_the_debian_hook_is_written_once_and_only_where_the_wrapper_reads(tmp_path: Path) -> None:
    assert browsers.install_debian_hook(tmp_path / "missing") is None
    path = browsers.install_debian_hook(tmp_path)
    assert path is not None and "SANDBOX_DESKTOP_ACCESSIBILITY" in path.read_text()
    assert browsers.SWITCH in path.read_text()
    assert browsers.install_debian_hook(tmp_path) == path


def test_vendor_actions_take_a_mark_instead_of_coordinates() -> None:
    from desktop.actions import Click, ElementAt, Hover
    from desktop.coordinates import CoordinateSpace
    from desktop.errors import DomainError
    from desktop.vendors import anthropic, openai

    space = CoordinateSpace.screen(800, 600)
    claude = anthropic.Translator(anthropic.Tool("computer_20250124", 800, 600), space)
    assert claude.plan({"action": "left_click", "element": 3}).steps == [Click(ElementAt(3), "left", 1, ())]
    assert claude.plan({"action": "mouse_move", "element": "1.2:3"}).steps == [Hover(ElementAt("1.2:3"))]
    with pytest.raises(DomainError):
        claude.plan({"action": "left_click", "element": 3, "coordinate": [1, 2]})
    gpt = openai.Translator(space)
    assert gpt.step({"type": "double_click", "element": 7}, "call.action") == Click(ElementAt(7), "left", 2, ())
    with pytest.raises(DomainError):
        gpt.step({"type": "click", "element": True}, "call.action")


def test_processes_on_a_desktop_start_chromium_with_the_switch() -> None:
    from api.routes.processes import accessible_args

    on_desktop = {"SANDBOX_DESKTOP_ACCESSIBILITY": "1", "PATH": "/usr/bin:/bin"}
    assert accessible_args("chromium", ["about:blank"], on_desktop)[0] == browsers.SWITCH
    assert accessible_args("chromium", ["about:blank"], {"PATH": "/usr/bin"}) == ["about:blank"]
    assert accessible_args("ls", None, on_desktop) == []


# -- pending element waits: what a change names, the quick check and its fall-back ----------------------------

def test_a_change_names_its_child_and_whether_a_state_was_gained() -> None:
    from dbus_fast import Variant

    from desktop.accessibility.signals import _subject_fields

    added = ["add", 0, 0, Variant("(so)", [":1.9", "/org/a11y/atspi/accessible/77"]), {}]
    assert _subject_fields("ChildrenChanged", ":1.9", added) == {"child": "1.9:77"}
    unnamed = ["add", 0, 0, Variant("(so)", ["", "/org/a11y/atspi/accessible/5"]), {}]
    assert _subject_fields("ChildrenChanged", ":1.4", unnamed) == {"child": "1.4:5"}
    null = ["remove", 0, 0, Variant("(so)", [":1.9", "/org/a11y/atspi/null"]), {}]
    assert _subject_fields("ChildrenChanged", ":1.9", null) == {}
    assert _subject_fields("StateChanged", ":1.9", ["showing", 1, 0, Variant("i", 0), {}]) == {"gained": True}
    assert _subject_fields("StateChanged", ":1.9", ["showing", 0, 0, Variant("i", 0), {}]) == {"gained": False}
    assert _subject_fields("PropertyChange", ":1.9", ["accessible-name", 0, 0, Variant("s", "x"), {}]) == {}


def test_kept_windows_give_fresh_snapshots_and_scopes() -> None:
    from desktop.accessibility.query import WindowScope
    from desktop.accessibility.windows import WindowTops

    shown = element(role="frame", name="Editor", window_id=8, child_count=0)
    shown.children.append("1.7:99")
    other = Element(bus=":1.8", path="/org/a11y/atspi/accessible/3", role="frame", name="Popup", description="",
                    states=frozenset(), interfaces=frozenset(), parent=None, index=1)
    windows = [WindowInfo(8, "Editor", Rect(0, 0, 400, 300), Rect(0, 0, 400, 320), True, 10)]
    tops = WindowTops([], [shown, other], windows)
    snapshot, listed = tops.fresh()
    copy = snapshot.elements[shown.id]
    assert copy is not shown and copy.children == [] and copy.child_count == 1 and copy.window_id == 8
    assert shown.children == ["1.7:99"] and listed == windows  # the kept one is untouched
    assert tops.in_scope(WindowScope.ALL) == {shown.id: 8}
    assert tops.in_scope(WindowScope.FOCUSED) == {shown.id: 8}
    assert tops.in_scope(9) == {}


class FakeReader:
    """An ElementReader answering from fixed lists, recording what the tracker asked: `whole` is what a full
    check finds from the second one on (the first: only when `from_start`), `below` what a quick one does."""

    def __init__(self, below: list[Element], whole: list[Element], from_start: bool = False) -> None:
        self.below, self.whole, self.from_start = below, whole, from_start
        self.asked: list[str] = []
        self.forgotten = 0

    def forget_windows(self) -> None:
        self.forgotten += 1

    def is_window_change(self, element: str, change: str) -> bool:
        return change.startswith("window:")

    async def find(self, query: ElementQuery) -> list[Element]:
        self.asked.append("find")
        there = self.from_start or self.asked.count("find") > 1
        return [e for e in self.whole if there and query.matches(e)]

    async def find_below(self, query: ElementQuery, element: str) -> list[Element]:
        self.asked.append(f"below {element}")
        return [e for e in self.below if query.matches(e)]


def changed(change: str, t: float, **data: object) -> object:
    import time

    from desktop.events import Event
    from sandbox_desktop_wire.events import EventType

    return Event(1, EventType.ACCESSIBILITY_CHANGED, time.monotonic() + t, "", {"element": "1.7:1", "change": change,
                                                                              **data})


def run_checks(until: str, reader: FakeReader, events: list[object | None]) -> list[bool]:
    import asyncio
    import contextlib

    from desktop.waits import MIN_CHECK_INTERVAL_S, ElementCondition, ElementTracker

    async def never(_query: ElementQuery) -> list[Element]:
        raise AssertionError("the reader's find is used while watching")

    @contextlib.asynccontextmanager
    async def watching() -> object:
        yield reader

    query = ElementQuery(roles=frozenset({"push-button"}), name="Late")
    tracker = ElementTracker(ElementCondition(query, until, never, watching))  # type: ignore[arg-type]

    async def go() -> list[bool]:
        answers = []
        async with tracker.watching():
            for event in events:
                answers.append((await tracker.check(event)).matched)  # type: ignore[arg-type]
                await asyncio.sleep(MIN_CHECK_INTERVAL_S)  # past the burst interval: each full check runs
        return answers
    return asyncio.run(go())


def test_a_child_added_is_checked_first_and_the_full_check_follows_a_miss() -> None:
    late = element(name="Late")
    added = changed("object:children-changed:add", 1, child="1.7:42")
    hit = FakeReader(below=[late], whole=[])
    assert run_checks("present", hit, [None, added]) == [False, True]
    assert hit.asked == ["find", "below 1.7:42"]  # answered from the child alone
    miss = FakeReader(below=[], whole=[late])
    assert run_checks("present", miss, [None, added]) == [False, True]
    assert miss.asked == ["find", "below 1.7:42", "find"]  # nothing below the child: the whole check found it


def test_only_changes_that_can_reveal_an_element_are_checked_quickly() -> None:
    late = element(name="Late", states=("showing", "visible", "enabled"))
    reader = FakeReader(below=[late], whole=[])
    lost = changed("object:state-changed:showing", 1, gained=False)
    gained = changed("object:state-changed:enabled", 2, gained=True)
    assert run_checks("enabled", reader, [None, lost, gained]) == [False, False, True]
    assert reader.asked == ["find", "find", "below 1.7:1"]
    gone = FakeReader(below=[late], whole=[late], from_start=True)
    assert run_checks("gone", gone, [None, changed("object:children-changed:add", 1, child="1.7:42")]) == [False, False]
    assert gone.asked == ["find", "find"]  # `gone` never answers from one object


def test_window_changes_make_the_kept_windows_read_again() -> None:
    from desktop.events import Event
    from sandbox_desktop_wire.events import EventType

    reader = FakeReader(below=[], whole=[])
    created = Event(2, EventType.WINDOW_CREATED, 1e12, "", {"windowId": "5"})
    assert run_checks("present", reader, [None, changed("window:create", 1), created,
                                          changed("object:children-changed:remove", 2)]) == [False] * 4
    assert reader.forgotten == 3  # the first check, the accessibility `window:` event and the X window event


def test_the_kept_windows_are_read_again_after_changes_to_windows_or_applications() -> None:
    from desktop.accessibility.tree import Application
    from desktop.accessibility.watch import ElementWatch
    from desktop.accessibility.windows import WindowTops

    watch = ElementWatch(None, None)  # type: ignore[arg-type]  # only the kept windows are looked at here
    watch._tops = WindowTops([Application(":1.7", "App", 10)], [element(role="frame")], [])
    top = element().id  # 1.7:42, the frame
    assert not watch.is_window_change("1.7:99", "object:children-changed:add")  # inside a known window
    assert watch.is_window_change(top, "object:property-change:accessible-name")  # the window retitled
    assert watch.is_window_change("1.7:root", "object:children-changed:add")  # a window added to the app
    assert watch.is_window_change("1.2:root", "object:children-changed:add")  # the registry: an app came
    assert watch.is_window_change("1.9:5", "object:children-changed:add")  # an app not read yet
    assert watch.is_window_change("1.7:99", "window:activate")
    watch.forget_windows()
    assert not watch.is_window_change("1.9:5", "object:children-changed:add")  # nothing kept: read at the next check
