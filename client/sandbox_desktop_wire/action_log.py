"""Wire models of the action log's entries (docs/action-log.md): `GET /v1/desktop/actions/log` and a
recording's `GET /v1/desktop/recordings/{id}/actions` (and each line of its `rec_N.actions.jsonl`).

One model per `kind` (the kinds with the same fields share one), told apart by `kind`. An entry always
carries every field of its kind, a null one included (a `mouse_down` at the pointer has `"x": null`),
in the order below; a recording's entries end with `videoMs`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import Field, GetJsonSchemaHandler, SerializationInfo, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from sandbox_desktop_wire.approvals import ApprovalStatus
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.enums import ActionSource, MouseButton


class LogEntry(WireModel):
    """What every entry has, before its `kind` and the kind's own fields."""


    seq: int
    """1, 2, 3... in execution order, per desktop."""
    t: float
    """The server's monotonic clock in seconds (the clock of the events' `t`); only differences mean something."""
    at: str
    """Wall time, RFC 3339 UTC."""
    source: ActionSource
    video_ms: int | None = None
    """A recording's entries only: milliseconds since the recording started, on the same clock (written last)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The answer's schema from the fields: the serializer below writes exactly them, but pydantic cannot see
        that through it and would document every entry as any object, which every member of the union matches."""
        if handler.mode == "serialization" and "serialization" in core_schema:
            core_schema = cast(CoreSchema, {k: v for k, v in core_schema.items() if k != "serialization"})
        return handler(core_schema)

    @model_serializer(mode="wrap")
    def _as_logged(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """Every field of the kind even when null, whatever `exclude_none` says; `videoMs` last, when set."""
        data: dict[str, Any] = handler(self)
        entry: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            key = field.alias or name if info.by_alias else name
            if name != "video_ms" and (key in data or getattr(self, name) is None):
                entry[key] = data.get(key)
        video = "videoMs" if info.by_alias else "video_ms"
        if self.video_ms is not None and video in data:
            entry[video] = data[video]
        return entry


class AtEntry(LogEntry):
    """An action at (`x`, `y`), screen pixels."""

    kind: str
    x: int
    y: int


class MoveEntry(AtEntry):
    kind: Literal["move"] = "move"


class ClickEntry(AtEntry):
    kind: Literal["click"] = "click"
    button: MouseButton
    count: int


class ButtonEntry(LogEntry):
    """A button pressed or released; `x`, `y` null when it was where the pointer was."""

    kind: Literal["mouse_down", "mouse_up"]
    x: int | None
    y: int | None
    button: MouseButton


class DragEntry(AtEntry):
    kind: Literal["drag"] = "drag"
    end_x: int
    end_y: int
    button: MouseButton


class ScrollEntry(AtEntry):
    kind: Literal["scroll"] = "scroll"
    delta_x: int
    delta_y: int


class TypeEntry(LogEntry):
    kind: Literal["type"] = "type"
    length: int
    """Characters typed."""
    text: str
    """At most the first 200 of them."""


class KeysEntry(LogEntry):
    kind: Literal["press", "key_down", "key_up"]
    keys: str
    """The chord as keysym names (`Control_L+a`); a `press` of several chords separates them with spaces."""


class ApprovalEntry(LogEntry):
    """A person decided on an agent's action (docs/approvals.md); written before the actions it let run,
    with the agent's `source`."""

    kind: Literal["approval"] = "approval"
    approval_id: str
    status: ApprovalStatus
    decided_by: str | None
    operation: str
    message: str | None


class ControlEntry(LogEntry):
    """Who holds control in the live view changed (docs/control.md); source `stream`."""

    kind: Literal["control"] = "control"
    controller: str | None
    previous: str | None
    takeover: bool
    by: str
    reason: str


class ClipboardEntry(LogEntry):
    """A viewer set the desktop's clipboard from their browser; source `stream`."""

    kind: Literal["clipboard"] = "clipboard"
    length: int
    viewer: str


class DropEntry(AtEntry):
    """Files dropped onto an app (docs/files-into-apps.md)."""

    kind: Literal["drop"] = "drop"
    paths: list[str]
    window_id: str


ActionLogEntry = Annotated[
    MoveEntry | ClickEntry | ButtonEntry | DragEntry | ScrollEntry | TypeEntry | KeysEntry | ApprovalEntry
    | ControlEntry | ClipboardEntry | DropEntry,
    Field(discriminator="kind"),
]
