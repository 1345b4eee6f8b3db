"""The types in the clients' signatures and answers: the options' closed sets of values, the start and
create options as `TypedDict`s, `Screenshot`, and what a wait or `act` takes."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from sandbox_desktop_wire.elements import ElementQuery
from sandbox_desktop_wire.mouse import Button
from sandbox_desktop_wire.processes import Owner
from sandbox_desktop_wire.screenshot import ImageFormat

__all__ = ["AudioCodec", "Button", "Condition", "CreateOptions", "DesktopChanges", "Element", "ElementActionName",
           "ImageFormat", "OnIdle", "Owner", "Progress", "Role", "Screenshot", "Selection", "Settings", "StartOptions",
           "VideoCodec"]

Progress = Callable[[int, int | None], None]
"""Called after each chunk of a download with (bytes written, total bytes or None)."""

Selection = Literal["clipboard", "primary", "both"]
"""An X selection: `clipboard` (ctrl+c/ctrl+v), `primary` (the mouse selection); `both` for writes only."""
Role = Literal["view", "control"]
"""A desktop token's role: `view` watches, `control` drives too (docs/desktops.md)."""
OnIdle = Literal["delete", "pause"]
"""What an idle desktop's timeout does to it."""
VideoCodec = Literal["vp8", "h264", "vp9"]
AudioCodec = Literal["opus", "g722"]
Condition = Mapping[str, Any] | BaseModel
"""A wait condition: a wire-format dict (`{"title": "Save", "until": "gone"}`) or its model (`WindowCondition`)."""
Settings = Mapping[str, Any] | BaseModel
"""A desktop's network rules or limits: a wire-format dict (`{"egress": "none"}`, `{"memoryMb": 512}`) or its
model (`NetworkRulesModel`, `LimitsModel`; docs/security.md)."""
Element = str | int | Mapping[str, Any] | ElementQuery
"""What `act` acts on: an element's id, a number of the last set-of-marks screenshot, or a query that must
match exactly one element (a wire-format dict, `{"role": "button", "name": "OK"}`, or an `ElementQuery`)."""
ElementActionName = Literal["click", "focus", "invoke", "setValue", "select"]
"""`ElementAction`'s values, for type hints that take plain strings."""


class StartOptions(TypedDict, total=False):
    """A desktop's start options (`DesktopStartRequest`, docs/desktop.md); left out or None is the
    server's default. `Client.start` and `desktops.create` take these as keyword arguments."""

    width: int | None
    height: int | None
    dpi: int | None
    display_num: int | None
    state_dir: str | None
    stream_video_codec: VideoCodec | None
    stream_audio_codec: AudioCodec | None
    stream_frame_rate: int | None
    webrtc_port_range: str | None
    recording_fps: int | None
    max_width: int | None
    max_height: int | None
    report_effects: bool | None
    opengl: bool | None


class CreateOptions(StartOptions, total=False):
    """`desktops.create`'s options: the start options and the desktop's lifecycle and sandbox
    (`DesktopCreateRequest`)."""

    tags: Mapping[str, str] | None
    ttl_seconds: int | None
    idle_timeout_seconds: int | None
    on_idle: OnIdle | None
    home_template: str | None
    approve: list[str] | None
    network: Settings | None
    limits: Settings | None
    auto_pause_seconds: int | None
    auto_delete_seconds: int | None
    osworld: bool | None
    osworld_token: bool | None


class DesktopChanges(TypedDict, total=False):
    """`DesktopClient.update`'s changes (`DesktopPatchRequest`): what is left out stays as it is."""

    tags: Mapping[str, str] | None
    ttl_seconds: int | None
    idle_timeout_seconds: int | None
    auto_pause_seconds: int | None
    auto_delete_seconds: int | None
    network: Settings | None
    limits: Settings | None
    osworld: bool | None
    osworld_token: bool | None


@dataclass(frozen=True)
class Screenshot:
    """What `screenshot()` returns: the encoded image and the frame it was taken in, read from the
    `X-*` response headers (docs/screenshots.md)."""

    data: bytes
    media_type: str
    screen_width: int
    screen_height: int
    region: tuple[int, int, int, int]
    """The captured rectangle (x, y, width, height) in screen pixels."""
    image_width: int
    """The image's own size in pixels: the region's times `scale`."""
    image_height: int
    scale: float
    cursor: tuple[int, int] | None = None
    """The pointer in screen pixels, when asked for with `show_cursor`."""
    marks: int | None = None
    """With `som`, how many numbered boxes the image shows (`marks()` lists them)."""
    window_id: str | None = None
    """A window's screenshot (`window_screenshot`): the window's id; `region` is its rectangle on the screen,
    so image pixel (0, 0) is screen pixel (region[0], region[1]) (docs/windows.md)."""

    def to_screen(self, x: int, y: int) -> tuple[int, int]:
        """Map a pixel of this image to screen pixels (exact for any scale and region)."""
        rx, ry, rw, rh = self.region
        return (rx + math.floor((x + 0.5) * rw / self.image_width),
                ry + math.floor((y + 0.5) * rh / self.image_height))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the image to a file."""
        with open(path, "wb") as f:
            f.write(self.data)
