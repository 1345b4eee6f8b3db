"""`Client`: the desktop API over a blocking httpx connection pool."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from sandbox_desktop_wire.actions import ActionsResponse
from sandbox_desktop_wire.apps import LaunchResponse, OpenResponse
from sandbox_desktop_wire.desktop import DesktopDisplayInfoResponse, DesktopStatusResponse
from sandbox_desktop_wire.health import ReadinessResponse
from sandbox_desktop_wire.mouse import MousePositionResponse
from sandbox_desktop_wire.processes import ProcessInfo, ProcessRunResponse
from sandbox_desktop_wire.recording import DesktopRecordingInfo
from sandbox_desktop_wire.windows import DesktopWindowInfo

from . import _base as b
from ._base import Call, Progress, Screenshot

if TYPE_CHECKING:
    from .desktops import Desktops

T = TypeVar("T")


class Client:
    """A sandbox-desktop server; the token defaults to $SANDBOX_DESKTOP_TOKEN, then to
    the one a server on this machine announced (docs/security.md). Use as a context manager."""

    def __init__(self, url: str = b.DEFAULT_URL, token: str | None = None, timeout: float = b.DEFAULT_TIMEOUT,
                 **httpx_options: Any) -> None:
        self.timeout = timeout
        self._http = httpx.Client(**b.client_options(url, b.resolve_token(token, url), timeout), **httpx_options)
        self._desktop: str | None = None
        """The desktop this client drives: None for `/v1/desktop` (`default`), else a `DesktopClient`'s id."""

    @property
    def desktops(self) -> Desktops:
        """The server's desktops: create, list, get, attach, delete (docs/desktops.md)."""
        from .desktops import Desktops  # it subclasses this module's client: imported when first used

        return Desktops(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        """Send one prepared call and parse its answer; raises `ApiError` for a non-2xx status."""
        response = self._http.request(call.method, b.scoped(call.path, self._desktop),
                                      **b.request_options(call, self.timeout))
        b.check(response)
        return call.parse(response)

    # Lifecycle
    def health(self) -> str:
        return self.send(b.health())

    def ready(self) -> ReadinessResponse:
        """The end-to-end readiness checks; raises `ApiError` (503 `desktop_not_ready`) when one fails."""
        return self.send(b.ready())

    def status(self) -> DesktopStatusResponse:
        return self.send(b.status())

    def start(self, width: int | None = None, height: int | None = None, **fields: Any) -> DesktopStatusResponse:
        """Start the desktop; `fields` are the other start options in snake_case (dpi, display_num, ...)."""
        return self.send(b.start(width, height, fields))

    def stop(self) -> DesktopStatusResponse:
        return self.send(b.stop())

    def display_info(self) -> DesktopDisplayInfoResponse:
        return self.send(b.display_info())

    # Screen
    def screenshot(self, format: str = "png", quality: int | None = None, scale: float | None = None,
                   show_cursor: bool = False, region: Sequence[int] | None = None) -> Screenshot:
        """The screen (or `region` = (x, y, width, height)) as an image with its coordinate frame."""
        return self.send(b.screenshot(format, quality, scale, show_cursor, region))

    # Mouse
    def mouse_position(self) -> MousePositionResponse:
        return self.send(b.mouse_position())

    def move(self, x: int, y: int) -> MousePositionResponse:
        return self.send(b.move(x, y))

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> MousePositionResponse:
        return self.send(b.click(x, y, button, count))

    def mouse_down(self, x: int | None = None, y: int | None = None,
                   button: str = "left") -> MousePositionResponse:
        return self.send(b.mouse_button(False, x, y, button))

    def mouse_up(self, x: int | None = None, y: int | None = None,
                 button: str = "left") -> MousePositionResponse:
        return self.send(b.mouse_button(True, x, y, button))

    def drag(self, start: Sequence[int], end: Sequence[int], steps: int | None = None, duration_ms: int = 0,
             button: str = "left") -> MousePositionResponse:
        return self.send(b.drag(start, end, steps, duration_ms, button))

    def scroll(self, x: int, y: int, dx: int = 0, dy: int = 0) -> MousePositionResponse:
        return self.send(b.scroll(x, y, dx, dy))

    # Keyboard
    def type_text(self, text: str, delay_ms: int = 0) -> None:
        self.send(b.type_text(text, delay_ms))

    def press(self, key: str, ctrl: bool = False, shift: bool = False, alt: bool = False,
              cmd: bool = False) -> None:
        self.send(b.press(key, ctrl, shift, alt, cmd))

    def key_down(self, key: str) -> None:
        self.send(b.key(False, key))

    def key_up(self, key: str) -> None:
        self.send(b.key(True, key))

    # Windows
    def windows(self) -> list[DesktopWindowInfo]:
        return self.send(b.windows())

    def focused_window(self) -> DesktopWindowInfo:
        return self.send(b.focused_window())

    def focus(self, window_id: str) -> DesktopWindowInfo:
        return self.send(b.window("focus", window_id))

    def move_window(self, window_id: str, x: int, y: int) -> DesktopWindowInfo:
        return self.send(b.window("move", window_id, {"x": x, "y": y}))

    def resize_window(self, window_id: str, width: int, height: int) -> DesktopWindowInfo:
        return self.send(b.window("resize", window_id, {"width": width, "height": height}))

    # Clipboard
    def clipboard(self, selection: str = "clipboard") -> str:
        return self.send(b.clipboard(selection))

    def set_clipboard(self, text: str, selection: str = "clipboard") -> None:
        self.send(b.set_clipboard(text, selection))

    # Apps
    def launch(self, app: str, args: Iterable[str] = (), wait: bool = False,
               wait_timeout_ms: int | None = None) -> LaunchResponse:
        return self.send(b.launch(app, args, wait, wait_timeout_ms))

    def open(self, target: str) -> OpenResponse:
        return self.send(b.open_target(target))

    # Batches
    def actions(self, actions: Sequence[Mapping[str, Any]], coordinates: Mapping[str, Any] | None = None,
                settle: Mapping[str, Any] | None = None,
                screenshot: Mapping[str, Any] | None = None) -> ActionsResponse:
        """Run wire-format action dicts in one batch (see docs/actions.md)."""
        return self.send(b.actions(actions, coordinates, settle, screenshot))

    # Recording
    def start_recording(self, fps: int | None = None) -> DesktopRecordingInfo:
        return self.send(b.start_recording(fps))

    def stop_recording(self) -> DesktopRecordingInfo:
        return self.send(b.stop_recording())

    def recordings(self) -> list[DesktopRecordingInfo]:
        return self.send(b.recordings())

    def recording(self, recording_id: str) -> DesktopRecordingInfo:
        return self.send(b.recording(recording_id))

    def download_recording(self, recording_id: str, path: str | os.PathLike[str],
                           progress: Progress | None = None, chunk_size: int = b.DOWNLOAD_CHUNK) -> Path:
        """Stream the MP4 to `path` chunk by chunk; a failed download leaves no partial file."""
        call, target = b.download_recording(recording_id), Path(path)
        with self._http.stream(call.method, b.scoped(call.path, self._desktop)) as response:
            if not response.is_success:
                response.read()
                b.check(response)
            total, done = b.content_length(response), 0
            try:
                with open(target, "wb") as f:
                    for chunk in response.iter_bytes(chunk_size):
                        f.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        return target

    def delete_recording(self, recording_id: str) -> None:
        self.send(b.delete_recording(recording_id))

    # Processes
    def run(self, command: str, args: Iterable[str] = (), timeout_ms: int | None = None, cwd: str | None = None,
            env: Mapping[str, str] | None = None) -> ProcessRunResponse:
        """Run a command to completion on the server and return its exit status and output."""
        return self.send(b.run(command, args, timeout_ms, cwd, env))

    def processes(self, owner: str | None = None) -> list[ProcessInfo]:
        return self.send(b.processes(owner))
