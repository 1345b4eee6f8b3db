"""Wire models of the live view (docs/streaming.md): stream start/stop/status."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel


class DesktopStreamStatusResponse(WireModel):
    """`{active, processId?, windowId?}` as the reference, plus what the live view is doing now."""

    active: bool
    process_id: str | None = Field(default=None, description="Never set: the stream runs inside this server "
                                   "(the reference ran a neko process)")
    window_id: str | None = Field(default=None, description="Never set (the whole screen is streamed)")
    codec: str | None = Field(default=None, description="Video codec viewers are offered first: h264 or vp8")
    frame_rate: int | None = Field(default=None, description="Frame-rate cap now: streamFrameRate, lowered "
                                   "automatically under CPU pressure")
    fps: float | None = Field(default=None, description="Pictures sent per second over the last 2 s "
                              "(about 1 on a static screen)")
    bitrate: int | None = Field(default=None, description="Video bits per second over the last 2 s")
    viewers: int | None = Field(default=None, description="Connected signalling WebSockets")
    controller: str | None = Field(default=None, description="Viewer whose input is applied (neko's host), by name")
    takeover: bool | None = Field(default=None, description="Whether the controller holds the desktop: agent input "
                                  "waits or is refused meanwhile, per takeoverMode (docs/control.md)")
    takeover_mode: str | None = Field(default=None, description="The server's --takeover: refuse, queue or share")
    webrtc_port_range: str | None = Field(default=None, description="UDP ports the viewers' connections use")
    encoders: int | None = Field(default=None, description="Running video encoders: one per codec in use, "
                                 "shared by all the viewers of that codec")
    keyframes: int | None = Field(default=None, description="Keyframes sent since the encoder started: one per "
                                  "viewer joining or asking (a PLI), at most two a second, and one every 30 s")
