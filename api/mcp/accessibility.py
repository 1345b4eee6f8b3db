"""The accessibility tools of `sandbox-desktop mcp`: `tree`, `find` and `act` (docs/accessibility.md,
docs/mcp.md), and the mark list `screenshot` adds with `som`.

Elements are answered as text, one line per element (`role "name" value="..." [states] (id) at x,y wxh`),
not as the API's JSON: a model reads the tree's shape from the indentation, and a window of a few hundred
elements costs a fraction of the tokens its JSON would.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from api.mcp.tools import REPORT_EFFECT, Reply, Tool, api_error_text, integer, obj, string, with_effect
from sandbox_desktop_client import ConflictError
from sandbox_desktop_wire.accessibility import AccessibleNode, ActResponse, ElementAction, Mark

if TYPE_CHECKING:
    from sandbox_desktop_client import AsyncClient

TEXT_CHARS = 200
"""A name or value is cut here: a paragraph's or a document's text would drown the structure."""
STATES_SHOWN = ("focused", "active", "checked", "indeterminate", "selected", "pressed", "expanded", "collapsed",
                "modal", "required", "invalid-entry", "read-only", "is-default", "busy")
"""The states worth a model's attention; `showing`, `visible`, `enabled`... hold for nearly every element."""
INDENT = "  "


def quoted(text: str) -> str:
    """`text` as a JSON string (quotes and line breaks escaped: one element stays one line), cut if long."""
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS] + "…"
    return json.dumps(text, ensure_ascii=False)


def shown_states(states: Iterable[str]) -> list[str]:
    held = set(states)
    shown = [s for s in STATES_SHOWN if s in held]
    # Their absence is what matters: nearly every element is enabled and showing.
    if "enabled" not in held:
        shown.append("disabled")
    if "showing" not in held:
        shown.append("hidden")
    return shown


def element_line(node: AccessibleNode, level: int = 0) -> str:
    parts = [INDENT * level + node.role, quoted(node.name)]
    if node.value is not None:
        parts.append("value=" + quoted(node.value))
    states = shown_states(node.states)
    if states:
        parts.append(f"[{', '.join(states)}]")
    parts.append(f"({node.id})")
    if node.bounds is not None:
        b = node.bounds
        parts.append(f"at {b.x},{b.y} {b.width}x{b.height}")
    return " ".join(parts)


def tree_lines(nodes: Iterable[AccessibleNode], level: int = 0) -> Iterator[str]:
    for node in nodes:
        yield element_line(node, level)
        yield from tree_lines(node.children or (), level + 1)


def lines_reply(lines: Iterable[str], empty: str) -> Reply:
    return Reply(["\n".join(lines) or empty])


def marks_text(marks: Iterable[Mark]) -> str:
    """`screenshot` with `som`: what each number on the image is."""
    return "\n".join(f"{m.mark}: {m.role} {quoted(m.name)} ({m.id})" for m in marks) or "no element marked"


def act_text(done: ActResponse) -> str:
    where = f" at {done.x},{done.y}" if done.x is not None and done.y is not None else ""
    return f"{done.action.value} done through {done.through.value}{where}\n{element_line(done.element)}"


async def tree(client: AsyncClient, args: dict[str, Any]) -> Reply:
    answer = await client.tree(window=args.get("window", "all"), depth=args.get("depth"),
                               interactive=args.get("interactive", False))
    return lines_reply(tree_lines(answer.windows), "no window has accessible elements")


async def find(client: AsyncClient, args: dict[str, Any]) -> Reply:
    found = await client.find(role=args.get("role"), name=args.get("name"), name_contains=args.get("nameContains"),
                              name_regex=args.get("nameRegex"), states=args.get("states", ()),
                              window=args.get("window", "all"), include_hidden=args.get("includeHidden", False),
                              limit=args.get("limit", 20))
    return lines_reply(map(element_line, found), "no element matches")


def candidate_line(candidate: dict[str, Any]) -> str:
    """One of a 409 `element_ambiguous`'s candidates (id, role, name, bounds)."""
    bounds = candidate.get("bounds") or {}
    where = f" at {bounds['x']},{bounds['y']} {bounds['width']}x{bounds['height']}" if bounds else ""
    return f"{candidate.get('role')} {quoted(str(candidate.get('name', '')))} ({candidate.get('id')}){where}"


async def act(client: AsyncClient, args: dict[str, Any]) -> Reply:
    try:
        done = await client.act(args["element"], args["action"], value=args.get("value"),
                                scroll_into_view=args.get("scrollIntoView", True),
                                report_effect=args.get("reportEffect") or None)
    except ConflictError as e:
        candidates = e.problem.get("candidates")
        if e.code != "element_ambiguous" or not isinstance(candidates, list):
            raise
        # The candidates let the model pick one by id in its next call instead of guessing a narrower query.
        return Reply(["\n".join([api_error_text(e), *map(candidate_line, candidates)])], is_error=True)
    return Reply([with_effect(act_text(done), done.effect)])


WINDOW = string("`all`, `focused`, or a window id from the windows tool", default="all")
QUERY = {
    "role": string("button, textbox, checkbox, radio, combobox, link, menuitem, tab, listitem... or an AT-SPI role "
                   "as tree shows it (push-button, text, check-box, label)"),
    "name": string("The exact name (label) of the element"),
    "nameContains": string("A case-insensitive part of the name"),
    "nameRegex": string("A Python regular expression searched in the name"),
    "states": {"type": "array", "items": {"type": "string"}, "description": "States it must all have, e.g. "
               "[\"enabled\", \"checked\"] (focused, checked, selected, expanded, editable, ...)"},
    "window": WINDOW,
    "includeHidden": {"type": "boolean", "default": False, "description": "Also elements not showing"},
}
ELEMENT = {"anyOf": [
    {"type": "string", "description": "An element id, the (…) of a tree or find line"},
    {"type": "integer", "minimum": 1, "description": "A number drawn by screenshot with som"},
    {**obj((), **QUERY), "description": "A query that must match exactly one element"},
], "description": "The element: its id, its number on the last screenshot with som, or a query object "
   "(e.g. {\"role\": \"button\", \"name\": \"OK\"})"}
LINE = ("one line per element: role \"name\" value=\"...\" [states] (id) at x,y widthxheight, in screen pixels")

TOOLS = [
    Tool("tree", "The accessibility tree of the windows: buttons, fields, labels with their names, values and "
         f"states, as {LINE}, indented under its parent. Cheaper and exacter than reading a screenshot; "
         "window=focused with interactive=true is the short list of what can be acted on.", obj(
             window=WINDOW,
             depth=integer("Levels below each window (default: all)", minimum=0, maximum=100),
             interactive={"type": "boolean", "default": False, "description": "Only what can be acted on "
                          "(buttons, fields, links, check boxes, tabs, menu items), as a flat list per window"}),
         tree),
    Tool("find", f"Find elements matching every given criterion, in reading order, as {LINE}.", obj((),
        **QUERY, limit=integer("At most this many (default 20)", minimum=1, maximum=1000)), find),
    Tool("act", "Act on one element instead of on pixels: click (a real click at its centre), focus, invoke (its "
         "default action without the pointer), setValue (type value into a field, replacing its text) or "
         "select. A query matching no element or several is an error listing the candidates.", obj(
             ["element", "action"], element=ELEMENT,
             action=string("What to do", *(a.value for a in ElementAction)),
             value=string("setValue: the text (or number) to set"),
             scrollIntoView={"type": "boolean", "default": True, "description": "click, and typing into a page's "
                             "field: first scroll an element that is out of view into it (false: an error instead)"},
             reportEffect=REPORT_EFFECT),
         act),
]
