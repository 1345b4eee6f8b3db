"""Desktop start options: defaults, validation and the state-directory layout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar

from desktop.core.errors import DesktopAlreadyActive, invalid_action
from desktop.core.parsing import ascii_int
from sandbox_desktop_wire.enums import AudioCodec, VideoCodec
from sandbox_desktop_wire.limits import (
    MAX_DIMENSION,
    MAX_DISPLAY_NUM,
    MAX_DPI,
    MAX_FPS,
    MAX_PORT,
    MIN_DIMENSION,
    MIN_DISPLAY_NUM,
    MIN_DPI,
    MIN_FPS,
    MIN_PORT,
)

DEFAULT_WIDTH = 1440
DEFAULT_HEIGHT = 900
DEFAULT_DPI = 96
DEFAULT_MAX_WIDTH = 2560
DEFAULT_MAX_HEIGHT = 1600
"""The largest screen a desktop may switch to at runtime unless its start asks for more (docs/display.md):
the X server keeps a framebuffer of this size for its whole life (+8 MiB of RSS over 1440x900; 4K costs +24 MiB)."""
DEFAULT_DISPLAY_NUM = 99

E = TypeVar("E", VideoCodec, AudioCodec)


def framebuffer_size(width: int, height: int, max_width: int | None = None,
                     max_height: int | None = None) -> tuple[int, int]:
    """The largest screen a `width`x`height` desktop may take at runtime: the maximum asked, else the larger of its
    size and the default maximum."""
    return max_width or max(width, DEFAULT_MAX_WIDTH), max_height or max(height, DEFAULT_MAX_HEIGHT)


def default_state_dir() -> Path:
    """`$XDG_STATE_HOME/sandbox-desktop/desktop`, else `~/.local/state/sandbox-desktop/desktop`."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "sandbox-desktop" / "desktop"


@dataclass(frozen=True)
class StartOptions:
    """What a desktop is started with; every field validated by `validate()`."""

    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    dpi: int = DEFAULT_DPI
    display_num: int = DEFAULT_DISPLAY_NUM
    state_dir: Path | None = None
    stream_video_codec: VideoCodec = VideoCodec.VP8
    stream_audio_codec: AudioCodec = AudioCodec.OPUS
    stream_frame_rate: int = 30
    webrtc_port_range: tuple[int, int] = (59050, 59070)
    recording_fps: int | None = None
    max_width: int | None = None
    """The largest width `POST /v1/desktop/display` may set; None: the larger of `width` and DEFAULT_MAX_WIDTH."""
    max_height: int | None = None
    report_effects: bool = False
    """Every action answers what it changed unless its call says `reportEffect: false` (docs/effects.md)."""
    opengl: bool = False
    """GLX in its X server (docs/display.md "OpenGL"): off, it saves ~11 MB and ~40 ms of each start."""

    def framebuffer(self) -> tuple[int, int]:
        """The X server's framebuffer: the largest screen size this desktop may take at runtime."""
        return framebuffer_size(self.width, self.height, self.max_width, self.max_height)

    def refuse_change(self, requested: StartOptions, fields: set[str]) -> None:
        """A start request for the desktop running with these options: 409 if it asks for another geometry or
        state directory than the running one (only `fields` the request gave count)."""
        for name, wire in (("width", "width"), ("height", "height"), ("dpi", "dpi"), ("state_dir", "stateDir"),
                           ("max_width", "maxWidth"), ("max_height", "maxHeight"), ("opengl", "opengl")):
            if name in fields and getattr(requested, name) != getattr(self, name):
                # The size may have changed at runtime (a person fitting the live view to a window): changing it
                # back needs no stop, which would end every app.
                resize = ("POST /v1/desktop/display to change it with the apps kept (docs/display.md), or "
                          if name in ("width", "height", "dpi") else "")
                raise DesktopAlreadyActive(
                    f"the desktop is already active with {wire}={getattr(self, name)}; {resize}"
                    f"POST /v1/desktop/stop first to start it with {wire}={getattr(requested, name)}",
                )

    def validate(self) -> None:
        """Raise a 400 `desktop_invalid_action` naming the first bad field and its allowed range."""
        for name, value in (("width", self.width), ("height", self.height)):
            if value <= 0:
                _invalid("Desktop width and height must be greater than 0", name)
            if not MIN_DIMENSION <= value <= MAX_DIMENSION:
                _invalid(f"Desktop {name} must be between {MIN_DIMENSION} and {MAX_DIMENSION} pixels", name)
        for name, wire, limit, size in (("width", "maxWidth", self.max_width, self.width),
                                        ("height", "maxHeight", self.max_height, self.height)):
            if limit is not None and not size <= limit <= MAX_DIMENSION:
                _invalid(f"{wire} must be between the screen {name} ({size}) and {MAX_DIMENSION} pixels", wire)
        if not MIN_DPI <= self.dpi <= MAX_DPI:
            _invalid(f"Desktop dpi must be between {MIN_DPI} and {MAX_DPI}", "dpi")
        if not MIN_DISPLAY_NUM <= self.display_num <= MAX_DISPLAY_NUM:
            _invalid(f"displayNum must be between {MIN_DISPLAY_NUM} and {MAX_DISPLAY_NUM}", "displayNum")
        if not MIN_FPS <= self.stream_frame_rate <= MAX_FPS:
            _invalid(f"streamFrameRate must be between {MIN_FPS} and {MAX_FPS}", "streamFrameRate")
        if self.recording_fps is not None and not MIN_FPS <= self.recording_fps <= MAX_FPS:
            _invalid(f"recordingFps must be between {MIN_FPS} and {MAX_FPS}", "recordingFps")
        low, high = self.webrtc_port_range
        if not MIN_PORT <= low <= high <= MAX_PORT:
            _invalid(f"webrtcPortRange must be 'LOW-HIGH' with {MIN_PORT} <= LOW <= HIGH <= {MAX_PORT}",
                     "webrtcPortRange")
        if self.state_dir is not None and "\x00" in str(self.state_dir):
            _invalid("stateDir must not contain NUL bytes", "stateDir")
        if self.state_dir is not None and not self.state_dir.is_absolute():
            _invalid("stateDir must be an absolute path", "stateDir")


def parse_port_range(text: str) -> tuple[int, int]:
    """`"59050-59070"` → (59050, 59070); a malformed range is a 400 naming the field."""
    low, sep, high = text.partition("-")
    first, last = ascii_int(low), ascii_int(high)
    if not sep or first is None or last is None:
        _invalid("webrtcPortRange must look like '59050-59070'", "webrtcPortRange")
    return first, last


def parse_codec(kind: type[E], name: str, field: str) -> E:
    """`name` as one of the codecs of `kind`; anything else is a 400 naming `field` and the codecs."""
    try:
        return kind(name)
    except ValueError:
        _invalid(f"{field} must be one of {', '.join(kind)}", field)


def _invalid(message: str, field: str) -> NoReturn:
    raise invalid_action(message, field)


@dataclass(frozen=True)
class StateLayout:
    """Where a desktop keeps its files under its state directory."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def recordings(self) -> Path:
        return self.root / "recordings"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def runtime_log(self) -> Path:
        return self.root / "desktop-runtime.log"

    def create(self) -> None:
        """Create the directories (blocking: call off the event loop)."""
        for path in (self.root, self.home, self.recordings, self.logs):
            path.mkdir(parents=True, exist_ok=True)
