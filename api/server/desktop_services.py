"""Everything one desktop owns, and `build_desktop_services`: the one place a desktop is wired
(docs/architecture.md).

`DesktopServices` holds one desktop's Desktop (X display, window manager, session bus, HOME, input, capture), its
recorder, its live-view streamer, its batch runner and its lifecycle record (id, tags, TTL, idle timeout, last
activity). Built here only, so every desktop is put together the same way and nothing about one desktop lives in
a module-global."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from api.osworld.routes import Guest
from api.osworld.server import GuestServer
from desktop.actions.batch import Actions
from desktop.core.dependencies import DependencyChecker
from desktop.lifecycle.runtime import Desktop
from desktop.processes import ProcessManager
from desktop.sandbox.host import SandboxHost
from desktop.sound.capture import AudioCapture
from recording.manager import RecordingManager
from sandbox_desktop_wire.approvals import ActionKind
from sandbox_desktop_wire.enums import DesktopRuntimeState, OnIdle, TakeoverMode
from streaming.manager import StreamManager
from streaming.thumbnails import ThumbnailSource
from streaming.turn import TurnRelays

"""What happens to a desktop nobody has used for its `idleTimeoutSeconds`."""


@dataclass
class Lifecycle:
    """A desktop's record in the registry: who asked for it, and when it ends by itself."""

    tags: dict[str, str] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    ttl_seconds: int | None = None
    idle_timeout_seconds: int | None = None
    on_idle: OnIdle = OnIdle.DELETE
    last_activity_at: float = field(default_factory=time.time)
    home_template: Path | None = None
    """Copied into HOME at creation and at every reset."""
    approve: frozenset[ActionKind] | None = None
    """Kinds of agent actions held for a person's approval (docs/approvals.md); None: the server's `--approve`."""
    auto_pause_seconds: int | None = None
    """Paused after this much active time, counted from its creation or its last resume (docs/desktops.md)."""
    auto_delete_seconds: int | None = None
    """Deleted this long after it paused."""

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
    batches: Actions
    """Runs batches of steps in order: `POST .../actions` and the vendor endpoints (desktop/actions/batch.py)."""
    osworld: GuestServer
    """Its OSWorld guest API on a port of its own, while `osworld` is on (docs/osworld.md)."""
    thumbnails: ThumbnailSource
    """Its small JPEG pictures for the wall, encoded once for every wall watching (docs/inspector.md, "Wall")."""

    async def open(self) -> None:
        """Start the services that run without the desktop (catalog recovery, the stream's loop)."""
        await self.recordings.start()
        await self.stream.start()

    async def close(self) -> None:
        """Stop the desktop and everything it ran; its recording is finalised by the stop hooks."""
        await self.osworld.stop()  # first: nothing may reach the desktop through its port while it stops
        await self.desktop.shutdown()
        await self.stream.shutdown()
        await self.recordings.shutdown()


def build_desktop_services(desktop_id: str, state_dir: Path, processes: ProcessManager,
                           dependencies: DependencyChecker, public_addresses: tuple[str, ...],
                           lifecycle: Lifecycle | None = None,
                           takeover: TakeoverMode = TakeoverMode.REFUSE, sandboxes: SandboxHost | None = None,
                           hidden: tuple[Path, ...] = (), guest_hosts: tuple[str, str] = ("127.0.0.1", "127.0.0.1"),
                           authorize: Callable[[str, str], bool] = lambda desktop_id, token: False,
                           turn: TurnRelays | None = None) -> DesktopServices:
    """The one place a desktop's services are put together; `takeover` is `--takeover` (docs/control.md);
    `sandboxes` the server's, which make each running desktop a sandbox that does not see `hidden`;
    `guest_hosts` where its OSWorld guest API listens (the server's address) and the host its URL names,
    `authorize(desktop_id, token)` whether a token controls a desktop (for a guest API that wants one), `turn`
    the TURN servers its viewers may relay through (docs/streaming-turn.md)."""
    lifecycle = lifecycle or Lifecycle()
    desktop = Desktop(state_dir=state_dir, processes=processes, dependencies=dependencies, desktop_id=desktop_id,
                      home_template=lifecycle.home_template, takeover=takeover, sandboxes=sandboxes, hidden=hidden)
    # recording/ and streaming/ build on desktop/ (never the reverse): they finalise through its stop hooks.
    # One reader of the desktop's sound, shared by its viewers and its recording (docs/audio.md).
    audio = AudioCapture(desktop.running_sound)
    recordings = RecordingManager(desktop, audio=audio)
    stream = StreamManager(desktop, public_addresses, audio=audio, turn=turn)
    desktop.hooks.stop.append(recordings.on_desktop_stop)
    desktop.hooks.stop.append(stream.on_desktop_stop)
    desktop.hooks.stop.append(audio.close)
    # A failed desktop shows nothing new: viewers are told why, the recording ends where the screen did.
    desktop.hooks.failure.append(recordings.on_desktop_failure)
    desktop.hooks.failure.append(stream.on_desktop_failure)
    batches = Actions(desktop.mouse, desktop.keyboard, desktop.screen, desktop.frames, desktop.events,
                      desktop.accessibility.locate, desktop.effects)
    # The guest API is built from the desktop's own services only, so it acts in this desktop and no other.
    guest = GuestServer(lambda: Guest(desktop, recordings, lifecycle.touch).app(), *guest_hosts,
                        authorize=functools.partial(authorize, desktop_id), namespace=desktop.network_namespace)
    # A paused desktop's X server is stopped: its capture would wait forever, so the wall waits for it instead.
    thumbnails = ThumbnailSource(desktop.frames, lambda: desktop.display_name
                                 if desktop.current_state() is DesktopRuntimeState.ACTIVE else None)
    return DesktopServices(desktop_id, desktop, recordings, stream, lifecycle, batches, guest, thumbnails)
