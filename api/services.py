"""One typed home for services: what each desktop owns, what the server shares, and how a request
reaches them (docs/architecture.md).

- `DesktopServices`: one desktop's Desktop (X display, window manager, session bus, HOME, input,
  capture), its recorder and its live-view streamer, plus its lifecycle record (id, tags, TTL, idle
  timeout, last activity). Built by `build_desktop_services` only, so every desktop is put together
  the same way and nothing about one desktop lives in a module-global.
- `ServerServices`: the server-wide parts (process registry, the desktops registry, metrics, the
  configuration), set on the app once by `create_app`.
- `server_of(request)` and `desktop_services(request)` are the one way routes reach them: the second
  reads the path's `{desktop_id}` (absent under `/v1/desktop`, which is the `default` desktop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

from desktop.approvals import ApprovalBook
from desktop.audio import desktop_sound
from desktop.audio_capture import AudioCapture
from desktop.dependencies import DependencyChecker
from desktop.processes import ProcessManager
from desktop.runtime import Desktop
from recording.manager import RecordingManager
from sandbox_desktop_wire.approvals import ActionKind
from sandbox_desktop_wire.enums import OnIdle, TakeoverMode
from streaming.manager import StreamManager

if TYPE_CHECKING:
    from api.app import ServerConfig
    from api.metrics import Metrics
    from api.registry import DesktopRegistry
    from api.scoped_tokens import TokenStore

DEFAULT_DESKTOP_ID = "default"
"""The desktop `/v1/desktop/...` drives: the reference API's single desktop."""


IdleAction = OnIdle
"""What happens to a desktop nobody has used for its `idleTimeoutSeconds`."""


@dataclass
class Lifecycle:
    """A desktop's record in the registry: who asked for it, and when it ends by itself."""

    tags: dict[str, str] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    ttl_seconds: int | None = None
    idle_timeout_seconds: int | None = None
    on_idle: IdleAction = IdleAction.DELETE
    last_activity_at: float = field(default_factory=time.time)
    home_template: Path | None = None
    """Copied into HOME at creation and at every reset."""
    approve: frozenset[ActionKind] | None = None
    """Kinds of agent actions held for a person's approval (docs/approvals.md); None: the server's `--approve`."""

    @property
    def expires_at(self) -> float | None:
        return self.created_at + self.ttl_seconds if self.ttl_seconds is not None else None

    def touch(self) -> None:
        """A request reached the desktop: its idle clock starts again."""
        self.last_activity_at = time.time()


@dataclass(frozen=True)
class DesktopServices:
    """Everything one desktop owns; each service is built for this desktop and no other."""

    id: str
    desktop: Desktop
    recordings: RecordingManager
    stream: StreamManager
    lifecycle: Lifecycle

    async def open(self) -> None:
        """Start the services that run without the desktop (catalog recovery, the stream's loop)."""
        await self.recordings.start()
        await self.stream.start()

    async def close(self) -> None:
        """Stop the desktop and everything it ran; its recording is finalised by the stop hooks."""
        await self.desktop.shutdown()
        await self.stream.shutdown()
        await self.recordings.shutdown()


def build_desktop_services(desktop_id: str, state_dir: Path, processes: ProcessManager,
                           dependencies: DependencyChecker, public_addresses: tuple[str, ...],
                           lifecycle: Lifecycle | None = None,
                           takeover: TakeoverMode = TakeoverMode.REFUSE) -> DesktopServices:
    """The one place a desktop's services are put together; `takeover` is `--takeover` (docs/control.md)."""
    lifecycle = lifecycle or Lifecycle()
    desktop = Desktop(state_dir=state_dir, processes=processes, dependencies=dependencies, desktop_id=desktop_id,
                      home_template=lifecycle.home_template, takeover=takeover)
    # recording/ and streaming/ build on desktop/ (never the reverse): they finalise through its stop hooks.
    # One reader of the desktop's sound, shared by its viewers and its recording (docs/audio.md).
    audio = AudioCapture(lambda: desktop_sound(desktop))
    recordings = RecordingManager(desktop, audio=audio)
    stream = StreamManager(desktop, public_addresses, audio=audio)
    desktop.add_stop_hook(recordings.on_desktop_stop)
    desktop.add_stop_hook(stream.on_desktop_stop)
    desktop.add_stop_hook(audio.close)
    # A failed desktop shows nothing new: viewers are told why, the recording ends where the screen did.
    desktop.add_failure_hook(recordings.on_desktop_failure)
    desktop.add_failure_hook(stream.on_desktop_failure)
    return DesktopServices(desktop_id, desktop, recordings, stream, lifecycle)


@dataclass(frozen=True)
class ServerServices:
    """What the whole server shares; one per app."""

    config: ServerConfig
    processes: ProcessManager
    desktops: DesktopRegistry
    metrics: Metrics
    tokens: TokenStore
    """Tokens scoped to one desktop (api/scoped_tokens.py); the server token is `config.token`."""
    version: str
    approvals: ApprovalBook = field(default_factory=ApprovalBook)
    """Agent actions held for a person's decision, on every desktop (docs/approvals.md)."""


def desktop_path(path: str) -> tuple[str, str] | None:
    """(desktop id, the rest of the path) of a request path about one desktop, or None for a server-wide one:
    `/v1/desktop<rest>` is the `default` desktop, `/v1/desktops/{id}<rest>` the one named (docs/desktops.md).
    What the routes read from `{desktop_id}`, for the middleware that runs before any route."""
    if path == "/v1/desktop" or path.startswith("/v1/desktop/"):
        return DEFAULT_DESKTOP_ID, path.removeprefix("/v1/desktop")
    if path.startswith("/v1/desktops/"):
        desktop_id, slash, rest = path.removeprefix("/v1/desktops/").partition("/")
        if desktop_id:
            return desktop_id, slash + rest
    return None


def server_of(connection: HTTPConnection) -> ServerServices:
    """The app's ServerServices (`create_app` sets them once)."""
    services: ServerServices = connection.app.state.services
    return services


def desktop_services(connection: HTTPConnection) -> DesktopServices:
    """The desktop a request is about (404 `desktop_not_found` if there is none by that id); counts as
    activity for its idle timeout."""
    desktop_id = connection.path_params.get("desktop_id", DEFAULT_DESKTOP_ID)
    services = server_of(connection).desktops.get(desktop_id)
    services.lifecycle.touch()
    return services
