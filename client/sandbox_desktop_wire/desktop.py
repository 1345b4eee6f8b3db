"""Wire models of the desktop lifecycle and status (docs/desktop.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.enums import DesktopRuntimeState
from sandbox_desktop_wire.limits import (
    MAX_DIMENSION,
    MAX_DISPLAY_NUM,
    MAX_DPI,
    MAX_FPS,
    MIN_DIMENSION,
    MIN_DISPLAY_NUM,
    MIN_DPI,
    MIN_FPS,
)
from sandbox_desktop_wire.sandbox import UsageModel
from sandbox_desktop_wire.windows import DesktopWindowInfo

DesktopState = Literal["inactive", "install_required", "starting", "active", "stopping", "failed", "paused"]
"""`DesktopRuntimeState`'s values, for type hints that take plain strings (sandbox_desktop_wire/enums.py)."""



class DesktopStartRequest(WireModel):
    """Every field optional; `{}` starts a 1440x900 desktop at 96 dpi."""

    width: int | None = Field(default=None, ge=MIN_DIMENSION, le=MAX_DIMENSION, description="Screen width in pixels "
                              "(default 1440)")
    height: int | None = Field(default=None, ge=MIN_DIMENSION, le=MAX_DIMENSION, description="Screen height in pixels "
                               "(default 900)")
    dpi: int | None = Field(default=None, ge=MIN_DPI, le=MAX_DPI, description="Screen dpi (default 96)")
    display_num: int | None = Field(default=None, ge=MIN_DISPLAY_NUM, le=MAX_DISPLAY_NUM, description="First X display "
                                    "number to try (default 99); the next free one of the following ten is taken")
    state_dir: str | None = Field(default=None, description="Absolute directory for home/, recordings/ and logs "
                                  "(default: the server's --state-dir)")
    stream_video_codec: str | None = Field(default=None, description="vp8 (default), h264 or vp9")
    stream_audio_codec: str | None = Field(default=None, description="opus (default) or g722")
    stream_frame_rate: int | None = Field(default=None, ge=MIN_FPS, le=MAX_FPS, description="Live view frame rate "
                                          "(default 30)")
    webrtc_port_range: str | None = Field(default=None, description="UDP ports for WebRTC, e.g. 59050-59070")
    recording_fps: int | None = Field(default=None, ge=MIN_FPS, le=MAX_FPS, description="Default recording fps "
                                      "(default 30)")
    max_width: int | None = Field(default=None, ge=MIN_DIMENSION, le=MAX_DIMENSION, description="The largest width "
                                  "`POST /v1/desktop/display` may set later, at least `width` (default: the larger of "
                                  "`width` and 2560); the X server keeps a framebuffer this large (docs/display.md)")
    max_height: int | None = Field(default=None, ge=MIN_DIMENSION, le=MAX_DIMENSION, description="The largest height "
                                   "the screen may take later, at least `height` (default: the larger of `height` and "
                                   "1600)")
    report_effects: bool | None = Field(default=None, description="Every action answers what it changed (`effect`) "
                                        "unless its call says `reportEffect: false` (default false; docs/effects.md)")
    opengl: bool | None = Field(default=None, description="OpenGL for its X clients (the X server's GLX, with Mesa's "
                                "software renderer); default false: GLX costs each desktop ~11 MB and ~40 ms of "
                                "start, and browsers draw without it (docs/display.md)")


class DesktopResolution(WireModel):
    width: int
    height: int
    dpi: int | None = None
    max_width: int | None = Field(default=None, description="The largest width the screen may take at runtime "
                                  "(`POST /v1/desktop/display`, docs/display.md)")
    max_height: int | None = None


class DesktopErrorInfo(WireModel):
    code: str
    message: str


class SandboxInfo(WireModel):
    """What keeps the desktop apart from the server, the machine and other desktops (docs/security.md)."""

    isolated: bool = Field(description="Every layer of the boundary is in force: the server's token and state, "
                                       "other desktops and the host's loopback are out of the desktop's reach")
    layers: list[str] = Field(description="The layers in force: user, pid, mount, ipc, uts, network, cgroup, "
                                          "no_new_privs, no_capabilities, x_cookie, user_namespace, landlock")
    missing: dict[str, str] = Field(default_factory=dict, description="Each layer not in force, and why")


class DesktopProcessInfo(WireModel):
    name: str
    pid: int | None = None
    host_pid: int | None = Field(default=None, description="Where it differs from `pid` (a sandboxed desktop): the "
                                 "pid in the server's own namespace")
    running: bool
    log_path: str | None = None
    process_id: str | None = Field(default=None, description="Id of this process in /v1/processes")


class DesktopExitInfo(WireModel):
    """How a supervised child last ended (it was restarted)."""

    process: str
    pid: int
    exit_code: int | None = None
    signal: int | None = None
    at: str


class DesktopStatusResponse(WireModel):
    state: DesktopRuntimeState
    display: str | None = None
    resolution: DesktopResolution | None = None
    started_at: str | None = None
    last_error: DesktopErrorInfo | None = None
    missing_dependencies: list[str]
    missing_optional_dependencies: list[str] | None = None
    install_command: str | None = None
    processes: list[DesktopProcessInfo]
    runtime_log_path: str
    state_dir: str | None = None
    windows: list[DesktopWindowInfo] | None = None
    restart_count: int | None = None
    sandbox: SandboxInfo | None = Field(default=None, description="Its sandbox while it runs (docs/security.md)")
    usage: UsageModel | None = Field(default=None, description="What it uses now, while it runs in a cgroup "
                                     "(docs/sandbox-limits.md)")
    last_exit: DesktopExitInfo | None = None
    pointer_grabbed: bool | None = Field(
        default=None, description="true while another X client holds the pointer grabbed (an open menu, or a hung "
                          "client): clicks go to that client, not to the window under the pointer")


class DesktopDisplayInfoResponse(WireModel):
    display: str
    resolution: DesktopResolution
