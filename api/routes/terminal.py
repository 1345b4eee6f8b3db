"""`/v1/processes/{id}/terminal/ws`: a tty process's terminal over a WebSocket (docs/processes.md).

Binary frames carry the pty output, the buffered backlog first; text frames carry JSON control
messages both ways. Before the upgrade, an unknown id is a 404 problem and a process without a
terminal a 409 one; a plain HTTP request to the path is a 426 one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from api.convert.processes import decode_input
from api.http.operations import Operation
from api.http.problems import refuse_websocket, upgrade_required
from api.server.process_scope import scope_of
from desktop.core.errors import DomainError, PayloadTooLarge
from desktop.processes import STREAM_FILTERS, ManagedProcess, ProcessManager
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.enums import LogStreamFilter
from sandbox_desktop_wire.processes import ProcessInputRequest, ProcessTerminalResizeRequest

TERMINAL_PATH = "/v1/processes/{id}/terminal/ws"
NORMAL_CLOSURE = 1000
GOING_AWAY = 1001
BINARY_REFUSED = "binary frames are not accepted; send JSON text frames of type input, resize or close"


class InputFrame(ProcessInputRequest):
    """`{type: "input", data, encoding?}`; unlike POST .../input, the encoding defaults to utf8."""

    type: Literal["input"]


class ResizeFrame(ProcessTerminalResizeRequest):
    type: Literal["resize"]


class CloseFrame(WireModel):
    type: Literal["close"]


ClientFrame = Annotated[InputFrame | ResizeFrame | CloseFrame, Field(discriminator="type")]
CLIENT_FRAMES: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)
FRAME_TYPES = ("input", "resize", "close")


def frame_problem(exc: ValidationError) -> str:
    """The first thing wrong with a client frame, naming its field: `cols: Input should be ...`."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    if loc and loc[0] in FRAME_TYPES:  # the union's tag, not a field
        loc = loc[1:]
    return f"invalid terminal frame: {'.'.join(loc) + ': ' if loc else ''}{error['msg']}"


def exit_frame(process: ManagedProcess) -> dict[str, Any]:
    """`{type: "exit", exitCode}`: null if a signal ended it, then named in `exitSignal` (an addition)."""
    frame: dict[str, Any] = {"type": "exit", "exitCode": process.exit_code}
    if process.exit_signal is not None:
        frame["exitSignal"] = process.exit_signal
    return frame


class TerminalSession:
    """One socket attached to one tty process: its output out, control frames in."""

    def __init__(self, websocket: WebSocket, process: ManagedProcess, manager: ProcessManager) -> None:
        self.websocket = websocket
        self.process = process
        self.manager = manager

    async def run(self) -> None:
        """Serve the socket until the process exits or either side closes it."""
        try:
            code = await self._serve()
        except WebSocketDisconnect:
            return  # the client left
        if self.websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(WebSocketDisconnect):
                await self.websocket.close(code)

    async def _serve(self) -> int:
        """`ready`, then output and input side by side; the close code."""
        await self._send_json({"type": "ready", "processId": self.process.id})
        output = asyncio.create_task(self._pump_output(), name=f"terminal out {self.process.id}")
        control = asyncio.create_task(self._pump_input(), name=f"terminal in {self.process.id}")
        try:
            done, _ = await asyncio.wait((output, control), return_when=asyncio.FIRST_COMPLETED)
        finally:
            output.cancel()
            control.cancel()
            await asyncio.gather(output, control, return_exceptions=True)
        codes = [task.result() for task in done]  # a bug on either side is raised here, not lost
        return codes[0]

    async def _pump_output(self) -> int:
        """Send the backlog and live output; the close code once the output ended."""
        pty = STREAM_FILTERS[LogStreamFilter.PTY]
        async with contextlib.aclosing(self.process.logs.follow(streams=pty)) as entries:
            async for entry in entries:
                if entry is not None:
                    await self.websocket.send_bytes(entry.data)
        if self.process.running:
            return GOING_AWAY  # the log was ended under a live process: the server is shutting down
        await self._send_json(exit_frame(self.process))
        return NORMAL_CLOSURE

    async def _pump_input(self) -> int:
        """Act on each client frame; the close code for `{type: "close"}`, WebSocketDisconnect once the client left."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1005))
            text = message.get("text")
            if text is None:
                await self._send_error(BINARY_REFUSED)
                continue
            try:
                frame = CLIENT_FRAMES.validate_json(text)
            except ValidationError as exc:
                await self._send_error(frame_problem(exc))
                continue
            if isinstance(frame, CloseFrame):
                return NORMAL_CLOSURE
            try:
                if isinstance(frame, ResizeFrame):
                    self.process.resize(frame.cols, frame.rows)
                else:
                    await self._write(frame)
            except DomainError as exc:
                await self._send_error(exc.message)

    async def _write(self, frame: InputFrame) -> None:
        data = decode_input(frame.model_copy(update={"encoding": frame.encoding or "utf8"}))
        limit = self.manager.config.max_input_bytes_per_request
        if len(data) > limit:
            raise PayloadTooLarge(f"input payload is {len(data)} bytes, over maxInputBytesPerRequest ({limit}); "
                                  "send it in smaller frames")
        await self.process.write_input(data)

    async def _send_json(self, frame: dict[str, Any]) -> None:
        await self.websocket.send_text(json.dumps(frame, separators=(",", ":"), ensure_ascii=False))

    async def _send_error(self, message: str) -> None:
        await self._send_json({"type": "error", "message": message})


async def terminal(websocket: WebSocket) -> None:
    """The terminal session; before the upgrade, a 404 or 409 problem."""
    scope = scope_of(websocket)
    manager: ProcessManager = scope.manager
    try:
        process = scope.get(websocket.path_params["id"])
        process.require_tty()
    except DomainError as exc:
        await refuse_websocket(websocket, exc)
        return
    await websocket.accept()
    await TerminalSession(websocket, process, manager).run()


DESKTOP_TERMINAL_PATH = "/v1/desktop/processes/{id}/terminal/ws"
"""A desktop's process's terminal (also under `/v1/desktops/{desktop_id}/...`, like every desktop route)."""
WEBSOCKET_ROUTES = [WebSocketRoute(TERMINAL_PATH, terminal)]
DESKTOP_WEBSOCKET_ROUTES = [WebSocketRoute(DESKTOP_TERMINAL_PATH, terminal)]

# The handshake, as the API document shows it; a plain HTTP GET of the path answers 426.
OPERATIONS = [
    Operation("GET", TERMINAL_PATH, upgrade_required,
              "Terminal of a tty process over a WebSocket (binary output; input, resize and close frames)",
              upgrade=True, errors=(404, 409), tags=("processes",)),
    Operation("GET", DESKTOP_TERMINAL_PATH, upgrade_required,
              "Terminal of a tty process of the desktop over a WebSocket, as /v1/processes/{id}/terminal/ws",
              upgrade=True, errors=(404, 409), tags=("processes",), operation_id="terminal_in_desktop"),
]
