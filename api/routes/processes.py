"""`/v1/processes` (the server's) and `/v1/desktop/processes` (a desktop's, in its sandbox): translates HTTP to
calls of `desktop.processes.ProcessManager` in the request's scope (api/server/process_scope.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from api.convert.processes import decode_input, field_error
from api.http.operations import Operation
from api.server.process_scope import scope_of
from api.server.services import server_of
from desktop.accessibility.browsers import with_accessibility
from desktop.core.errors import PayloadTooLarge
from desktop.core.parsing import ascii_int
from desktop.lifecycle.home import ACCESSIBILITY_MARK
from desktop.processes import STREAM_FILTERS, LogBuffer, ManagedProcess, ProcessConfig, ProcessManager
from sandbox_desktop_wire.enums import LogStream, LogStreamFilter
from sandbox_desktop_wire.processes import (
    KillQuery,
    ProcessConfigModel,
    ProcessCreateRequest,
    ProcessInfo,
    ProcessInputRequest,
    ProcessInputResponse,
    ProcessListQuery,
    ProcessListResponse,
    ProcessLogEntry,
    ProcessLogsQuery,
    ProcessLogsResponse,
    ProcessRunRequest,
    ProcessRunResponse,
    ProcessTerminalResizeRequest,
    ProcessTerminalResizeResponse,
    StopQuery,
)

KEEPALIVE_S = 15.0
TAGS = ("processes",)


def manager_of(request: Request) -> ProcessManager:
    return server_of(request).processes


def process_of(request: Request) -> ManagedProcess:
    return scope_of(request).get(request.path_params["id"])


def info_model(process: ManagedProcess) -> ProcessInfo:
    return ProcessInfo.model_validate(process.info())


def config_model(config: ProcessConfig) -> ProcessConfigModel:
    return ProcessConfigModel.model_validate(vars(config))


# -- list, create, run, config -----------------------------------------------------------------


async def list_processes(request: Request, *, query: ProcessListQuery) -> ProcessListResponse:
    processes = scope_of(request).list(query.owner)
    return ProcessListResponse(processes=[info_model(p) for p in processes])


def accessible_args(command: str, args: list[str] | None, env: dict[str, str]) -> list[str]:
    """A Chromium-family program started on the desktop gets the switch that fills its page trees
    (docs/accessibility.md "Which apps expose a tree"); anything else, or no desktop, runs as asked."""
    if env.get(ACCESSIBILITY_MARK) != "1":
        return list(args or ())
    return with_accessibility(shutil.which(command, path=env.get("PATH")) or command, args or ())


async def create_process(request: Request, *, body: ProcessCreateRequest) -> ProcessInfo:
    scope = scope_of(request)
    env = scope.env(body.env)
    process = await scope.manager.spawn(
        body.command, accessible_args(body.command, body.args, env), cwd=scope.cwd(body.cwd), env=env,
        tty=bool(body.tty), interactive=bool(body.interactive), launcher=scope.launcher, desktop_id=scope.desktop_id,
    )
    return info_model(process)


async def run_process(request: Request, *, body: ProcessRunRequest) -> ProcessRunResponse:
    scope = scope_of(request)
    env = scope.env(body.env)
    result = await scope.manager.run(
        body.command, accessible_args(body.command, body.args, env), cwd=scope.cwd(body.cwd), env=env,
        timeout_ms=body.timeout_ms, max_output_bytes=body.max_output_bytes, launcher=scope.launcher,
    )
    return ProcessRunResponse(
        exit_code=result.exit_code, exit_signal=result.exit_signal, timed_out=result.timed_out,
        stdout=result.stdout.decode("utf-8", errors="replace"),
        stderr=result.stderr.decode("utf-8", errors="replace"),
        stdout_truncated=result.stdout_truncated, stderr_truncated=result.stderr_truncated,
        duration_ms=result.duration_ms,
    )


async def get_config(request: Request) -> ProcessConfigModel:
    return config_model(manager_of(request).config)


async def set_config(request: Request, *, body: ProcessConfigModel) -> ProcessConfigModel:
    manager = manager_of(request)
    values = body.model_dump(exclude_none=True)
    values.setdefault("max_exited_processes", manager.config.max_exited_processes)
    return config_model(manager.configure(ProcessConfig(**values)))


# -- one process -------------------------------------------------------------------------------


async def get_process(request: Request) -> ProcessInfo:
    return info_model(process_of(request))


async def stop_process(request: Request, *, query: StopQuery) -> ProcessInfo:
    process = process_of(request)
    process.refuse_if_protected("stop")
    await process.stop(query.wait_ms)
    return info_model(process)


async def kill_process(request: Request, *, query: KillQuery) -> ProcessInfo:
    process = process_of(request)
    process.refuse_if_protected("kill")
    await process.kill(query.wait_ms)
    return info_model(process)


async def delete_process(request: Request) -> None:
    process = process_of(request)
    process.refuse_if_protected("delete")
    scope_of(request).manager.delete(process.id)


async def process_logs(request: Request, *, query: ProcessLogsQuery) -> Response | ProcessLogsResponse:
    process = process_of(request)
    stream = query.stream or (LogStreamFilter.PTY if process.tty else LogStreamFilter.COMBINED)
    streams = STREAM_FILTERS[stream]
    since = max(query.since or 0, _last_event_id(request))
    if query.follow:
        return StreamingResponse(
            _events(process.logs, streams, since, query.tail), media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    entries = process.logs.entries(streams=streams, since=since, tail=query.tail)
    return ProcessLogsResponse(process_id=process.id, stream=stream,
                               entries=[ProcessLogEntry.model_validate(e.to_wire()) for e in entries])


async def write_input(request: Request, *, body: ProcessInputRequest) -> ProcessInputResponse:
    process = process_of(request)
    data = decode_input(body)
    limit = scope_of(request).manager.config.max_input_bytes_per_request
    if len(data) > limit:
        raise PayloadTooLarge(f"input payload is {len(data)} bytes, over maxInputBytesPerRequest ({limit}); "
                              "send it in smaller requests")
    return ProcessInputResponse(bytes_written=await process.write_input(data))


async def resize_terminal(
    request: Request, *, body: ProcessTerminalResizeRequest
) -> ProcessTerminalResizeResponse:
    process_of(request).resize(body.cols, body.rows)
    return ProcessTerminalResizeResponse(cols=body.cols, rows=body.rows)


# -- helpers -----------------------------------------------------------------------------------


def _last_event_id(request: Request) -> int:
    """The SSE `Last-Event-ID` header (a log sequence), 0 if absent."""
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return 0
    sequence = ascii_int(raw)
    if sequence is None:
        raise field_error("header", "Last-Event-ID", f"must be a log sequence number, got {raw!r}")
    return sequence


async def _events(
    logs: LogBuffer, streams: frozenset[LogStream], since: int, tail: int | None
) -> AsyncIterator[bytes]:
    """The SSE body: `event: log` per entry, a keep-alive comment every 15 s of silence."""
    async for entry in logs.follow(streams=streams, since=since, tail=tail, heartbeat_s=KEEPALIVE_S):
        if entry is None:
            yield b": keep-alive\n\n"
            continue
        data = json.dumps(entry.to_wire(), separators=(",", ":"))
        yield f"event: log\nid: {entry.sequence}\ndata: {data}\n\n".encode()


def table(prefix: str, *, server: bool) -> list[Operation]:
    """The operations under `prefix`: the server's (`/v1/processes`, with its limits), or a desktop's
    (`/v1/desktop/processes`, copied to `/v1/desktops/{desktop_id}/processes` like every desktop route)."""
    one = prefix + "/{id}"
    where = "" if server else " in the desktop's sandbox"
    rows: list[tuple[str, str, Callable[..., Awaitable[Any]], str, dict[str, Any]]] = [
        ("GET", prefix, list_processes, "List processes" + ("" if server else " of the desktop"),
         {"query": ProcessListQuery, "response": ProcessListResponse}),
        ("POST", prefix, create_process, "Start a process" + where,
         {"body": ProcessCreateRequest, "response": ProcessInfo, "body_required": True, "errors": (409, 502)}),
        ("POST", prefix + "/run", run_process, "Run a command to completion" + where,
         {"body": ProcessRunRequest, "response": ProcessRunResponse, "body_required": True, "errors": (409, 502)}),
        ("GET", one, get_process, "A process", {"response": ProcessInfo, "errors": (404,)}),
        ("DELETE", one, delete_process, "Forget an exited process", {"status": 204, "errors": (404, 409)}),
        ("POST", one + "/stop", stop_process, "SIGTERM a process group and wait",
         {"query": StopQuery, "response": ProcessInfo, "errors": (404, 409)}),
        ("POST", one + "/kill", kill_process, "SIGKILL a process group and wait",
         {"query": KillQuery, "response": ProcessInfo, "errors": (404, 409)}),
        ("GET", one + "/logs", process_logs, "Process output (follow=true: server-sent events)",
         {"query": ProcessLogsQuery, "response": ProcessLogsResponse, "errors": (404,)}),
        ("POST", one + "/input", write_input, "Write to a process's stdin or terminal",
         {"body": ProcessInputRequest, "response": ProcessInputResponse, "body_required": True,
          "errors": (404, 409, 413)}),
        ("POST", one + "/terminal/resize", resize_terminal, "Resize a process's terminal",
         {"body": ProcessTerminalResizeRequest, "response": ProcessTerminalResizeResponse, "body_required": True,
          "errors": (404, 409)}),
    ]
    if server:
        rows[3:3] = [
            ("GET", prefix + "/config", get_config, "Process API limits", {"response": ProcessConfigModel}),
            ("POST", prefix + "/config", set_config, "Replace the process API limits",
             {"body": ProcessConfigModel, "response": ProcessConfigModel, "body_required": True}),
        ]
    operations = []
    for method, path, handler, summary, options in rows:
        if not server:  # the server's have the handler's name
            options = {**options, "operation_id": handler.__name__ + "_in_desktop"}
        operations.append(Operation(method, path, handler, summary, tags=TAGS, **options))
    return operations


OPERATIONS = [*table("/v1/processes", server=True), *table("/v1/desktop/processes", server=False)]
