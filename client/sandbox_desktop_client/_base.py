"""What the sync and async clients share: each endpoint as a `Call` (request + parser).

Each endpoint is one function here returning a `Call`; `Client` and `AsyncClient` only send them, so the
two clients cannot drift apart. Their public signatures (keyword-only options) are in client.py and
async_client.py; these builders are internal and take their arguments in order. How a `Call` is sent is
in _send.py, the types of the signatures and answers in _types.py.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Unpack

import httpx
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from sandbox_desktop_wire.accessibility import (
    AccessibleNode,
    ActResponse,
    FindResponse,
    Mark,
    MarksResponse,
    TreeResponse,
)
from sandbox_desktop_wire.action_log import ActionLogEntry
from sandbox_desktop_wire.actions import ActionLogResponse, ActionsResponse
from sandbox_desktop_wire.apps import LaunchResponse, OpenResponse
from sandbox_desktop_wire.clipboard import ClipboardResponse
from sandbox_desktop_wire.desktop import DesktopDisplayInfoResponse, DesktopStatusResponse
from sandbox_desktop_wire.display import DisplayChangeResponse
from sandbox_desktop_wire.files_into_apps import DropResponse, FileDialogResponse
from sandbox_desktop_wire.health import ReadinessResponse
from sandbox_desktop_wire.limits import DEFAULT_WAIT_MS
from sandbox_desktop_wire.mouse import MousePositionResponse
from sandbox_desktop_wire.processes import ProcessInfo, ProcessListResponse, ProcessRunResponse
from sandbox_desktop_wire.recording import DesktopRecordingInfo, DesktopRecordingListResponse
from sandbox_desktop_wire.waits import WaitResponse
from sandbox_desktop_wire.windows import DesktopWindowInfo, DesktopWindowListResponse, WindowCloseResponse

from ._types import Condition, Element, Screenshot, Settings, StartOptions

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One endpoint's request and how to read its answer, for `Client.send`/`AsyncClient.send`.

    `extra_timeout` (seconds) is added to the client's timeout for calls that wait on the server."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    extra_timeout: float = 0.0
    content: bytes | None = None
    """A raw body (a file's bytes), instead of `json`."""


def as_json(value: Condition | Settings | None) -> dict[str, Any] | None:
    """A wait condition, network rules or limits as given (a wire-format dict or its model), as JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dict(value) if value is not None else None


def wire(**fields: Any) -> dict[str, Any]:
    """A JSON body with camelCase names, None fields left out (the server applies its defaults)."""
    return {to_camel(k): v for k, v in fields.items() if v is not None}


def model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: cls.model_validate(r.json())


def nothing(response: httpx.Response) -> None:
    return None


def _int_header(response: httpx.Response, name: str) -> int:
    return int(response.headers[name])


def parse_screenshot(response: httpx.Response) -> Screenshot:
    h = response.headers
    cursor = (int(h["x-cursor-x"]), int(h["x-cursor-y"])) if "x-cursor-x" in h else None
    marks = _int_header(response, "x-marks") if "x-marks" in h else None
    return Screenshot(
        data=response.content, media_type=h.get("content-type", ""),
        screen_width=_int_header(response, "x-screen-width"), screen_height=_int_header(response, "x-screen-height"),
        region=(_int_header(response, "x-region-x"), _int_header(response, "x-region-y"),
                _int_header(response, "x-region-width"), _int_header(response, "x-region-height")),
        image_width=_int_header(response, "x-image-width"), image_height=_int_header(response, "x-image-height"),
        scale=float(h.get("x-scale", "1")), cursor=cursor, marks=marks, window_id=h.get("x-window-id"))


def path_id(value: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"not an id: {value!r}")
    return value


# Each function below is one endpoint; `Client` and `AsyncClient` only send them.

def health() -> Call[str]:
    return Call("GET", "/v1/health", lambda r: str(r.json()["status"]))


def ready() -> Call[ReadinessResponse]:
    return Call("GET", "/v1/health/ready", model(ReadinessResponse))


def status() -> Call[DesktopStatusResponse]:
    return Call("GET", "/v1/desktop/status", model(DesktopStatusResponse))


def start(**options: Unpack[StartOptions]) -> Call[DesktopStatusResponse]:
    return Call("POST", "/v1/desktop/start", model(DesktopStatusResponse), json=wire(**options), extra_timeout=30)


def stop() -> Call[DesktopStatusResponse]:
    return Call("POST", "/v1/desktop/stop", model(DesktopStatusResponse), extra_timeout=30)


def display_info() -> Call[DesktopDisplayInfoResponse]:
    return Call("GET", "/v1/desktop/display/info", model(DesktopDisplayInfoResponse))


def set_display(width: int, height: int, dpi: int | None) -> Call[DisplayChangeResponse]:
    return Call("POST", "/v1/desktop/display", model(DisplayChangeResponse),
                json=wire(width=width, height=height, dpi=dpi))


def _shot_params(format: str, quality: int | None, scale: float | None, show_cursor: bool,
                 som: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"format": format}
    if quality is not None:
        params["quality"] = quality
    if scale is not None:
        params["scale"] = scale
    if show_cursor:
        params["showCursor"] = "true"
    if som:
        params["som"] = "true"
    return params


def screenshot(format: str, quality: int | None, scale: float | None, show_cursor: bool,
               region: Sequence[int] | None, som: bool) -> Call[Screenshot]:
    params = _shot_params(format, quality, scale, show_cursor, som)
    path = "/v1/desktop/screenshot"
    if region is not None:
        x, y, width, height = region
        params.update(x=x, y=y, width=width, height=height)
        path += "/region"
    return Call("GET", path, parse_screenshot, params=params)


def _mouse(method: str, path: str, body: dict[str, Any] | None = None,
           extra_timeout: float = 0) -> Call[MousePositionResponse]:
    return Call(method, "/v1/desktop/mouse/" + path, model(MousePositionResponse), json=body,
                extra_timeout=extra_timeout)


def mouse_position() -> Call[MousePositionResponse]:
    return _mouse("GET", "position")


def move(x: int, y: int) -> Call[MousePositionResponse]:
    return _mouse("POST", "move", wire(x=x, y=y))


def click(x: int, y: int, button: str, count: int, report_effect: bool | None = None) -> Call[MousePositionResponse]:
    return _mouse("POST", "click", wire(x=x, y=y, button=button, click_count=count, report_effect=report_effect))


def mouse_button(up: bool, x: int | None, y: int | None, button: str) -> Call[MousePositionResponse]:
    return _mouse("POST", "up" if up else "down", wire(x=x, y=y, button=button))


def drag(start: Sequence[int], end: Sequence[int], steps: int | None, duration_ms: int,
         button: str) -> Call[MousePositionResponse]:
    body = wire(start_x=start[0], start_y=start[1], end_x=end[0], end_y=end[1], steps=steps,
                duration_ms=duration_ms, button=button)
    return _mouse("POST", "drag", body, extra_timeout=duration_ms / 1000)


def scroll(x: int, y: int, dx: int, dy: int) -> Call[MousePositionResponse]:
    return _mouse("POST", "scroll", wire(x=x, y=y, delta_x=dx, delta_y=dy))


def type_text(text: str, delay_ms: int) -> Call[None]:
    return Call("POST", "/v1/desktop/keyboard/type", nothing, json=wire(text=text, delay_ms=delay_ms),
                extra_timeout=len(text) * delay_ms / 1000)


def press(key: str, ctrl: bool, shift: bool, alt: bool, cmd: bool) -> Call[None]:
    held = {name: True for name, on in (("ctrl", ctrl), ("shift", shift), ("alt", alt), ("cmd", cmd)) if on}
    return Call("POST", "/v1/desktop/keyboard/press", nothing, json=wire(key=key, modifiers=held or None))


def key(up: bool, key: str) -> Call[None]:
    return Call("POST", "/v1/desktop/keyboard/" + ("up" if up else "down"), nothing, json={"key": key})


def windows(pid: int | None, class_name: str | None, title_regex: str | None,
            minimized: bool) -> Call[list[DesktopWindowInfo]]:
    params = {k: v for k, v in (("pid", pid), ("class", class_name), ("titleRegex", title_regex),
                                ("minimized", "true" if minimized else None)) if v is not None}
    return Call("GET", "/v1/desktop/windows", lambda r: DesktopWindowListResponse.model_validate(r.json()).windows,
                params=params)


def window_screenshot(window_id: str, format: str, quality: int | None, scale: float | None, show_cursor: bool,
                      som: bool, frame: bool) -> Call[Screenshot]:
    params = _shot_params(format, quality, scale, show_cursor, som)
    if frame:
        params["frame"] = "true"
    return Call("GET", f"/v1/desktop/windows/{path_id(window_id)}/screenshot", parse_screenshot, params=params)


def close_window(window_id: str, timeout_ms: int | None, force: bool) -> Call[WindowCloseResponse]:
    return Call("POST", f"/v1/desktop/windows/{path_id(window_id)}/close", model(WindowCloseResponse),
                json=wire(timeout_ms=timeout_ms, force=force), extra_timeout=(timeout_ms or 3000) / 1000)


def focused_window() -> Call[DesktopWindowInfo]:
    return Call("GET", "/v1/desktop/windows/focused", model(DesktopWindowInfo))


def window(action: str, window_id: str, body: dict[str, Any] | None = None) -> Call[DesktopWindowInfo]:
    return Call("POST", f"/v1/desktop/windows/{path_id(window_id)}/{action}", model(DesktopWindowInfo), json=body)


def action_log(since: int, limit: int | None) -> Call[list[ActionLogEntry]]:
    params = {k: v for k, v in (("since", since or None), ("limit", limit)) if v is not None}
    return Call("GET", "/v1/desktop/actions/log", lambda r: ActionLogResponse.model_validate(r.json()).entries,
                params=params)


def clipboard(selection: str) -> Call[str]:
    return Call("GET", "/v1/desktop/clipboard", lambda r: ClipboardResponse.model_validate(r.json()).text,
                params={"selection": selection})


def clipboard_image(selection: str) -> Call[bytes]:
    return Call("GET", "/v1/desktop/clipboard", lambda r: r.content, params={"selection": selection, "format": "image"})


def set_clipboard(text: str | None, image: bytes | None, selection: str) -> Call[None]:
    if text is None and image is None:
        raise ValueError("give text, an image, or both")
    body = wire(text=text, image=base64.b64encode(image).decode("ascii") if image is not None else None,
                selection=selection)
    return Call("POST", "/v1/desktop/clipboard", nothing, json=body)


def drop(paths: Iterable[str], x: int, y: int) -> Call[DropResponse]:
    return Call("POST", "/v1/desktop/drop", model(DropResponse), json={"paths": list(paths), "x": x, "y": y},
                extra_timeout=5)


def fill_file_dialog(path: str, window_id: str | None, timeout_ms: int | None) -> Call[FileDialogResponse]:
    return Call("POST", "/v1/desktop/file-dialog", model(FileDialogResponse),
                json=wire(path=path, window_id=window_id, timeout_ms=timeout_ms),
                extra_timeout=(timeout_ms or 5000) / 1000)


def launch(app: str, args: Iterable[str], wait: bool, wait_timeout_ms: int | None) -> Call[LaunchResponse]:
    body = wire(app=app, args=list(args), wait=wait, wait_timeout_ms=wait_timeout_ms)
    return Call("POST", "/v1/desktop/launch", model(LaunchResponse), json=body,
                extra_timeout=(wait_timeout_ms or 5000) / 1000 if wait else 0)


def open_target(target: str) -> Call[OpenResponse]:
    return Call("POST", "/v1/desktop/open", model(OpenResponse), json={"target": target})


def actions(steps: Sequence[Mapping[str, Any]], coordinates: Mapping[str, Any] | None,
            settle: Mapping[str, Any] | None, screenshot: Mapping[str, Any] | None,
            report_effect: bool | None = None) -> Call[ActionsResponse]:
    body = wire(actions=[dict(s) for s in steps], coordinates=coordinates, settle=settle, screenshot=screenshot,
                report_effect=report_effect)
    waits = sum(float(s.get("durationMs") or 0) for s in steps)
    waits += float((settle or {}).get("timeoutMs", 5000 if settle is not None else 0))
    return Call("POST", "/v1/desktop/actions", model(ActionsResponse), json=body, extra_timeout=waits / 1000)


def start_recording(fps: int | None, audio: bool | None) -> Call[DesktopRecordingInfo]:
    return Call("POST", "/v1/desktop/recording/start", model(DesktopRecordingInfo), json=wire(fps=fps, audio=audio))


def stop_recording() -> Call[DesktopRecordingInfo]:
    return Call("POST", "/v1/desktop/recording/stop", model(DesktopRecordingInfo), extra_timeout=30)


def recordings() -> Call[list[DesktopRecordingInfo]]:
    return Call("GET", "/v1/desktop/recordings",
                lambda r: DesktopRecordingListResponse.model_validate(r.json()).recordings)


def recording(recording_id: str) -> Call[DesktopRecordingInfo]:
    return Call("GET", f"/v1/desktop/recordings/{path_id(recording_id)}", model(DesktopRecordingInfo))


def download_recording(recording_id: str) -> Call[None]:
    return Call("GET", f"/v1/desktop/recordings/{path_id(recording_id)}/download", nothing)


def download_trajectory(recording_id: str, image_format: str | None, parquet: bool | None,
                        moves: bool | None) -> Call[None]:
    params = {k: str(v).lower() if isinstance(v, bool) else v
              for k, v in (("imageFormat", image_format), ("parquet", parquet), ("moves", moves)) if v is not None}
    return Call("GET", f"/v1/desktop/recordings/{path_id(recording_id)}/trajectory", nothing, params=params,
                extra_timeout=60)


def delete_recording(recording_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/desktop/recordings/{path_id(recording_id)}", nothing)


SERVER_PROCESSES = "/v1/processes"
"""The server's own commands (the admin's, beside the server): `Client.run`."""
DESKTOP_PROCESSES = "/v1/desktop/processes"
"""A desktop's commands, inside its sandbox: `DesktopClient.run` (scoped to `/v1/desktops/{id}/processes`)."""


def run(command: str, args: Iterable[str], timeout_ms: int | None, cwd: str | None,
        env: Mapping[str, str] | None, where: str = SERVER_PROCESSES) -> Call[ProcessRunResponse]:
    body = wire(command=command, args=list(args), timeout_ms=timeout_ms, cwd=cwd, env=dict(env) if env else None)
    return Call("POST", f"{where}/run", model(ProcessRunResponse), json=body,
                extra_timeout=(timeout_ms or 30_000) / 1000)


def processes(owner: str | None, where: str = SERVER_PROCESSES) -> Call[list[ProcessInfo]]:
    return Call("GET", where, lambda r: ProcessListResponse.model_validate(r.json()).processes,
                params=wire(owner=owner))


# -- many desktops (docs/desktops.md) -------------------------------------------------------------

SINGLE_PREFIX = "/v1/desktop/"


def scoped(path: str, desktop_id: str | None) -> str:
    """`/v1/desktop/<p>` → `/v1/desktops/{id}/<p>` for a client bound to one desktop; other paths unchanged."""
    if desktop_id is None or not path.startswith(SINGLE_PREFIX):
        return path
    return f"/v1/desktops/{path_id(desktop_id)}/" + path.removeprefix(SINGLE_PREFIX)


# -- events and waits (docs/events.md) ------------------------------------------------------------

def wait(window: Condition | None, screen: Condition | None, clipboard: Condition | None,
         element: Condition | None, timeout_ms: int | None) -> Call[WaitResponse]:
    timeout_ms = DEFAULT_WAIT_MS if timeout_ms is None else timeout_ms
    body = wire(window=as_json(window), screen=as_json(screen), clipboard=as_json(clipboard),
                element=as_json(element), timeout_ms=timeout_ms)
    return Call("POST", "/v1/desktop/wait", model(WaitResponse), json=body, extra_timeout=timeout_ms / 1000)


def events(types: Iterable[str] | None, since: int | None) -> Call[None]:
    """The SSE request; the clients read it as a stream through `SseDecoder`."""
    params = wire(types=",".join(types) if types is not None else None, since=since)
    return Call("GET", "/v1/desktop/events", nothing, params=params)


# -- accessibility (docs/accessibility.md) --------------------------------------------------------

def tree(window: str, depth: int | None, interactive: bool, include_hidden: bool) -> Call[TreeResponse]:
    # Flags only when set, as `screenshot` does: the server's defaults are the False ones.
    params = wire(window=window, depth=depth, interactive=interactive or None, include_hidden=include_hidden or None)
    return Call("GET", "/v1/desktop/accessibility/tree", model(TreeResponse), params=params)


def find(role: str | None, name: str | None, name_contains: str | None, name_regex: str | None,
         states: Iterable[str], window: str, include_hidden: bool, limit: int) -> Call[list[AccessibleNode]]:
    body = wire(role=role, name=name, name_contains=name_contains, name_regex=name_regex, states=list(states),
                window=window, include_hidden=include_hidden, limit=limit)
    return Call("POST", "/v1/desktop/accessibility/find",
                lambda r: FindResponse.model_validate(r.json()).elements, json=body)


def act(element: Element, action: str, value: str | None, scroll_into_view: bool = True,
        report_effect: bool | None = None) -> Call[ActResponse]:
    target = element if isinstance(element, str | int) else as_json(element)
    return Call("POST", "/v1/desktop/accessibility/act", model(ActResponse),
                json=wire(element=target, action=action, value=value,
                          scroll_into_view=None if scroll_into_view else False, report_effect=report_effect))


def marks() -> Call[list[Mark]]:
    return Call("GET", "/v1/desktop/accessibility/marks", lambda r: MarksResponse.model_validate(r.json()).marks)
