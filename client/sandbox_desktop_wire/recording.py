"""Wire models of the recording endpoints (docs/recording.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.action_log import ActionLogEntry
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.enums import RecordingState
from sandbox_desktop_wire.limits import MAX_FPS, MIN_FPS

RecordingStatus = Literal["recording", "completed", "failed", "interrupted"]
"""`RecordingState`'s values, for type hints that take plain strings (sandbox_desktop_wire/enums.py)."""


class DesktopRecordingStartRequest(WireModel):
    fps: int | None = Field(default=None, ge=MIN_FPS, le=MAX_FPS, description="Frames per second (default: the "
                            "desktop's recordingFps, else 30); an idle screen costs no frames whatever the rate")
    audio: bool | None = Field(default=None, description="Record the desktop's sound as an AAC track (default: "
                               "when the desktop has a sound server); true without one is a 503 audio_unavailable")


class DesktopRecordingInfo(WireModel):
    """One recording; `bytes`, `frames` and `durationMs` grow while it records."""

    id: str = Field(description="`rec_N`; never reused, also after a delete or a restart")
    status: RecordingState = Field(description="`interrupted`: found unfinished after a crash; "
                                    "the file plays up to about a second before it")
    process_id: str | None = Field(default=None, description="Never set: recording runs inside the server")
    file_name: str
    bytes: int
    started_at: str = Field(description="RFC 3339")
    ended_at: str | None = Field(default=None, description="RFC 3339; absent while recording")
    duration_ms: int = Field(description="Playable length (while recording: time since start)")
    frames: int = Field(description="Video frames in the file (an idle screen adds few)")
    fps: int | None = Field(default=None, description="The capture rate asked for")
    width: int | None = None
    height: int | None = None
    last_error: str | None = Field(default=None, description="Why it failed or was interrupted")
    audio: bool = Field(default=False, description="The file has the desktop's sound (an AAC track)")


class DesktopRecordingListResponse(WireModel):
    recordings: list[DesktopRecordingInfo] = Field(description="In id order")


class DesktopRecordingActions(WireModel):
    recording_id: str
    entries: list[ActionLogEntry] = Field(description="Action log entries with `videoMs`, in order")
