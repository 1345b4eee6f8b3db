# Generated from _async_endpoints.py by client/scripts/unasync.py: edit that file, then run the script.
"""`Endpoints`: a desktop's endpoints (`/v1/desktop/...`) as methods, each sending its `Call` (_base.py).

`Client` (the `default` desktop) and `DesktopClient` (one of `client.desktops`) are built on it,
in client.py with the server's own endpoints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from sandbox_desktop_wire.accessibility import AccessibleNode, ActResponse, ElementAction, Mark, TreeResponse
from sandbox_desktop_wire.action_log import ActionLogEntry
from sandbox_desktop_wire.actions import ActionsResponse
from sandbox_desktop_wire.apps import LaunchResponse, OpenResponse
from sandbox_desktop_wire.desktop import DesktopDisplayInfoResponse, DesktopStatusResponse
from sandbox_desktop_wire.display import DisplayChangeResponse
from sandbox_desktop_wire.events import DesktopEvent
from sandbox_desktop_wire.files_into_apps import DropResponse, FileDialogResponse
from sandbox_desktop_wire.mouse import MousePositionResponse
from sandbox_desktop_wire.open_models import CoordinateConvention, ModelActResult, ModelFamily
from sandbox_desktop_wire.recording import DesktopRecordingInfo
from sandbox_desktop_wire.waits import WaitResponse
from sandbox_desktop_wire.windows import DesktopWindowInfo, WindowCloseResponse

from . import _base as b
from . import _model_calls
from ._base import Call
from ._send import DOWNLOAD_CHUNK, SseDecoder, check, content_length, events_timeout, request_options
from ._types import (
    AudioCodec,
    Button,
    Condition,
    Element,
    ElementActionName,
    ImageFormat,
    Progress,
    Screenshot,
    Selection,
    VideoCodec,
)

if TYPE_CHECKING:  # imported where the option is taken: `websockets` is needed by it only
    from ._websocket import WebSocketTransport

T = TypeVar("T")


class Endpoints:
    """A desktop's endpoints as methods: each sends its `Call` over `_http` to the desktop `_desktop`."""

    def __init__(self, http: httpx.Client, timeout: float, desktop: str | None,
                 commands: WebSocketTransport | None = None) -> None:
        self.timeout = timeout
        self._http = http
        self._desktop = desktop
        """The desktop this client drives: None for `/v1/desktop` (`default`), else a handle's desktop's id."""
        self._commands = commands
        """The command socket's transport with `transport="websocket"` (also `_http`'s), else None."""

    def send(self, call: Call[T]) -> T:
        """Send one prepared `Call` and return its parsed answer; raises `ApiError` for a non-2xx status."""
        path = b.scoped(call.path, self._desktop)
        if self._commands is not None:  # straight onto the socket: httpx's request machinery is most of the cost
            timeout = self.timeout + call.extra_timeout if self.timeout is not None else None
            response = self._commands.send_call(call.method, path, call.params, call.json, call.content,
                                                timeout)
        else:
            response = self._http.request(call.method, path, **request_options(call, self.timeout))
        check(response)
        return call.parse(response)

    # Lifecycle
    def status(self) -> DesktopStatusResponse:
        """`GET /v1/desktop/status`: the desktop's state, display, resolution and processes."""
        return self.send(b.status())

    def start(self, *, width: int | None = None, height: int | None = None, dpi: int | None = None,
              display_num: int | None = None, state_dir: str | None = None,
              stream_video_codec: VideoCodec | None = None, stream_audio_codec: AudioCodec | None = None,
              stream_frame_rate: int | None = None, webrtc_port_range: str | None = None,
              recording_fps: int | None = None, max_width: int | None = None,
              max_height: int | None = None, report_effects: bool | None = None,
              opengl: bool | None = None) -> DesktopStatusResponse:
        """`POST /v1/desktop/start`: start the desktop (1440x900 at 96 dpi unless told); idempotent while
        active. Options left None take the server's default (docs/desktop.md); `max_width`/`max_height` bound
        what `set_display` may set later (docs/display.md); `report_effects` makes every action answer what it
        changed (docs/effects.md); `opengl` gives its X clients GLX (docs/display.md). Returns its status.

        Raises `ConflictError` (`desktop_already_active`: running at another size or state directory,
        `desktop_runtime_starting`), `ClientError` (400 `desktop_invalid_action`: a value out of range),
        `ServerError` (503 `desktop_dependencies_missing`, `desktop_runtime_failed`)."""
        return self.send(b.start(
            width=width, height=height, dpi=dpi, display_num=display_num, state_dir=state_dir,
            stream_video_codec=stream_video_codec, stream_audio_codec=stream_audio_codec,
            stream_frame_rate=stream_frame_rate, webrtc_port_range=webrtc_port_range, recording_fps=recording_fps,
            max_width=max_width, max_height=max_height, report_effects=report_effects, opengl=opengl))

    def stop(self) -> DesktopStatusResponse:
        """`POST /v1/desktop/stop`: stop the desktop and its apps; returns its status (`inactive`)."""
        return self.send(b.stop())

    def display_info(self) -> DesktopDisplayInfoResponse:
        """`GET /v1/desktop/display/info`: the X display name and resolution; `ConflictError` when inactive."""
        return self.send(b.display_info())

    # Screen
    def screenshot(self, *, format: ImageFormat = "png", quality: int | None = None, scale: float | None = None,
                   show_cursor: bool = False, region: Sequence[int] | None = None,
                   som: bool = False) -> Screenshot:
        """`GET /v1/desktop/screenshot` (`/region` with `region=(x, y, width, height)` in screen pixels):
        the screen as an image with its coordinate frame. `quality` is for jpeg/webp, `scale` shrinks
        the image (0.1-1.0), `show_cursor` draws the pointer, `som` numbers the interactive elements in
        boxes (set-of-marks: `.marks` is how many, `marks()` lists them, `act` takes the numbers).
        `ConflictError` when inactive."""
        return self.send(b.screenshot(format, quality, scale, show_cursor, region, som))

    # Mouse
    def mouse_position(self) -> MousePositionResponse:
        """`GET /v1/desktop/mouse/position`: where the pointer is, and the window under it."""
        return self.send(b.mouse_position())

    def move(self, x: int, y: int) -> MousePositionResponse:
        """`POST /v1/desktop/mouse/move`: move the pointer to screen pixel (x, y); returns where it is."""
        return self.send(b.move(x, y))

    def click(self, x: int, y: int, *, button: Button = "left", count: int = 1,
              report_effect: bool | None = None) -> MousePositionResponse:
        """`POST /v1/desktop/mouse/click`: move to (x, y) and click `count` times; returns the position, and
        with `report_effect` what the click changed in `.effect` (docs/effects.md)."""
        return self.send(b.click(x, y, button, count, report_effect))

    def mouse_down(self, x: int | None = None, y: int | None = None, *,
                   button: Button = "left") -> MousePositionResponse:
        """`POST /v1/desktop/mouse/down`: press `button` (at (x, y) when given); returns the position."""
        return self.send(b.mouse_button(False, x, y, button))

    def mouse_up(self, x: int | None = None, y: int | None = None, *,
                 button: Button = "left") -> MousePositionResponse:
        """`POST /v1/desktop/mouse/up`: release `button` (at (x, y) when given); returns the position."""
        return self.send(b.mouse_button(True, x, y, button))

    def drag(self, start: Sequence[int], end: Sequence[int], *, steps: int | None = None, duration_ms: int = 0,
             button: Button = "left") -> MousePositionResponse:
        """`POST /v1/desktop/mouse/drag`: press at `start` (x, y), move to `end` in `steps` over
        `duration_ms`, release; returns the position."""
        return self.send(b.drag(start, end, steps, duration_ms, button))

    def scroll(self, x: int, y: int, *, dx: int = 0, dy: int = 0) -> MousePositionResponse:
        """`POST /v1/desktop/mouse/scroll`: scroll at (x, y) by `dx`, `dy` wheel clicks (positive: right,
        down); returns the position."""
        return self.send(b.scroll(x, y, dx, dy))

    # Keyboard
    def type_text(self, text: str, *, delay_ms: int = 0) -> None:
        """`POST /v1/desktop/keyboard/type`: type `text` (any Unicode), `delay_ms` between characters."""
        self.send(b.type_text(text, delay_ms))

    def press(self, key: str, *, ctrl: bool = False, shift: bool = False, alt: bool = False,
              cmd: bool = False) -> None:
        """`POST /v1/desktop/keyboard/press`: press and release `key` (xdotool syntax: `Return`, `ctrl+l`,
        `é`; docs/keyboard.md) with the modifiers set to True held."""
        self.send(b.press(key, ctrl, shift, alt, cmd))

    def key_down(self, key: str) -> None:
        """`POST /v1/desktop/keyboard/down`: press `key` and keep it held until `key_up`."""
        self.send(b.key(False, key))

    def key_up(self, key: str) -> None:
        """`POST /v1/desktop/keyboard/up`: release a key `key_down` pressed."""
        self.send(b.key(True, key))

    # Windows
    def set_display(self, width: int, height: int, *, dpi: int | None = None) -> DisplayChangeResponse:
        """`POST /v1/desktop/display`: change the running desktop's screen size (and dpi) without restarting its
        apps, up to the `max_width`x`max_height` it started with (docs/display.md); answers what the X server
        applied. `ClientError` (400 naming `width`/`height`) past the maximum."""
        return self.send(b.set_display(width, height, dpi))

    def windows(self, *, pid: int | None = None, class_name: str | None = None, title_regex: str | None = None,
                minimized: bool = False) -> list[DesktopWindowInfo]:
        """`GET /v1/desktop/windows`: the managed windows, with id, title, geometry and `is_active`; only those of
        process `pid`, of WM_CLASS `class_name` (instance or class, any case), whose title `title_regex` matches;
        minimised ones too with `minimized=True`."""
        return self.send(b.windows(pid, class_name, title_regex, minimized))

    def window_screenshot(self, window_id: str, *, format: ImageFormat = "png", quality: int | None = None,
                          scale: float | None = None, show_cursor: bool = False, som: bool = False,
                          frame: bool = False) -> Screenshot:
        """`GET /v1/desktop/windows/{id}/screenshot`: one window's own pixels, also where others cover it (its
        client area; `frame=True` with the decorations); `region` is where it is on the screen, so its pixels are
        the `window` coordinate space of `actions` (docs/windows.md). `ConflictError` (`window_not_viewable`)
        for a minimised window."""
        return self.send(b.window_screenshot(window_id, format, quality, scale, show_cursor, som, frame))

    def focused_window(self) -> DesktopWindowInfo:
        """`GET /v1/desktop/windows/focused`: the window with the input focus; `NotFoundError`
        (`no_focused_window`) if none."""
        return self.send(b.focused_window())

    def focus(self, window_id: str) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/focus`: raise and focus a window; `NotFoundError`
        (`window_not_found`) for an unknown id."""
        return self.send(b.window("focus", window_id))

    def move_window(self, window_id: str, x: int, y: int) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/move`: put a window's top-left at (x, y); returns the window."""
        return self.send(b.window("move", window_id, {"x": x, "y": y}))

    def resize_window(self, window_id: str, width: int, height: int) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/resize`: resize a window; returns the window."""
        return self.send(b.window("resize", window_id, {"width": width, "height": height}))

    def minimize_window(self, window_id: str) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/minimize`: minimise (iconify) a window; returns the window once it is so."""
        return self.send(b.window("minimize", window_id))

    def maximize_window(self, window_id: str) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/maximize`: maximise a window; returns the window once it is so."""
        return self.send(b.window("maximize", window_id))

    def restore_window(self, window_id: str) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/restore`: restore a minimised or maximised window; returns the
        window once it is so."""
        return self.send(b.window("restore", window_id))

    def raise_window(self, window_id: str) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/raise`: raise a window above the others (without focusing it);
        returns the window once it is so."""
        return self.send(b.window("raise", window_id))

    def set_always_on_top(self, window_id: str, enabled: bool = True) -> DesktopWindowInfo:
        """`POST /v1/desktop/windows/{id}/always-on-top`: keep a window above the others (`enabled=False` ends it)."""
        return self.send(b.window("always-on-top", window_id, {"enabled": enabled}))

    def close_window(self, window_id: str, *, timeout_ms: int | None = None,
                     force: bool = True) -> WindowCloseResponse:
        """`POST /v1/desktop/windows/{id}/close`: ask the app to close the window (WM_DELETE_WINDOW), and after
        `timeout_ms` (default 3000) disconnect its X client unless `force=False`; says whether it closed and
        whether it had to be forced."""
        return self.send(b.close_window(window_id, timeout_ms, force))

    # Clipboard
    def clipboard(self, *, selection: Selection = "clipboard") -> str:
        """`GET /v1/desktop/clipboard`: the text of an X selection ("" when nobody owns it)."""
        return self.send(b.clipboard(selection))

    def clipboard_image(self, *, selection: Selection = "clipboard") -> bytes:
        """`GET /v1/desktop/clipboard?format=image`: the PNG image an app copied; `NotFoundError`
        (`clipboard_no_image`) when the selection holds no image (docs/clipboard.md)."""
        return self.send(b.clipboard_image(selection))

    def set_clipboard(self, text: str | None = None, *, image: bytes | None = None,
                      selection: Selection = "clipboard") -> None:
        """`POST /v1/desktop/clipboard`: own an X selection (`both`: clipboard and primary) with `text`, a PNG
        `image` (offered as `image/png`), or both; one of them is needed."""
        self.send(b.set_clipboard(text, image, selection))

    # Files into apps
    def drop(self, paths: Iterable[str], x: int, y: int) -> DropResponse:
        """`POST /v1/desktop/drop`: drop files (paths on the server's machine) onto the window at (x, y), as a
        file manager does (XDND); `ConflictError` (`no_drop_target`, `drop_refused`) when nothing takes them
        (docs/files-into-apps.md)."""
        return self.send(b.drop(paths, x, y))

    def fill_file_dialog(self, path: str, *, window_id: str | None = None,
                         timeout_ms: int | None = None) -> FileDialogResponse:
        """`POST /v1/desktop/file-dialog`: choose `path` in the open native file dialog (GTK's, Chromium's) and
        answer once it closed; `NotFoundError` (`file_dialog_not_found`) when none is open."""
        return self.send(b.fill_file_dialog(path, window_id, timeout_ms))

    # Apps
    def launch(self, app: str, args: Iterable[str] = (), *, wait: bool = False,
               wait_timeout_ms: int | None = None) -> LaunchResponse:
        """`POST /v1/desktop/launch`: start a program on the desktop; with `wait`, answer once its window
        is mapped (`window_id`). `ClientError` 422 (`app_exited`, `app_not_executable`), `NotFoundError`
        (`app_not_found`); docs/apps.md."""
        return self.send(b.launch(app, args, wait, wait_timeout_ms))

    def open(self, target: str) -> OpenResponse:
        """`POST /v1/desktop/open`: open a file or URL with its default application (xdg-open)."""
        return self.send(b.open_target(target))

    # Batches
    def actions(self, actions: Sequence[Mapping[str, Any]], *, coordinates: Mapping[str, Any] | None = None,
                settle: Mapping[str, Any] | None = None, screenshot: Mapping[str, Any] | None = None,
                report_effect: bool | None = None) -> ActionsResponse:
        """`POST /v1/desktop/actions`: run wire-format (camelCase) action dicts in one batch, stopping at
        the first failure, which is in `.error` rather than raised (docs/actions.md); with `report_effect`,
        what the batch changed in `.effect` (docs/effects.md)."""
        return self.send(b.actions(actions, coordinates, settle, screenshot, report_effect))

    def model_act(self, family: ModelFamily | str, text: str, *,
                  convention: CoordinateConvention | str | None = None, factor: int | None = None,
                  min_pixels: int | None = None, max_pixels: int | None = None, screenshot: bool | None = None,
                  search_url: str | None = None, settle: Mapping[str, Any] | None = None) -> ModelActResult:
        """`POST /v1/desktop/models/act`: run what an open model printed (`family`: qwen2.5-vl, qwen3-vl,
        ui-tars-1.0, ui-tars-1.5, opencua, fara); the parsed actions, a final answer (nothing run) and the next
        screenshot in the model's coordinate convention (docs/vendors.md, "Open models")."""
        return self.send(_model_calls.model_act(family, text, convention, factor, min_pixels, max_pixels,
                                                screenshot, search_url, settle))

    def action_log(self, *, since: int = 0, limit: int | None = None) -> list[ActionLogEntry]:
        """`GET /v1/desktop/actions/log`: the actions the desktop executed after entry `since` (its `seq`),
        oldest first, at most `limit` (docs/action-log.md)."""
        return self.send(b.action_log(since, limit))

    # Recording
    def start_recording(self, *, fps: int | None = None, audio: bool | None = None) -> DesktopRecordingInfo:
        """`POST /v1/desktop/recording/start`: record the screen to an MP4, with the desktop's sound as an AAC track
        (`audio`, default: when the desktop has a sound server; docs/audio.md); `ConflictError` if one runs,
        `ServerError` (503 `audio_unavailable`) for `audio=True` on a desktop without sound."""
        return self.send(b.start_recording(fps, audio))

    def stop_recording(self) -> DesktopRecordingInfo:
        """`POST /v1/desktop/recording/stop`: finish the recording; `ConflictError` if none runs."""
        return self.send(b.stop_recording())

    def recordings(self) -> list[DesktopRecordingInfo]:
        """`GET /v1/desktop/recordings`: every recording of the desktop."""
        return self.send(b.recordings())

    def recording(self, recording_id: str) -> DesktopRecordingInfo:
        """`GET /v1/desktop/recordings/{id}`: one recording; `NotFoundError` for an unknown id."""
        return self.send(b.recording(recording_id))

    def download_recording(self, recording_id: str, path: str | os.PathLike[str], *,
                           progress: Progress | None = None, chunk_size: int = DOWNLOAD_CHUNK) -> Path:
        """`GET /v1/desktop/recordings/{id}/download`: stream the MP4 to `path` in chunks, calling
        `progress(done, total)` after each; returns the `Path`. A failed download leaves no file."""
        return self._download(b.download_recording(recording_id), Path(path), progress, chunk_size)

    def download_trajectory(self, recording_id: str, path: str | os.PathLike[str], *,
                            image_format: str | None = None, parquet: bool | None = None,
                            moves: bool | None = None, progress: Progress | None = None) -> Path:
        """`GET /v1/desktop/recordings/{id}/trajectory`: the recording as a dataset (a zip of `steps.jsonl`, the
        screens before and after each action, and `steps.parquet` when the server has pyarrow; `image_format`
        png or jpeg; `moves` keeps pointer moves as steps), streamed to `path`; returns the `Path`.
        `ConflictError` while it records (docs/trajectories.md)."""
        call = b.download_trajectory(recording_id, image_format, parquet, moves)
        return self._download(call, Path(path), progress, DOWNLOAD_CHUNK)

    def _download(self, call: Call[None], target: Path, progress: Progress | None, chunk_size: int) -> Path:
        """Stream a binary response to `target`; a failed download leaves no file."""
        with self._http.stream(call.method, b.scoped(call.path, self._desktop),
                               **request_options(call, self.timeout)) as response:
            if not response.is_success:
                response.read()
                check(response)
            total, done = content_length(response), 0
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
        """`DELETE /v1/desktop/recordings/{id}`: delete a recording and its file; `ConflictError` while it
        records, `NotFoundError` for an unknown id."""
        self.send(b.delete_recording(recording_id))

    # Events and waits
    def wait(self, *, window: Condition | None = None, screen: Condition | None = None,
             clipboard: Condition | None = None, element: Condition | None = None,
             timeout_ms: int | None = None) -> WaitResponse:
        """`POST /v1/desktop/wait`: wait until exactly one condition holds (docs/events.md), e.g.
        `window={"title": "Save", "until": "gone"}`, `screen={"until": "settled", "quietMs": 300}`,
        `clipboard={"until": "changed"}`, `element={"role": "button", "name": "OK", "until": "enabled"}`
        (docs/accessibility.md); dicts in wire format or `sandbox_desktop_wire` models.
        Answers as soon as it holds; `.matched` is False (with `.last_state`) after `timeout_ms` (default
        10000). `ClientError` (422/400) names a missing, extra or bad condition field."""
        return self.send(b.wait(window, screen, clipboard, element, timeout_ms))

    def events(self, *, types: Iterable[str] | None = None,
               since: int | None = None) -> Iterator[DesktopEvent]:
        """`GET /v1/desktop/events`: the desktop's events as they happen, until the loop stops iterating
        (close the generator) or the server goes away. `types` filters (`"window.created"`, or `"window."`
        for a subject); `since` replays the held events after that `seq` first (the request is sent at the first
        `next()`, as with any generator: `since=0` also returns what happened before). Each is a `DesktopEvent`
        (`seq`, `type`, `t`, `at`, then its own fields as extras: `event.model_extra`); `events.missed` says
        how many this reader lost by falling behind."""
        call = b.events(types, since)
        # The Accept says it is a stream: the command socket's transport sends it over HTTP (docs/websocket.md).
        with self._http.stream(call.method, b.scoped(call.path, self._desktop), params=call.params,
                               headers={"accept": "text/event-stream"},
                               timeout=events_timeout(self.timeout)) as response:
            if not response.is_success:
                response.read()
                check(response)
            decoder = SseDecoder()
            for line in response.iter_lines():
                event = decoder.feed(line)
                if event is not None:
                    yield event

    # Accessibility
    def tree(self, *, window: str = "all", depth: int | None = None, interactive: bool = False,
             include_hidden: bool = False) -> TreeResponse:
        """`GET /v1/desktop/accessibility/tree`: the element tree of `window` (`all`, `focused` or a window
        id from `windows()`), each window's top-level element with its `children`, `depth` levels deep
        (default: all); `interactive` keeps only what can be acted on, as a flat list per window;
        `include_hidden` adds elements not showing. `NotFoundError` (`window_not_found`), `ServerError`
        (503 `accessibility_unavailable`); docs/accessibility.md."""
        return self.send(b.tree(window, depth, interactive, include_hidden))

    def find(self, *, role: str | None = None, name: str | None = None, name_contains: str | None = None,
             name_regex: str | None = None, states: Iterable[str] = (), window: str = "all",
             include_hidden: bool = False, limit: int = 20) -> list[AccessibleNode]:
        """`POST /v1/desktop/accessibility/find`: up to `limit` elements (no children) in reading order
        matching every given criterion: `role` (AT-SPI's, or `button`, `textbox`, `checkbox`, `link`...),
        the exact `name`, a case-insensitive `name_contains`, a `name_regex` searched in the name, all of
        `states` (`"enabled"`, `"checked"`), in `window`. `ClientError` (400) names a wrong field."""
        return self.send(b.find(role, name, name_contains, name_regex, states, window, include_hidden, limit))

    def act(self, element: Element, action: ElementActionName | ElementAction, *,
            value: str | None = None, scroll_into_view: bool = True,
            report_effect: bool | None = None) -> ActResponse:
        """`POST /v1/desktop/accessibility/act`: `click` (a real pointer click), `focus`, `invoke` (its
        default action), `setValue` (`value` into a field) or `select` one element: an id, a number of the
        last `screenshot(som=True)`, or a query (a wire-format dict such as `{"role": "button", "name":
        "OK"}`, or an `ElementQuery`) matching exactly one. Returns what was done and how. `NotFoundError`
        (`element_not_found`), `ConflictError` (`element_ambiguous` with the `candidates` in `.problem`,
        `element_action_unsupported`, also for an element out of view when `scroll_into_view` is False: by
        default a click scrolls it into view first). With `report_effect`, `.effect` tells what the action
        changed, the element's states and value among it (docs/effects.md)."""
        return self.send(b.act(element, action, value, scroll_into_view, report_effect))

    def marks(self) -> list[Mark]:
        """`GET /v1/desktop/accessibility/marks`: the number -> element table of the last
        `screenshot(som=True)` (its id, role, name and screen bounds)."""
        return self.send(b.marks())
