"""A package's public names imported from their modules on first use (PEP 562): shared by this client and
the pytest plugin, whose packages must import quickly when nobody uses them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `exports` maps each name to the relative module defining it;
    a name once imported is kept in `namespace` (the package's globals), so it is looked up only once."""
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value
    return __getattr__
