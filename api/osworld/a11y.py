"""`/accessibility`'s XML from the desktop's own AT-SPI tree (desktop/accessibility/): the element and
attribute names upstream's guest writes with pyatspi, so OSWorld's tree linearisation and its checkers' XPath
read it (docs/osworld.md says what differs)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from desktop.accessibility.atspi import SELECTION, TEXT, VALUE
from desktop.accessibility.service import ScopedSnapshot
from desktop.accessibility.tree import Element

NAMESPACES = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
"""Upstream's namespaces for an Ubuntu guest: its consumers select by them (`st:showing`, `cp:screencoord`)."""

for _prefix, _uri in NAMESPACES.items():
    ET.register_namespace(_prefix, _uri)

IMAGE = "org.a11y.atspi.Image"

MAX_DEPTH = 50
"""Upstream's limits, so a tree is as deep and as wide as theirs at most."""
MAX_WIDTH = 1024


def _tag(role: str) -> str:
    """An element name from a role name (`push button` -> `push-button`), as upstream makes it."""
    name = (role.strip() or "unknown").replace(" ", "-")
    return name if name[:1].isalpha() else "unknown"


def _ns(prefix: str, name: str) -> str:
    return f"{{{NAMESPACES[prefix]}}}{name}"


def _node(scoped: ScopedSnapshot, element: Element, depth: int) -> ET.Element:
    attributes = {"name": element.name}
    for state in sorted(element.states):
        # pyatspi's names, as upstream writes them: STATE_MULTI_LINE is `multi_line`, ours `multi-line`.
        attributes[_ns("st", state.replace("-", "_").replace(" ", "_"))] = "true"
    if element.bounds is not None and element.showing:
        b = element.bounds
        attributes[_ns("cp", "screencoord")] = f"({b.x}, {b.y})"
        attributes[_ns("cp", "size")] = f"({b.width}, {b.height})"
    if IMAGE in element.interfaces:
        attributes["image"] = "true"
    if SELECTION in element.interfaces:
        attributes["selection"] = "true"
    if VALUE in element.interfaces and element.value is not None and TEXT not in element.interfaces:
        attributes[_ns("val", "value")] = element.value
    node = ET.Element(_tag(element.role), attributes)
    if TEXT in element.interfaces and element.value:
        node.text = element.value.replace("\ufffc", "").replace("\ufffd", "")
    if depth < MAX_DEPTH:
        elements = scoped.snapshot.elements
        for child in element.children[:MAX_WIDTH]:
            if child in elements:
                node.append(_node(scoped, elements[child], depth + 1))
    return node


def tree_xml(scoped: ScopedSnapshot) -> str:
    """`<desktop-frame>` holding one `<application>` per application with windows, each holding its windows'
    trees, as upstream's guest answers `GET /accessibility` on Linux."""
    root = ET.Element("desktop-frame")
    apps: dict[str, ET.Element] = {}
    names = {app.bus: app.name for app in scoped.snapshot.applications}
    for top in scoped.roots:
        app = apps.get(top.bus)
        if app is None:
            app = apps[top.bus] = ET.SubElement(root, "application", {"name": names.get(top.bus, top.app)})
        if len(app) < MAX_WIDTH:
            app.append(_node(scoped, top, 2))
    for prefix, uri in NAMESPACES.items():  # declared on the root, as lxml's nsmap does upstream
        root.set(f"xmlns:{prefix}", uri)
    text = ET.tostring(root, encoding="unicode")
    return _dedupe_declarations(text)


def _dedupe_declarations(text: str) -> str:
    """ElementTree declares the namespaces it used on the root; the ones set by hand above may repeat them,
    which is not well-formed XML: keep the first of each."""
    head, sep, rest = text.partition(">")
    seen: set[str] = set()
    kept = []
    for part in head.split(" "):
        if part.startswith("xmlns:"):
            key = part.split("=", 1)[0]
            if key in seen:
                continue
            seen.add(key)
        kept.append(part)
    return " ".join(kept) + sep + rest
