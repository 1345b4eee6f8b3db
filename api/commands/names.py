"""Op names for the command socket, derived from the operation table: nothing here is written per operation.

An op is its path template after `/v1/desktop/` (a desktop's operations) or `/v1/` with `server.` before it (the
server's own), `/` read as `.`: `POST /v1/desktop/mouse/click` is `mouse.click`, `POST /v1/desktop/windows/{id}/focus`
is `windows.{id}.focus` (its `{id}` given in the message's `path`), `POST /v1/processes/run` is
`server.processes.run`. A path served by several methods adds the method: `clipboard.get`, `clipboard.post`.
WebSocket handshakes and endless streams (`text/event-stream`) have no op: they cannot answer one message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from api.http.desktop_paths import SINGLE_PREFIX
from api.http.operations import Operation
from desktop.core.errors import FieldError

SERVER_PREFIX = "/v1"
STREAMING_MEDIA_TYPES = frozenset({"text/event-stream"})


@dataclass(frozen=True)
class Command:
    """One op: the method and path template of its operation."""

    name: str
    method: str
    path: str
    summary: str
    params: tuple[str, ...]
    """The path's `{parameters}`, which the message's `path` member fills."""

    def target(self, values: dict[str, Any]) -> str:
        """The concrete path, each parameter percent-encoded (an id is never a path of its own)."""
        missing = [name for name in self.params if not isinstance(values.get(name), (str, int))]
        if missing:
            raise FieldError([{"location": "path", "field": f"path.{name}", "message": "field required",
                               "type": "missing"} for name in missing], wrong_shape=True)
        path = self.path
        for name in self.params:
            path = path.replace("{" + name + "}", quote(str(values[name]), safe=""))
        return path

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.name, "method": self.method, "path": self.path, "summary": self.summary}


def base_name(path: str) -> str | None:
    """`mouse.click` for `/v1/desktop/mouse/click`, `server.health` for `/v1/health`; None outside /v1."""
    if path.startswith(SINGLE_PREFIX + "/"):
        rest = path.removeprefix(SINGLE_PREFIX + "/")
    elif path.startswith(SERVER_PREFIX + "/"):
        rest = "server/" + path.removeprefix(SERVER_PREFIX + "/")
    else:
        return None
    return rest.replace("/", ".")


def answerable(op: Operation) -> bool:
    """Whether one message can be answered by this operation: not a handshake, not a stream without end."""
    return not op.upgrade and op.media_type not in STREAMING_MEDIA_TYPES


class CommandTable:
    """Every op of the operation table by name, in table order."""

    def __init__(self, operations: Iterable[Operation]) -> None:
        usable = [op for op in operations if answerable(op) and base_name(op.path) is not None]
        methods: dict[str, list[str]] = {}
        for op in usable:
            methods.setdefault(op.path, []).append(op.method)
        self.commands: dict[str, Command] = {}
        for op in usable:
            name = str(base_name(op.path))
            if len(methods[op.path]) > 1:
                name += "." + op.method.lower()
            if name in self.commands:  # two rows for one method and path: a table error, found at start
                raise ValueError(f"two operations are named {name!r}")
            params = tuple(part[1:-1].split(":")[0] for part in op.path.split("/") if part.startswith("{"))
            self.commands[name] = Command(name, op.method, op.path, op.summary, params)

    def get(self, name: str) -> Command | None:
        return self.commands.get(name)

    def listing(self) -> dict[str, Any]:
        """The answer to `{"op": "ops"}`: every op with its method, path and summary."""
        return {"ops": [command.to_wire() for command in self.commands.values()]}
