"""`AsyncClient`: the desktop API over an asyncio httpx connection pool."""

from __future__ import annotations

import asyncio
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
    from .desktops import AsyncDesktops

T = TypeVar("T")


class AsyncClient:
    """A sandbox-desktop server; the token defaults to $SANDBOX_DESKTOP_TOKEN, then to
    the one a server on this machine announced (docs/security.md). Use as a context manager."""

    def __init__(self, url: str = b.DEFAULT_URL, token: str | None = None, timeout: float = b.DEFAULT_TIMEOUT,
                 **httpx_options: Any) -> None:
        self.timeout = timeout
        self._http = httpx.AsyncClient(**b.client_options(url, b.resolve_token(token, url), timeout), **httpx_options)
        self._desktop: str | None = None
        """The desktop this client drives: None for `/v1/desktop` (`default`), else an `AsyncDesktopClient`'s id."""

    @property
    def desktops(self) -> AsyncDesktops:
        """The server's desktops: create, list, get, attach, delete (docs/desktops.md)."""
        from .desktops import AsyncDesktops  # it subclasses this module's client: imported when first used

        return AsyncDesktops(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one prepared call and parse its answer; raises `ApiError` for a non-2xx status."""
        response = await self._http.request(call.method, b.scoped(call.path, self._desktop),
                                            **b.request_options(call, self.timeout))
        b.check(response)
        return call.parse(response)

    # Lifecycle
    async def health(self) -> str:
        return await self.send(b.health())

    async def ready(self) -> ReadinessResponse:
        """The end-to-end readiness checks; raises `ApiError` (503 `desktop_not_ready`) when one fails."""
        return await self.send(b.ready())

    async def status(self) -> DesktopStatusResponse:
        return await self.send(b.status())

    async def start(self, width: int | None = None, height: int | None = None, **fields: Any) -> DesktopStatusResponse:
        """Start the desktop; `fields` are the other start options in snake_case (dpi, display_num, ...)."""
        return await self.send(b.start(width, height, fields))

    async def stop(self) -> DesktopStatusResponse:
        return await self.send(b.stop())

    async def display_info(self) -> DesktopDisplayInfoResponse:
        return await self.send(b.display_info())

    # Screen
    async def screenshot(self, format: str = "png", quality: int | None = None, scale: float | None = None,
                   show_cursor: bool = False, region: Sequence[int] | None = None) -> Screenshot:
        """The screen (or `region` = (x, y, width, height)) as an image with its coordinate frame."""
        return await self.send(b.screenshot(format, quality, scale, show_cursor, region))

    # Mouse
    async def mouse_position(self) -> MousePositionResponse:
        return await self.send(b.mouse_position())

    async def move(self, x: int, y: int) -> MousePositionResponse:
        return await self.send(b.move(x, y))

    async def click(self, x: int, y: int, button: str = "left", count: int = 1) -> MousePositionResponse:
        return await self.send(b.click(x, y, button, count))

    async def mouse_down(self, x: int | None = None, y: int | None = None,
                   button: str = "left") -> MousePositionResponse:
        return await self.send(b.mouse_button(False, x, y, button))

    async def mouse_up(self, x: int | None = None, y: int | None = None,
                 button: str = "left") -> MousePositionResponse:
        return await self.send(b.mouse_button(True, x, y, button))

    async def drag(self, start: Sequence[int], end: Sequence[int], steps: int | None = None, duration_ms: int = 0,
             button: str = "left") -> MousePositionResponse:
        return await self.send(b.drag(start, end, steps, duration_ms, button))

    async def scroll(self, x: int, y: int, dx: int = 0, dy: int = 0) -> MousePositionResponse:
        return await self.send(b.scroll(x, y, dx, dy))

    # Keyboard
    async def type_text(self, text: str, delay_ms: int = 0) -> None:
        await self.send(b.type_text(text, delay_ms))

    async def press(self, key: str, ctrl: bool = False, shift: bool = False, alt: bool = False,
              cmd: bool = False) -> None:
        await self.send(b.press(key, ctrl, shift, alt, cmd))

    async def key_down(self, key: str) -> None:
        await self.send(b.key(False, key))

    async def key_up(self, key: str) -> None:
        await self.send(b.key(True, key))

    # Windows
    async def windows(self) -> list[DesktopWindowInfo]:
        return await self.send(b.windows())

    async def focused_window(self) -> DesktopWindowInfo:
        return await self.send(b.focused_window())

    async def focus(self, window_id: str) -> DesktopWindowInfo:
        return await self.send(b.window("focus", window_id))

    async def move_window(self, window_id: str, x: int, y: int) -> DesktopWindowInfo:
        return await self.send(b.window("move", window_id, {"x": x, "y": y}))

    async def resize_window(self, window_id: str, width: int, height: int) -> DesktopWindowInfo:
        return await self.send(b.window("resize", window_id, {"width": width, "height": height}))

    # Clipboard
    async def clipboard(self, selection: str = "clipboard") -> str:
        return await self.send(b.clipboard(selection))

    async def set_clipboard(self, text: str, selection: str = "clipboard") -> None:
        await self.send(b.set_clipboard(text, selection))

    # Apps
    async def launch(self, app: str, args: Iterable[str] = (), wait: bool = False,
               wait_timeout_ms: int | None = None) -> LaunchResponse:
        return await self.send(b.launch(app, args, wait, wait_timeout_ms))

    async def open(self, target: str) -> OpenResponse:
        return await self.send(b.open_target(target))

    # Batches
    async def actions(self, actions: Sequence[Mapping[str, Any]], coordinates: Mapping[str, Any] | None = None,
                settle: Mapping[str, Any] | None = None,
                screenshot: Mapping[str, Any] | None = None) -> ActionsResponse:
        """Run wire-format action dicts in one batch (see docs/actions.md)."""
        return await self.send(b.actions(actions, coordinates, settle, screenshot))

    # Recording
    async def start_recording(self, fps: int | None = None) -> DesktopRecordingInfo:
        return await self.send(b.start_recording(fps))

    async def stop_recording(self) -> DesktopRecordingInfo:
        return await self.send(b.stop_recording())

    async def recordings(self) -> list[DesktopRecordingInfo]:
        return await self.send(b.recordings())

    async def recording(self, recording_id: str) -> DesktopRecordingInfo:
        return await self.send(b.recording(recording_id))

    async def download_recording(self, recording_id: str, path: str | os.PathLike[str],
                           progress: Progress | None = None, chunk_size: int = b.DOWNLOAD_CHUNK) -> Path:
        """Stream the MP4 to `path` chunk by chunk; a failed download leaves no partial file."""
        call, target = b.download_recording(recording_id), Path(path)
        async with self._http.stream(call.method, b.scoped(call.path, self._desktop)) as response:
            if not response.is_success:
                await response.aread()
                b.check(response)
            total, done = b.content_length(response), 0
            try:
                # The file is written off the event loop: a slow disk must not stall other tasks.
                with open(target, "wb") as f:
                    async for chunk in response.aiter_bytes(chunk_size):
                        await asyncio.to_thread(f.write, chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        return target

    async def delete_recording(self, recording_id: str) -> None:
        await self.send(b.delete_recording(recording_id))

    # Processes
    async def run(self, command: str, args: Iterable[str] = (), timeout_ms: int | None = None, cwd: str | None = None,
            env: Mapping[str, str] | None = None) -> ProcessRunResponse:
        """Run a command to completion on the server and return its exit status and output."""
        return await self.send(b.run(command, args, timeout_ms, cwd, env))

    async def processes(self, owner: str | None = None) -> list[ProcessInfo]:
        return await self.send(b.processes(owner))
