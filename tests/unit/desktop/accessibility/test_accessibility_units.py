"""The pure parts of accessibility: ids, states, queries, label and window matching, Chromium detection, what
clips an element."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from desktop.accessibility import browsers
from desktop.accessibility.atspi import STATE_BITS, decode_states, role_name
from desktop.accessibility.labels import _label_for
from desktop.accessibility.query import ElementQuery, roles_named
from desktop.accessibility.tree import Element, element_id, parse_element_id, usable_bounds
from desktop.accessibility.view import clips, visible_part
from desktop.accessibility.windows import assign_windows
from desktop.core.geometry import Bounds
from desktop.windows.query import Rect, WindowInfo


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
    from desktop.actions.batch import Click, ElementAt, Hover
    from desktop.core.errors import DomainError
    from desktop.input.coordinates import CoordinateSpace
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


SCREEN = Bounds(0, 0, 1280, 800)


def test_inside_a_page_only_documents_and_frames_clip() -> None:
    """A page's boxes do not hold what overflows them (a 100%-high body on a long page); the window, the
    page's viewport and an iframe's do."""
    window = element("frame", "Long - Chromium", bounds=Bounds(0, 0, 900, 650))
    document = element("document-web", "Long", bounds=Bounds(4, 87, 892, 559))
    wrapper = element("section", "", bounds=Bounds(4, -200, 877, 559))
    button = Bounds(4, 500, 85, 21)
    cuts = clips(SCREEN, [wrapper, document, window])
    assert [owner.role if owner else None for owner, _ in cuts] == ["document-web", "frame", None]
    assert visible_part(button, cuts) == (button, None)
    iframe = element("internal-frame", "", bounds=Bounds(6, 138, 400, 200))
    inner = element("document-web", "", bounds=Bounds(6, 138, 400, 200))
    part, cut = visible_part(Bounds(14, 546, 90, 21), clips(SCREEN, [inner, iframe, wrapper, document, window]))
    assert part is None and cut is inner


def test_a_native_toolkits_containers_all_clip() -> None:
    window = element("frame", "Pick", bounds=Bounds(0, 0, 300, 300))
    pane = element("scroll-pane", "", bounds=Bounds(10, 50, 280, 200))
    table = element("table", "", bounds=Bounds(10, 50, 280, 200))
    part, cut = visible_part(Bounds(10, 900, 280, 20), clips(SCREEN, [table, pane, window]))
    assert part is None and cut is table
    part, _ = visible_part(Bounds(10, 240, 280, 20), clips(SCREEN, [table, pane, window]))
    assert part == Bounds(10, 240, 280, 10)
