"""Every closed set of names on the wire, as `enum.StrEnum`s shared by the server and the client.

A member is its wire string (`MouseButton.LEFT == "left"`), so the domain code compares and stores
members and the JSON stays the same. The models declare the enums where a value outside the set is a
422 `invalid_request` (a wrong shape, docs/errors.md "Bad input"). A few fields stay plain strings on
the wire, checked by the server against the enum (`TokenRole`, `OnIdle`, `ClipboardSelection`,
`InputEncoding`, `VideoCodec`, `AudioCodec`), because the reference answers a wrong name there with a
400 naming the field rather than a 422 (docs/errors.md).

Some sets are also spelled as `Literal` aliases next to their models (`Button`, `ImageFormat`, `Owner`,
`DesktopState`, `RecordingStatus`) for callers' type hints that take plain strings;
tests/unit/wire/test_wire_contract.py checks each alias lists exactly its enum's values.
"""

from __future__ import annotations

import enum


class DesktopRuntimeState(enum.StrEnum):
    """`state` of `GET /v1/desktop/status` (docs/desktop.md); `paused` only on a paused desktop."""

    INACTIVE = "inactive"
    INSTALL_REQUIRED = "install_required"
    STARTING = "starting"
    ACTIVE = "active"
    STOPPING = "stopping"
    FAILED = "failed"
    PAUSED = "paused"


class SupervisedChild(enum.StrEnum):
    """`processes[].name` of `GET /v1/desktop/status`: the children a desktop keeps alive (docs/desktop.md).

    The model keeps the field a plain string, so that a client reads a server that supervises one more."""

    XVFB = "Xvfb"
    OPENBOX = "openbox"
    DBUS = "dbus"
    """The session bus."""
    AT_SPI = "at-spi"
    """The accessibility bus's launcher."""
    PULSE = "pulse"
    """The sound server."""


class RecordingState(enum.StrEnum):
    """`status` of a recording (docs/recording.md)."""

    RECORDING = "recording"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class TokenRole(enum.StrEnum):
    """What a scoped token may do on its desktop (docs/security.md)."""

    VIEW = "view"
    CONTROL = "control"


class TakeoverMode(enum.StrEnum):
    """What agent input gets while a person holds control through the live view (`--takeover`, docs/control.md)."""

    REFUSE = "refuse"
    """409 `desktop_controlled_by_viewer`, naming who holds control."""
    QUEUE = "queue"
    """Waits until control is released, bounded by the request's timeout."""
    SHARE = "share"
    """Both act, as before takeover existed."""


class ActionSource(enum.StrEnum):
    """Who asked for an action: `source` of the action log's entries (docs/action-log.md) and of approvals."""

    REST = "rest"
    """A request to one of the REST routes (mouse, keyboard, launch, drop...)."""
    BATCH = "batch"
    """`POST /v1/desktop/actions`."""
    ANTHROPIC = "anthropic"
    """`POST /v1/desktop/anthropic/computer`."""
    OPENAI = "openai"
    """`POST /v1/desktop/openai/computer`."""
    GEMINI = "gemini"
    """`POST /v1/desktop/gemini/computer`."""
    OPEN_MODEL = "open-model"
    """`POST /v1/desktop/models/act`."""
    MCP = "mcp"
    """A tool call through `/v1/mcp`."""
    STREAM = "stream"
    """A person in the live view: their input, control, clipboard (never held by a takeover)."""


class OnIdle(enum.StrEnum):
    """What the idle timeout does to a desktop (docs/desktops.md)."""

    DELETE = "delete"
    PAUSE = "pause"


class DesktopEndReason(enum.StrEnum):
    """Why a created desktop ended: the code its `endedReason` starts with, before any `: detail`
    (docs/desktops.md). The model keeps `endedReason` a plain string, the code and what it adds."""

    DELETED = "deleted"
    TTL_EXPIRED = "ttl_expired"
    IDLE_TIMEOUT = "idle_timeout"
    """Also the code of the `pausedReason` of a desktop paused by its idle timeout."""
    AUTO_PAUSE = "auto_pause"
    """The code of the `pausedReason` of a desktop paused by its `autoPauseSeconds`."""
    AUTO_DELETE = "auto_delete"
    """Deleted `autoDeleteSeconds` after it paused."""
    SERVER_SHUTDOWN = "server_shutdown"


class MouseButton(enum.StrEnum):
    LEFT = "left"
    MIDDLE = "middle"
    RIGHT = "right"
    BACK = "back"
    FORWARD = "forward"


class ScreenshotFormat(enum.StrEnum):
    PNG = "png"
    JPEG = "jpeg"
    WEBP = "webp"


class ClipboardSelection(enum.StrEnum):
    """`both` is accepted only when writing (docs/clipboard.md)."""

    CLIPBOARD = "clipboard"
    PRIMARY = "primary"
    BOTH = "both"


class CoordinateSpaceKind(enum.StrEnum):
    """The frame of the x/y of a batch of actions (docs/actions.md)."""

    SCREEN = "screen"
    IMAGE = "image"
    NORMALIZED = "normalized"
    WINDOW = "window"
    """A window's client area, as its screenshot shows it (docs/actions.md)."""


class ProcessOwner(enum.StrEnum):
    USER = "user"
    DESKTOP = "desktop"
    SYSTEM = "system"


class ProcessStatus(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"


class LogStream(enum.StrEnum):
    """The stream a process log entry came from."""

    STDOUT = "stdout"
    STDERR = "stderr"
    PTY = "pty"


class LogStreamFilter(enum.StrEnum):
    """Which entries `GET /v1/processes/{id}/logs` returns."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"
    PTY = "pty"


class InputEncoding(enum.StrEnum):
    """How `POST /v1/processes/{id}/input` carries its `data`."""

    BASE64 = "base64"
    UTF8 = "utf8"
    TEXT = "text"


class FsEntryType(enum.StrEnum):
    FILE = "file"
    DIRECTORY = "directory"


class VideoCodec(enum.StrEnum):
    """`streamVideoCodec` of a desktop's start request."""

    VP8 = "vp8"
    H264 = "h264"
    VP9 = "vp9"


class AudioCodec(enum.StrEnum):
    """`streamAudioCodec` of a desktop's start request."""

    OPUS = "opus"
    G722 = "g722"
