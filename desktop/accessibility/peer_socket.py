"""An application's own accessibility socket, connected from inside its desktop's sandbox (docs/accessibility.md,
"Speed").

An app's accessibility bridge listens on a socket of its own (`Application.GetApplicationBusAddress`), where a call
costs about half what it costs through the bus daemon. The bridge lets in only connections of its own uid, and
on a sandboxed desktop the apps run as the sandbox's user, not the server's: the server's own connection is
closed during its handshake. So `connect` runs in a child of the sandbox's init, as the sandbox's user, in the
sandbox's namespaces (the socket's path is the one the app sees, an abstract address is in the app's network
namespace): it connects, and hands the connected socket back with the uid the bridge will check
(`Sandbox.call`, desktop/sandbox/call.py). The server then speaks D-Bus on it (dbus_connection.py
`connect_socket`).

The zygote imports this module before it forks any sandbox (`SandboxHost(preload=...)`): standard library only.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import unquote_to_bytes  # a D-Bus address escapes bytes as %XX, as a URL does

ENTRY = f"{__name__}:connect"
"""What the server asks a sandbox to run (`Sandbox.call`)."""
CONNECT_TIMEOUT_S = 2.0
"""A bridge that does not accept within this is left to the bus daemon's way."""


def unix_target(address: str) -> str | bytes:
    """The `connect()` target of the first unix transport of a D-Bus address (`unix:path=...` or
    `unix:abstract=...`); ValueError for any other."""
    for transport in address.split(";"):
        kind, _, options = transport.partition(":")
        if kind != "unix":
            continue
        values = dict(option.partition("=")[::2] for option in options.split(",") if option)
        if "path" in values:
            return os.fsdecode(unquote_to_bytes(values["path"]))
        if "abstract" in values:
            return b"\0" + unquote_to_bytes(values["abstract"])
    raise ValueError(f"no unix path or abstract socket in the D-Bus address {address!r}")


def connect(args: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
    """Connect to `args["address"]`; answers this process's uid and the connected socket."""
    del fds  # none are passed
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(unix_target(str(args["address"])))
    except BaseException:
        sock.close()
        raise
    return {"uid": os.getuid()}, [sock.detach()]
