"""An effect's regions and its one-line summary (desktop/effects/effect.py), from values the observer gathers."""

from __future__ import annotations

from desktop.core.geometry import Bounds
from desktop.effects.effect import MAX_REGIONS, Effect, FocusSeen, WindowSeen, element_change, merge_regions


def test_areas_that_touch_or_come_close_are_one_region() -> None:
    glyphs = [Bounds(10 + 7 * i, 30, 6, 13) for i in range(5)]  # five typed characters side by side
    assert merge_regions(glyphs) == (Bounds(10, 30, 34, 13),)
    apart = merge_regions([Bounds(0, 0, 10, 10), Bounds(500, 500, 40, 40)])
    assert apart == (Bounds(500, 500, 40, 40), Bounds(0, 0, 10, 10))  # largest first


def test_more_separate_areas_than_the_limit_are_their_bounding_box() -> None:
    scattered = [Bounds(100 * i, 100 * i, 5, 5) for i in range(MAX_REGIONS + 1)]
    assert merge_regions(scattered) == (Bounds(0, 0, 100 * MAX_REGIONS + 5, 100 * MAX_REGIONS + 5),)
    assert len(merge_regions(scattered[:MAX_REGIONS])) == MAX_REGIONS


def test_the_summary_says_what_changed_most_telling_first() -> None:
    effect = Effect(regions=(Bounds(100, 220, 312, 40), Bounds(0, 0, 5, 5)),
                    windows_opened=(WindowSeen(7, "Save As"),), focus=FocusSeen(7, "Save As"), watched_ms=120)
    assert effect.changed
    assert effect.summary == ("window 'Save As' opened; focus moved to 'Save As'; "
                              "screen changed in 312x40 at (100,220) and 1 more area")


def test_nothing_seen_says_the_action_may_have_missed() -> None:
    effect = Effect(watched_ms=301)
    assert not effect.changed
    assert effect.summary == "no visible change within 301 ms: the action may have missed its target"


def test_an_element_change_names_its_value_and_states() -> None:
    change = element_change("e1", "check-box", "Subscribe", frozenset({"enabled"}), frozenset({"enabled", "checked"}),
                            None, None)
    assert change.states_added == ("checked",) and change.states_removed == () and change.changed
    assert Effect(element=change).summary == "check-box 'Subscribe': now checked"
    typed = element_change("e2", "entry", "Name", frozenset(), frozenset(), "", "Ada")
    assert Effect(element=typed).summary == "entry 'Name': value '' -> 'Ada'"
    same = element_change("e3", "entry", "Name", frozenset({"focused"}), frozenset({"focused"}), "x", "x")
    assert not same.changed and not Effect(element=same, watched_ms=5).changed
