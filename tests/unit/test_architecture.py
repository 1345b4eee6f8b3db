"""The house rules of docs/architecture.md, read off the source: rooms import only rooms below them, no
package has an import circle (imports under TYPE_CHECKING included), no route module imports another, and
a module over 450 lines says why at its top."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO

PACKAGES = ("desktop", "api", "streaming", "recording", "pytest_sandbox_desktop",
            "client/sandbox_desktop_client", "client/sandbox_desktop_wire")

DESKTOP_ROOMS = ("core", "sandbox", "x11", "processes", "sound", "screen", "windows", "events", "effects", "control",
                 "input", "accessibility", "clipboard", "files", "apps", "actions", "vendors", "lifecycle")
"""desktop/'s rooms, lowest first: each may import only itself and the rooms before it (docs/architecture.md)."""
API_ROOMS = ("http", "middleware", "osworld", "server", "convert", "approvals", "routes", "mcp", "commands", "app",
             "cli")
"""api/'s rooms, lowest first (`app` is the module api/app.py, which assembles the server)."""

MAX_LINES = 450
LONG_REASON = "Why this module is long:"
"""What a module over MAX_LINES writes in its docstring, followed by the reason."""


@dataclass(frozen=True)
class Module:
    name: str
    path: Path


def modules() -> dict[str, Module]:
    found = {}
    for package in PACKAGES:
        root = REPO / package
        base = root.parent
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = Module(".".join(parts), path)
    return found


MODULES = modules()


def imported(module: Module) -> Iterator[str]:
    """Every module of ours `module` imports, wherever the import statement is (functions and TYPE_CHECKING too)."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
            if not all(name in MODULES for name in names):
                names.append(base)
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module.name:
                yield name


GRAPH = {name: frozenset(imported(module)) for name, module in MODULES.items()}


def cycles(nodes: set[str], graph: dict[str, frozenset[str]] = GRAPH) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v] & nodes:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def room_of(name: str, package: str, rooms: tuple[str, ...]) -> int | None:
    rest = name.removeprefix(package + ".").split(".")[0]
    return rooms.index(rest) if rest in rooms else None


@pytest.mark.parametrize("package", sorted({name.split(".")[0] for name in MODULES}))
def test_no_package_has_an_import_circle(package: str) -> None:
    nodes = {name for name in MODULES if name == package or name.startswith(package + ".")}
    assert cycles(nodes) == []


@pytest.mark.parametrize(("package", "rooms"), [("desktop", DESKTOP_ROOMS), ("api", API_ROOMS)])
def test_every_room_imports_only_the_rooms_below_it(package: str, rooms: tuple[str, ...]) -> None:
    inside = [name for name in MODULES if name.startswith(package + ".")]
    unplaced = [name for name in inside if room_of(name, package, rooms) is None]
    assert unplaced == [], f"modules of {package}/ in no room: add them to a room or the room to the list"
    level = {name: room_of(name, package, rooms) or 0 for name in inside}
    upward = [f"{name} -> {target}" for name in inside for target in sorted(GRAPH[name])
              if target in level and level[target] > level[name]]
    assert upward == []


def test_no_route_module_imports_another() -> None:
    crossing = [f"{name} -> {target}" for name in MODULES if name.startswith("api.routes.")
                for target in GRAPH[name] if target.startswith("api.routes.")]
    assert crossing == [], "shared wire-to-domain code belongs in api/convert/"


def test_every_room_says_what_it_owns() -> None:
    silent = [str(path.relative_to(REPO)) for package in PACKAGES for path in (REPO / package).rglob("__init__.py")
              if not ast.get_docstring(ast.parse(path.read_text()))]
    assert silent == []


def test_a_long_module_says_why() -> None:
    unexplained = []
    for module in MODULES.values():
        text = module.path.read_text()
        if text.count("\n") > MAX_LINES and LONG_REASON not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{module.path.relative_to(REPO)}: {text.count(chr(10))} lines")
    assert unexplained == []


def test_the_checks_see_a_circle() -> None:
    """The graph is read right (known edges are in it) and a circle added to it is found: a checker that
    sees nothing would pass everything."""
    assert "desktop.x11.thread" in GRAPH["desktop.input.mouse"]
    assert "desktop.lifecycle.runtime" in GRAPH["api.server.desktop_services"]
    assert "api.convert.elements" in GRAPH["api.convert.waits"]
    with_circle = {**GRAPH, "desktop.core.errors": GRAPH["desktop.core.errors"] | {"desktop.input.mouse"}}
    assert cycles({name for name in MODULES if name.startswith("desktop.")}, with_circle) != []
