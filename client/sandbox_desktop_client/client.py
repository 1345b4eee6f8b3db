# Generated from async_client.py by client/scripts/unasync.py: edit that file, then run the script.
"""`Client` and the server's other desktops: `client.desktops` is `Desktops`, which creates them
and attaches to them as `DesktopClient` handles (docs/desktops.md).

A handle shares its client's connection pool: close the client, not the handle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Literal

import httpx

from sandbox_desktop_wire.approvals import Approval, ApprovalStatus, Decision
from sandbox_desktop_wire.desktops import DesktopResource, TokenResponse
from sandbox_desktop_wire.fs import FsActionResponse, FsEntry, FsMoveResponse, FsStat, FsWriteResponse
from sandbox_desktop_wire.health import ReadinessResponse
from sandbox_desktop_wire.processes import ProcessInfo, ProcessRunResponse
from sandbox_desktop_wire.sandbox import NetworkResponse

from . import _base as b
from . import _desktops_calls as d
from . import _files_calls as f
from ._endpoints import Endpoints
from ._send import DEFAULT_TIMEOUT, client_options
from ._types import AudioCodec, OnIdle, Owner, Role, Settings, VideoCodec
from .local_servers import DEFAULT_URL, resolve_token


class Client(Endpoints):
    """A sandbox-desktop server, driven over HTTP (docs/client.md); use it as a context manager.

    `url` defaults to http://127.0.0.1:2468; `token` to $SANDBOX_DESKTOP_TOKEN, then to the one a server
    on this machine announced (docs/security.md); `timeout` (seconds) is httpx's per request, with what a
    call waits on the server added. `transport="websocket"` sends every call over one command WebSocket
    (docs/websocket.md): the same methods and answers, with less work per call; it needs the `websockets`
    package. Other keyword arguments go to `httpx.Client` (`verify=`, or an httpx `transport=`).

    Every method raises an `ApiError` subclass for a non-2xx answer (see the package's docstring) and
    `httpx.TransportError` when no answer came; a method's docstring names the errors it adds.
    The methods act on the `default` desktop (`/v1/desktop/...`); `desktops` has the others.
    """

    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 transport: Literal["http", "websocket"] | httpx.BaseTransport = "http",
                 **httpx_options: Any) -> None:
        token = resolve_token(token, url)
        commands = None
        if transport == "websocket":
            from ._websocket import WebSocketTransport  # here: `websockets` is needed by this option only
            transport = commands = WebSocketTransport(url, token)
        if not isinstance(transport, str):
            httpx_options["transport"] = transport
        http = httpx.Client(**client_options(url, token, timeout), **httpx_options)
        super().__init__(http, timeout, None, commands)

    @property
    def desktops(self) -> Desktops:
        """The server's desktops: `create`, `list`, `get`, `attach`, `delete` (docs/desktops.md)."""
        return Desktops(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool (leaving a `with` block does)."""
        self._http.close()

    # The server's own endpoints, not a desktop's: a handle sends them to the same paths.
    def health(self) -> str:
        """`GET /v1/health`: `"ok"` while the server answers."""
        return self.send(b.health())

    def ready(self) -> ReadinessResponse:
        """`GET /v1/health/ready`: the end-to-end readiness checks; `ServerError` (503 `desktop_not_ready`)
        when one fails."""
        return self.send(b.ready())

    # Approvals (server-wide: the server token only)
    def approvals(self, *, status: ApprovalStatus | None = None, desktop_id: str | None = None) -> list[Approval]:
        """`GET /v1/approvals`: agent actions held for a person's decision (docs/approvals.md), pending ones first;
        `status="pending"` for those only, `desktop_id` for one desktop's."""
        return self.send(d.approvals(status, desktop_id))

    def approval(self, approval_id: str) -> Approval:
        """`GET /v1/approvals/{id}`: one approval; `NotFoundError` (`approval_not_found`) for an unknown id."""
        return self.send(d.approval(approval_id))

    def decide(self, approval_id: str, decision: Decision, *, message: str | None = None,
               by: str | None = None) -> Approval:
        """`POST /v1/approvals/{id}`: approve or deny a held action; the agent's call goes on at once (a denial
        answers it 403 `action_denied` with `message`). `ConflictError` (`approval_already_decided`)."""
        return self.send(d.decide(approval_id, decision, message, by))

    # Processes and files: the server's (the admin's, on the machine); on a desktop's handle, that desktop's
    _processes = b.SERVER_PROCESSES
    _files = f.SERVER_FILES

    def run(self, command: str, args: Iterable[str] = (), *, timeout_ms: int | None = None,
            cwd: str | None = None, env: Mapping[str, str] | None = None) -> ProcessRunResponse:
        """`POST /v1/processes/run`: run a command to completion on the server; on a desktop's handle
        (`/v1/desktops/{id}/processes/run`), inside that desktop's sandbox, from its HOME. Returns its exit code
        and output. `ClientError` 422 (`command_not_found`, `cwd_not_found`, ...); docs/processes.md."""
        return self.send(b.run(command, args, timeout_ms, cwd, env, self._processes))

    def processes(self, *, owner: Owner | None = None) -> list[ProcessInfo]:
        """`GET /v1/processes`: the server's processes, or those of one owner (`user`, `desktop`, `system`); on a
        desktop's handle, that desktop's only."""
        return self.send(b.processes(owner, self._processes))

    def read_file(self, path: str) -> bytes:
        """`GET /v1/fs/file`: a file's bytes (on a desktop's handle, in its sandbox: `~` is its HOME).
        `NotFoundError` for a path that is not there (or that its user may not see); docs/files.md."""
        return self.send(f.read_file(path, self._files))

    def write_file(self, path: str, data: bytes) -> FsWriteResponse:
        """`PUT /v1/fs/file`: write a file whole, atomically (missing parents made)."""
        return self.send(f.write_file(path, data, self._files))

    def list_files(self, path: str | None = None) -> list[FsEntry]:
        """`GET /v1/fs/entries`: a directory's entries (default: the home directory)."""
        return self.send(f.list_files(path, self._files))

    def stat(self, path: str) -> FsStat:
        """`GET /v1/fs/stat`: a path's type, size and modification time."""
        return self.send(f.stat(path, self._files))

    def delete_file(self, path: str, *, recursive: bool = False) -> FsActionResponse:
        """`DELETE /v1/fs/entry`: a file, link or directory (a non-empty one with `recursive`)."""
        return self.send(f.delete(path, recursive, self._files))

    def make_directory(self, path: str) -> FsActionResponse:
        """`POST /v1/fs/mkdir`: a directory and its parents."""
        return self.send(f.make_directory(path, self._files))

    def move_file(self, source: str, target: str, *, overwrite: bool = False) -> FsMoveResponse:
        """`POST /v1/fs/move`: move or rename; `ConflictError` if `target` exists, unless `overwrite`."""
        return self.send(f.move(source, target, overwrite, self._files))


class Desktops:
    """`client.desktops` of a `Client`: create, list, get and delete the server's desktops
    (docs/desktops.md). Errors as `Client`'s, plus those each method names."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
               idle_timeout_seconds: int | None = None, on_idle: OnIdle | None = None,
               home_template: str | None = None, width: int | None = None, height: int | None = None,
               dpi: int | None = None, display_num: int | None = None, state_dir: str | None = None,
               stream_video_codec: VideoCodec | None = None, stream_audio_codec: AudioCodec | None = None,
               stream_frame_rate: int | None = None, webrtc_port_range: str | None = None,
               recording_fps: int | None = None, max_width: int | None = None,
               max_height: int | None = None, report_effects: bool | None = None, opengl: bool | None = None,
               approve: list[str] | None = None,
               network: Settings | None = None, limits: Settings | None = None,
               auto_pause_seconds: int | None = None,
               auto_delete_seconds: int | None = None, osworld: bool | None = None,
               osworld_token: bool | None = None) -> DesktopClient:
        """`POST /v1/desktops`: create and start a desktop in a sandbox of its own; returns an
        `DesktopClient` on it.

        `tags` label it (`list(tags=...)` finds it), `ttl_seconds` deletes it that long after creation,
        `idle_timeout_seconds` deletes it (or pauses it, `on_idle="pause"`) after that long unused,
        `home_template` is a directory copied into its HOME, `approve` the kinds of agent actions held for a
        person's approval (`pointer`, `type`, `key`, `launch`, `process`, `all`; docs/approvals.md; default the
        server's `--approve`). `network` is what it may reach (`{"egress": "none"}`, `{"egress": "allowlist",
        "allow": ["example.com:443"]}`, `{"forwardHostPorts": [8000]}`), `limits` what its apps may use
        (`{"memoryMb": 512, "pids": 256, "cpu": 1.0}`), `auto_pause_seconds` pauses it after that much active
        time and `auto_delete_seconds` deletes it that long after it pauses (docs/security.md), `osworld`
        serves OSWorld's guest API for it on a port of its own (its resource's `osworld`; docs/osworld.md), which
        wants a token with `osworld_token`; the other options are `Client.start`'s (`report_effects`:
        every action answers what it changed, docs/effects.md).
        Raises `ClientError` (429 `too_many_desktops` beyond the server's `--max-desktops`, 400/422
        for a value out of range, naming the field) and `ServerError` as `start` does."""
        created = self._client.send(d.create_desktop(
            tags=tags, ttl_seconds=ttl_seconds, idle_timeout_seconds=idle_timeout_seconds, on_idle=on_idle,
            home_template=home_template, width=width, height=height, dpi=dpi, display_num=display_num,
            state_dir=state_dir, stream_video_codec=stream_video_codec, stream_audio_codec=stream_audio_codec,
            stream_frame_rate=stream_frame_rate, webrtc_port_range=webrtc_port_range, recording_fps=recording_fps,
            max_width=max_width, max_height=max_height, report_effects=report_effects, opengl=opengl, approve=approve,
            network=network, limits=limits, auto_pause_seconds=auto_pause_seconds,
            auto_delete_seconds=auto_delete_seconds, osworld=osworld, osworld_token=osworld_token))
        return self.attach(created.id)

    def list(self, *, tags: Mapping[str, str] | None = None) -> list[DesktopResource]:
        """`GET /v1/desktops`: every desktop (`default` first), or those carrying all of `tags`."""
        return self._client.send(d.list_desktops(tags))

    def get(self, desktop_id: str) -> DesktopResource:
        """`GET /v1/desktops/{id}`: one desktop (a deleted one too, with `state="deleted"` and
        `ended_reason`); `NotFoundError` (`desktop_not_found`) for an unknown id."""
        return self._client.send(d.get_desktop(desktop_id))

    def attach(self, desktop_id: str) -> DesktopClient:
        """A handle on an existing desktop, without a request (`default` is the `/v1/desktop` one): an
        unknown id fails on first use with `NotFoundError` (`desktop_not_found`)."""
        return DesktopClient.bind(self._client, desktop_id)

    def delete(self, desktop_id: str) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete a desktop; `ConflictError` (`desktop_is_default`)
        for `default`, `NotFoundError` for an unknown id."""
        self._client.send(d.delete_desktop(desktop_id))


class DesktopClient(Client):
    """Every method of `Client`, on one desktop (`/v1/desktops/{id}/...`), plus its lifecycle; `id` is its
    id. As a context manager it deletes the desktop on exit. It shares its client's connection pool:
    close the client. Its actions raise `NotFoundError` (`desktop_not_found`) once the desktop is gone
    and `ConflictError` (`desktop_paused`) while it is paused."""

    # Its commands and files are its own, inside its sandbox (scoped to /v1/desktops/{id}/...).
    _processes = b.DESKTOP_PROCESSES
    _files = f.DESKTOP_FILES

    def __init__(self, client: Client, desktop_id: str) -> None:
        # Not `Client.__init__`, which opens a connection pool: a handle uses its client's.
        Endpoints.__init__(self, client._http, client.timeout, desktop_id, client._commands)
        self.id = desktop_id

    @classmethod
    def bind(cls, client: Client, desktop_id: str) -> DesktopClient:
        """A handle on `desktop_id` sharing `client`'s settings and pool (`client.desktops.attach`)."""
        return cls(client, desktop_id)

    def info(self) -> DesktopResource:
        """`GET /v1/desktops/{id}`: this desktop's state, tags and lifecycle."""
        return self.send(d.get_desktop(self.id))

    def pause(self, *, wait: bool = True) -> DesktopResource:
        """`POST /v1/desktops/{id}/pause`: freeze every process of the desktop (its cgroup), windows kept; its
        actions raise `ConflictError` (`desktop_paused`) until `resume` or `connect`. Returns it once frozen,
        or at once with `wait=False` (the server answers 202 and freezes it in the background)."""
        return self.send(d.desktop_lifecycle(self.id, "pause", None if wait else {"wait": "false"}))

    def resume(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/resume`: thaw a paused desktop; returns it."""
        return self.send(d.desktop_lifecycle(self.id, "resume"))

    def connect(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/connect`: the desktop, active: resumed if it was paused (after a pause in
        progress ends, up to 30 s), as it is otherwise. What an agent calls at the start of its turn."""
        return self.send(d.desktop_lifecycle(self.id, "connect"))

    def update(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
               idle_timeout_seconds: int | None = None, auto_pause_seconds: int | None = None,
               auto_delete_seconds: int | None = None, network: Settings | None = None,
               limits: Settings | None = None, osworld: bool | None = None,
               osworld_token: bool | None = None) -> DesktopResource:
        """`PATCH /v1/desktops/{id}`: change its tags (replaced whole), timers, network rules, limits or its
        OSWorld guest API (on or off), in force at once; what is left out (None) stays as it is. `ClientError`
        400 naming a refused field."""
        return self.send(d.update_desktop(
            self.id, tags=tags, ttl_seconds=ttl_seconds, idle_timeout_seconds=idle_timeout_seconds,
            auto_pause_seconds=auto_pause_seconds, auto_delete_seconds=auto_delete_seconds, network=network,
            limits=limits, osworld=osworld, osworld_token=osworld_token))

    def network(self, *, limit: int | None = None) -> NetworkResponse:
        """`GET /v1/desktops/{id}/network`: its network rules as applied, and its newest connections (allowed,
        refused, forwarded; at most `limit`, default 200)."""
        return self.send(d.desktop_network(self.id, limit))

    def reset(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/reset`: back to a freshly started state (apps gone, clipboard empty,
        HOME from its template); returns it."""
        return self.send(d.desktop_lifecycle(self.id, "reset"))

    def delete(self) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete this desktop (leaving its `with` block does)."""
        self.send(d.delete_desktop(self.id))

    def token(self, role: Role, *, ttl_seconds: int | None = None) -> TokenResponse:
        """`POST /v1/desktops/{id}/tokens`: a token for this desktop only, `view` (watch) or `control`
        (drive too), for `ttl_seconds` (default 3600); `inspector_url` is a share link to its live view."""
        return self.send(d.desktop_token(self.id, role, ttl_seconds))

    def close(self) -> None:
        """Nothing: the connection pool is the client's."""

    def __enter__(self) -> DesktopClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.delete()
