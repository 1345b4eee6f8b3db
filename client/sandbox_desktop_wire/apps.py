"""Wire models of launch and open (docs/apps.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.limits import MAX_LAUNCH_WAIT_MS


class LaunchRequest(WireModel):
    app: str = Field(description="Program name on the desktop's PATH, or a path")
    args: list[str] = Field(default_factory=list)
    wait: bool = Field(default=False, description="Wait for the app's first window and return its id")
    wait_timeout_ms: int = Field(default=5000, ge=1, le=MAX_LAUNCH_WAIT_MS,
                                 description="How long `wait` waits for a window, in ms")


class LaunchResponse(WireModel):
    process_id: str
    pid: int | None = None
    window_id: str | None = Field(default=None, description="Decimal X id of the app's window (with `wait`)")


class OpenRequest(WireModel):
    target: str = Field(description="A file path or URL, opened with xdg-open")


class OpenResponse(WireModel):
    process_id: str
    pid: int | None = None
    exit_code: int | None = Field(default=None, description="xdg-open's exit code if it already finished")
