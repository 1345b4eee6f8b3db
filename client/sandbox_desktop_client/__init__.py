"""A typed Python client (sync and async, on httpx) for the sandbox-desktop HTTP API (docs/client.md).

    from sandbox_desktop_client import Client

    with Client("http://127.0.0.1:2468") as desk:      # token: $SANDBOX_DESKTOP_TOKEN, or the local server's
        desk.start(width=1280, height=800)
        desk.click(100, 200, button="right")
        desk.press("l", ctrl=True)
        desk.screenshot(scale=0.5).save("screen.png")

`Client` and `AsyncClient` have the same methods (coroutines on the latter); `client.desktops` creates
the server's other desktops, each driven through a `DesktopClient`/`AsyncDesktopClient`. Arguments
after the essential ones are keyword-only. Answers are the server's own wire models
(`sandbox_desktop_wire`), screenshots a `Screenshot`.

Exceptions:

    ApiError                   the server answered a non-2xx status: .status, .code, .detail, .problem
    ├── ClientError            4xx: the request was wrong for the current state; fix it, don't retry
    │   ├── NotFoundError      404: no such window, recording, process or desktop
    │   └── ConflictError      409: not in a state that allows it (not started, paused, recording)
    └── ServerError            5xx: the desktop or the machine failed; a retry may succeed
    httpx.TransportError       no answer at all (httpx's own: ConnectError, TimeoutException, ...)
    ValueError                 an id that cannot be one (empty, or holding `/`), before any request
    TypeError                  an unknown or positional option, before any request

`.code` is what to switch on (docs/errors.md lists them).

The names below are imported on first use (PEP 562), so `sandbox_desktop_client.local_servers`
(standard library only) can be imported by the readiness probe without loading httpx or pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from ._base import Call
    from ._types import CreateOptions, Progress, Screenshot, StartOptions
    from .async_client import AsyncClient, AsyncDesktopClient, AsyncDesktops
    from .client import Client, DesktopClient, Desktops
    from .errors import ApiError, ClientError, ConflictError, NotFoundError, ServerError

_EXPORTS = {
    "Call": "._base", "CreateOptions": "._types", "Progress": "._types", "Screenshot": "._types",
    "StartOptions": "._types", "AsyncClient": ".async_client", "AsyncDesktopClient": ".async_client",
    "AsyncDesktops": ".async_client", "Client": ".client", "DesktopClient": ".client", "Desktops": ".client",
    "ApiError": ".errors", "ClientError": ".errors", "ConflictError": ".errors", "NotFoundError": ".errors",
    "ServerError": ".errors",
}

__all__ = ["ApiError", "AsyncClient", "AsyncDesktopClient", "AsyncDesktops", "Call", "Client", "ClientError",
           "ConflictError", "CreateOptions", "DesktopClient", "Desktops", "NotFoundError", "Progress", "Screenshot",
           "ServerError", "StartOptions"]


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
