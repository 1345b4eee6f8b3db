"""`Desktop`: what the `desktop` fixture gives a test. Every method of the Python client's `DesktopClient`
(docs/client.md), plus assertions that wait: for a window, for an element, for the screen to change.

They are built on `POST /v1/desktop/wait` (docs/events.md), which answers as soon as the condition holds,
so a passing assertion costs a few milliseconds. A failing one raises `AssertionError` saying what was
expected and what the desktop showed last, as pytest reports any failed `assert`, never a timeout
exception from deep inside an HTTP call.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from sandbox_desktop_client import ApiError, DesktopClient

WindowUntil = Literal["present", "gone", "focused"]
MAX_SCREEN_ROUNDS = 1000
"""Bound on the wait-then-compare rounds of one `expect_screen_change` (each takes at least one draw)."""


def _describe_window(window: dict[str, Any]) -> str:
    parts = [f"{window.get('title')!r}"]
    if window.get("class"):
        parts.append(f"class {window['class']}")
    if window.get("pid"):
        parts.append(f"pid {window['pid']}")
    parts.append(f"id {window.get('windowId')}")
    return f"{parts[0]} ({', '.join(parts[1:])})"


def _describe_element(element: dict[str, Any]) -> str:
    states = ", ".join(element.get("states", []))
    return f"{element.get('role')} {element.get('name')!r} [{states}]"


def _criteria(**given: Any) -> str:
    return " ".join(f"{name}={value!r}" for name, value in given.items() if value not in (None, (), []))


class Desktop(DesktopClient):
    """The `desktop` fixture's handle: a `DesktopClient` on this test's desktop (its own, never shared with
    another test running at the same time) with waiting assertions."""

    def expect_window(self, *, title: str | None = None, title_regex: str | None = None,
                      wm_class: str | None = None, pid: int | None = None, until: WindowUntil = "present",
                      timeout: float = 10.0) -> dict[str, Any]:
        """Wait until a window matching every given selector is `present` (default), `focused` or `gone`:
        `title` exact, `title_regex` searched in the title, `wm_class` its WM_CLASS instance or class.
        Returns the window as the wait reports it (`windowId`, `title`, `class`, `pid`, `x`, `y`, `width`,
        `height`). Raises `AssertionError` listing the desktop's windows when `timeout` (seconds) passes."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        condition = {"title": title, "titleRegex": title_regex, "class": wm_class, "pid": pid, "until": until}
        answer = self.wait(window={k: v for k, v in condition.items() if v is not None},
                           timeout_ms=round(timeout * 1000))
        if answer.matched:
            return dict((answer.match or {}).get("window") or {})
        what = _criteria(title=title, title_regex=title_regex, wm_class=wm_class, pid=pid) or "any window"
        last = answer.last_state or {}
        windows = [_describe_window(w) for w in self._all_windows()]
        message = [f"expected a window {what} to be {until} within {timeout:g} s"]
        if until == "gone":
            message.append("still there: " + ", ".join(_describe_window(w) for w in last.get("windows", [])))
        message.append("windows on the desktop: " + (", ".join(windows) or "none"))
        message.append(f"focused window id: {last.get('focusedWindowId')}")
        raise AssertionError("\n".join(message))

    def expect_element(self, *, role: str | None = None, name: str | None = None, name_contains: str | None = None,
                       name_regex: str | None = None, states: Iterable[str] = (), window: str = "all",
                       until: str = "present", timeout: float = 10.0) -> dict[str, Any]:
        """Wait until an accessible element matching the query (docs/accessibility.md "Find") is `present`
        (default), `gone`, or has the state `until` (`enabled`, `checked`, `focused`...). Returns the
        element as the wait reports it (`id`, `role`, `name`, `states`, `bounds`). Raises `AssertionError`
        listing what matches the query now, and with which states, when `timeout` (seconds) passes."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        query = {"role": role, "name": name, "nameContains": name_contains, "nameRegex": name_regex,
                 "states": list(states) or None, "window": window}
        query = {k: v for k, v in query.items() if v is not None}
        answer = self.wait(element={**query, "until": until}, timeout_ms=round(timeout * 1000))
        if answer.matched:
            return dict((answer.match or {}).get("element") or {})
        what = _criteria(role=role, name=name, name_contains=name_contains, name_regex=name_regex,
                         states=list(states), window=None if window == "all" else window) or "(any)"
        message = [f"expected an element {what} to be {until} within {timeout:g} s"]
        message.append("matching now: " + self._elements_now(query))
        if role is not None and (name or name_contains or name_regex):
            message.append(f"elements with role {role!r}: " + self._elements_now({"role": role, "window": window}))
        raise AssertionError("\n".join(message))

    @contextlib.contextmanager
    def expect_screen_change(self, *, region: Sequence[int] | None = None, timeout: float = 5.0) -> Iterator[None]:
        """A `with` block that must change the screen's pixels (in `region`: x, y, width, height in screen
        pixels), within `timeout` seconds after the block ends:

            with desktop.expect_screen_change(region=(0, 0, 400, 100)):
                desktop.type_text("hello")

        The pixels before the block are compared with those after it; until they differ it waits for the
        next drawing there (a `screen` wait with `until: changed`), so a change already made when the
        block ends passes at once and one still to come passes as soon as it is drawn. Raises
        `AssertionError` saying how much was drawn meanwhile when the pixels stay the same."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        box = tuple(region) if region is not None else None
        before = self._pixels(box)
        yield
        deadline = time.monotonic() + timeout
        condition: dict[str, Any] = {"until": "changed"}
        if box is not None:
            condition["region"] = dict(zip(("x", "y", "width", "height"), box, strict=True))
        draws = 0
        for _ in range(MAX_SCREEN_ROUNDS):
            if self._pixels(box) != before:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            answer = self.wait(screen=condition, timeout_ms=max(1, round(remaining * 1000)))
            if not answer.matched:
                # A drawing between the last comparison and the wait's start is not reported: compare once more.
                if self._pixels(box) != before:
                    return
                break
            draws += 1
        where = f"in region {box}" if box is not None else "anywhere on the screen"
        raise AssertionError(f"expected the screen to change {where} within {timeout:g} s of the block's end; "
                             f"the pixels stayed the same ({draws} drawing(s) touched it, leaving the same image)")

    def wait_settled(self, *, quiet_ms: int = 300, region: Sequence[int] | None = None,
                     timeout: float = 10.0) -> None:
        """Wait until nothing is drawn (in `region`) for `quiet_ms`: before comparing pixels. Raises
        `AssertionError` when the screen keeps changing for `timeout` seconds."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        condition: dict[str, Any] = {"until": "settled", "quietMs": quiet_ms}
        if region is not None:
            condition["region"] = dict(zip(("x", "y", "width", "height"), region, strict=True))
        answer = self.wait(screen=condition, timeout_ms=round(timeout * 1000))
        if not answer.matched:
            raise AssertionError(f"expected the screen to settle ({quiet_ms} ms without drawing) within {timeout:g} s; "
                                 f"last seen: {answer.last_state}")

    def _pixels(self, box: tuple[int, ...] | None) -> bytes:
        # The server's PNG encoding of the same pixels is the same bytes: no need to decode.
        return self.screenshot(region=box).data

    def _all_windows(self) -> list[dict[str, Any]]:
        try:
            return [{"windowId": w.id, "title": w.title, "pid": w.pid} for w in self.windows()]
        except ApiError:
            return []

    def _elements_now(self, query: dict[str, Any]) -> str:
        try:
            found = self.find(role=query.get("role"), name=query.get("name"),
                              name_contains=query.get("nameContains"), name_regex=query.get("nameRegex"),
                              window=query.get("window", "all"), limit=10)
        except ApiError as error:
            return f"(cannot tell: {error.code})"
        if not found:
            return "none"
        return ", ".join(_describe_element(node.model_dump(mode="json")) for node in found)
