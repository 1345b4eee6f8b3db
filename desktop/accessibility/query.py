"""Element queries: which elements a `find`, an `act`, a wait or a batch step means.

Roles are AT-SPI's names (`push-button`); a query may also use the everyday names of the web's ARIA
roles (`button`, `textbox`, `checkbox`...), each standing for the AT-SPI roles toolkits give such
controls (docs/accessibility.md "Roles").
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from desktop.accessibility.atspi import ROLES, STATES
from desktop.accessibility.reading import Prefilter
from desktop.accessibility.tree import Element

ROLE_ALIASES: dict[str, frozenset[str]] = {
    "button": frozenset({"push-button", "toggle-button", "push-button-menu"}),
    "textbox": frozenset({"entry", "password-text", "text", "spin-button"}),
    "checkbox": frozenset({"check-box", "check-menu-item"}),
    "radio": frozenset({"radio-button", "radio-menu-item"}),
    "combobox": frozenset({"combo-box"}),
    "menuitem": frozenset({"menu-item", "check-menu-item", "radio-menu-item"}),
    "tab": frozenset({"page-tab"}),
    "tablist": frozenset({"page-tab-list"}),
    "switch": frozenset({"toggle-button"}),
    "listitem": frozenset({"list-item"}),
    "option": frozenset({"list-item", "menu-item"}),
    "treeitem": frozenset({"tree-item"}),
    "cell": frozenset({"table-cell"}),
    "row": frozenset({"table-row"}),
    "img": frozenset({"image", "icon"}),
    "document": frozenset({"document-web", "document-frame", "document-text"}),
    "scrollbar": frozenset({"scroll-bar"}),
    "spinbutton": frozenset({"spin-button"}),
    "progressbar": frozenset({"progress-bar"}),
}
ROLE_NAMES = frozenset(ROLES) | ROLE_ALIASES.keys()
STATE_NAMES = frozenset(STATES[1:])


class WindowScope(enum.StrEnum):
    """Which windows a tree or a query covers, besides one window by id."""

    ALL = "all"
    FOCUSED = "focused"


def canonical_name(text: str) -> str:
    """`Push Button`, `push_button` and `push-button` are one role (or state) name."""
    return re.sub(r"[\s_]+", "-", text.strip().lower())


def roles_named(role: str) -> frozenset[str]:
    """The AT-SPI roles a query's `role` stands for (ValueError if it names none)."""
    name = canonical_name(role)
    if name in ROLE_ALIASES:
        return ROLE_ALIASES[name]
    if name in ROLES:
        return frozenset({name})
    raise ValueError(f"unknown role {role!r}")


@dataclass(frozen=True)
class ElementQuery:
    """What a caller looks for; every given criterion must hold."""

    roles: frozenset[str] | None = None
    name: str | None = None
    name_contains: str | None = None
    name_regex: re.Pattern[str] | None = None
    states: frozenset[str] = frozenset()
    window: WindowScope | int = WindowScope.ALL
    include_hidden: bool = False
    """By default only elements showing on the screen match."""
    limit: int = 20

    def matches(self, element: Element) -> bool:
        if self.roles is not None and element.role not in self.roles:
            return False
        if not self.include_hidden and not element.showing:
            return False
        return self.name_matches(element.name) and self.states <= element.states

    def name_matches(self, name: str) -> bool:
        if self.name is not None and name.strip() != self.name.strip():
            return False
        if self.name_contains is not None and self.name_contains.casefold() not in name.casefold():
            return False
        return self.name_regex is None or self.name_regex.search(name) is not None

    @property
    def prefilter(self) -> Prefilter:
        """What reading uncached objects may leave out for this query."""
        return Prefilter(roles=self.roles, states=self.states, showing_only=not self.include_hidden,
                         name_matches=self.name_matches)

    def describe(self) -> str:
        """The query in words, for messages: `push-button named 'Save'`."""
        parts = ["/".join(sorted(self.roles)) if self.roles else "element"]
        if self.name is not None:
            parts.append(f"named {self.name!r}")
        if self.name_contains is not None:
            parts.append(f"with {self.name_contains!r} in its name")
        if self.name_regex is not None:
            parts.append(f"with a name matching {self.name_regex.pattern!r}")
        if self.states:
            parts.append(f"that is {', '.join(sorted(self.states))}")
        if self.window != WindowScope.ALL:
            parts.append(f"in window {self.window}")
        return " ".join(parts)


Target = str | int | ElementQuery
"""An element's id, a number of the last set-of-marks screenshot, or a query that must match exactly one."""
