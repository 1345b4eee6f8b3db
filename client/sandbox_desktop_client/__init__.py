"""A typed Python client (sync and async, on httpx) for the sandbox-desktop HTTP API.

The names below are imported on first use (PEP 562), so `sandbox_desktop_client.local_servers`
(standard library only) can be imported by the readiness probe without loading httpx or pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import Call, Progress, Screenshot
    from .async_client import AsyncClient
    from .client import Client
    from .desktops import AsyncDesktopClient, DesktopClient
    from .errors import ApiError, ClientError, ConflictError, NotFoundError, ServerError

_EXPORTS = {
    "Call": "._base", "Progress": "._base", "Screenshot": "._base",
    "AsyncClient": ".async_client", "Client": ".client",
    "DesktopClient": ".desktops", "AsyncDesktopClient": ".desktops",
    "ApiError": ".errors", "ClientError": ".errors", "ConflictError": ".errors", "NotFoundError": ".errors",
    "ServerError": ".errors",
}

__all__ = ["ApiError", "AsyncClient", "AsyncDesktopClient", "Call", "Client", "ClientError", "ConflictError",
           "DesktopClient", "NotFoundError", "Progress", "Screenshot", "ServerError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
