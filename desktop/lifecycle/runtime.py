"""The Desktop: one object that owns the desktop session, its state machine and its processes.

State changes happen in `_set_state` only (pause and resume too), which publishes them; status is computed
from that state plus the supervisor's live view, so a status call during a start or a restart answers at once.

Why this module is long: start, stop, pause, resume, reset and restart all change the one state machine under
the same locks; kept in one class, every state change stays in `_set_state` and can be read in one place.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from types import EllipsisType

from desktop.accessibility.service import Accessibility
from desktop.apps.launch import Apps
from desktop.clipboard.owner import Clipboard
from desktop.control.takeover import TakeoverGate
from desktop.core.dependencies import DependencyChecker
from desktop.core.errors import (
    DesktopBusy,
    DesktopError,
    DesktopFailed,
    DesktopInactive,
    DesktopPaused,
    DesktopUnsupportedPlatform,
    invalid_action,
)
from desktop.effects.observer import EffectObserver
from desktop.events.action_log import ActionLog
from desktop.events.event_types import DisplayChanged
from desktop.events.sources import DesktopEvents
from desktop.input.keyboard import Keyboard
from desktop.input.mouse import Mouse
from desktop.lifecycle.cleanup import end_apps
from desktop.lifecycle.home import desktop_environment, prepare_home, restore_home, runtime_dir
from desktop.lifecycle.hooks import Hooks
from desktop.lifecycle.isolation import DesktopSandbox, report_of
from desktop.lifecycle.options import StartOptions, StateLayout, default_state_dir
from desktop.lifecycle.snapshot import DesktopSnapshot, rfc3339_ns, take_snapshot
from desktop.lifecycle.supervisor import Supervisor
from desktop.lifecycle.vm_image import VmImage
from desktop.processes import ProcessManager, reaper
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.layers import SandboxReport
from desktop.sandbox.limits import Limits, Usage
from desktop.sandbox.netrules import NetworkRules
from desktop.sandbox.rootless import Mode
from desktop.sandbox.sandbox import Sandbox
from desktop.screen.frames import LINGER_S as FRAMES_LINGER_S
from desktop.screen.frames import FrameSource
from desktop.screen.screenshots import Screen
from desktop.sound.server import SoundServer
from desktop.windows.control import Windows
from desktop.windows.query import close_other_clients
from desktop.x11.randr import DisplayChange, apply_display, read_geometry
from desktop.x11.session import Session
from desktop.x11.thread import XThread
from sandbox_desktop_wire.enums import ClipboardSelection, DesktopRuntimeState, TakeoverMode
from sandbox_desktop_wire.problems import ProblemCode

logger = logging.getLogger("sandbox_desktop.runtime")

X_DRAIN_S = 2.0
"""How long a pause waits for what the X thread was given before it to be answered; past that it freezes anyway
(an X server that answers nothing)."""


class Desktop:
    """The desktop session: start/stop, status, supervision and the process registry."""

    def __init__(
        self,
        state_dir: Path | None = None,
        processes: ProcessManager | None = None,
        dependencies: DependencyChecker | None = None,
        desktop_id: str = "default",
        home_template: Path | None = None,
        takeover: TakeoverMode = TakeoverMode.REFUSE,
        sandboxes: SandboxHost | None = None,
        hidden: tuple[Path, ...] = (),
    ) -> None:
        self.id = desktop_id
        self.sandboxes = sandboxes
        """The server's sandboxes (None, or not `enabled`: the desktop runs as the server's user)."""
        self.hidden = hidden
        """The server's state, which the desktop's sandbox must not see (its HOME in it is bound back)."""
        self.sandbox: DesktopSandbox | None = None
        self.network_rules = NetworkRules()
        """What its network reaches (docs/security.md); applied to a running sandbox by `network_changed`."""
        self.limits = Limits()
        """What its apps and commands may use (docs/sandbox-limits.md)."""
        self.active_since = time.time()
        """When it last started running (created, started or resumed): the clock of `autoPauseSeconds`."""
        self.paused_at: float | None = None
        self.home_template = home_template
        """A directory copied into HOME when the desktop starts and when it is reset (docs/desktops.md)."""
        self.vm_image: VmImage | None = None
        """Dressed as OSWorld's VM image from its next start (docs/osworld.md "What tasks assume"), or not."""
        self.default_state_dir = state_dir or default_state_dir()
        # A registry shared with other desktops (the server's) is shut down by its owner, not here.
        self._owns_processes = processes is None
        self.processes = processes or ProcessManager()
        self.dependencies = dependencies or DependencyChecker()
        self.layout = StateLayout(self.default_state_dir)
        self.options: StartOptions | None = None
        self.supervisor: Supervisor | None = None
        self.x: XThread | None = None
        self._session: tuple[tuple[object, ...], Session] | None = None  # the last session() and its sources
        self._state = DesktopRuntimeState.INACTIVE
        self._last_error: tuple[ProblemCode, str] | None = None
        self.paused_reason: str | None = None
        """Why every process of the desktop is frozen (`pause`), or None while it runs."""
        self._started_ns: int | None = None
        self._marker = ""
        self.hooks = Hooks()
        self._display_lock = asyncio.Lock()
        self._pausing = asyncio.Lock()
        self.screen = Screen()
        self.action_log = ActionLog()
        self.takeover = TakeoverGate(takeover)
        """What agent input gets while a person holds control in the live view (docs/control.md); the live view
        (streaming/manager.py) tells it who holds control, the mouse and keyboard ask it before every action."""
        self.keyboard = Keyboard(log=self.action_log, gate=self.takeover)
        self.clipboard = Clipboard()
        self.mouse = Mouse(self.action_log, self.takeover)
        self.windows = Windows()
        self.apps = Apps(self.processes, self.launcher, desktop_id)
        self.frames = FrameSource(linger_s=FRAMES_LINGER_S)
        self.events = DesktopEvents(self.processes, lambda: self.layout.home)
        self.effects = EffectObserver(self.events)
        self.accessibility = Accessibility(self.mouse, self.keyboard, self.events.bus, self.launcher)

    # -- state -------------------------------------------------------------------------------

    def _set_state(self, state: DesktopRuntimeState | None = None, error: tuple[ProblemCode, str] | None = None, *,
                   paused: str | EllipsisType | None = ...) -> None:
        """The one place the state changes: `state` and its `error` (None keeps both), and `paused` when given (why
        every process is frozen; None: thawed); publishes `desktop.state_changed` when `current_state` changed."""
        before = self.current_state()
        if state is not None:
            self._state, self._last_error = state, error
        if not isinstance(paused, EllipsisType):
            self.paused_reason = paused
            self.paused_at = time.time() if paused is not None else None
            if paused is None:
                self.active_since = time.time()
        after = self.current_state()
        if after != before:
            logger.info("desktop %s -> %s", before, after)
            self.events.state_changed(before, after)

    @property
    def state(self) -> str:
        """`current_state()`: a DesktopRuntimeState member, typed as the plain string it equals so that
        code comparing it with a name (metrics' labels) needs no enum."""
        return self.current_state()

    def current_state(self) -> DesktopRuntimeState:
        """The state as on the wire, folding in missing dependencies and supervisor health."""
        if self._state in (DesktopRuntimeState.STARTING, DesktopRuntimeState.STOPPING):
            return self._state
        if self.paused_reason is not None:
            return DesktopRuntimeState.PAUSED
        if self.dependencies.report().missing:
            return DesktopRuntimeState.INSTALL_REQUIRED
        if self._state == DesktopRuntimeState.ACTIVE and self.supervisor is not None:
            if self.supervisor.failure is not None:
                return DesktopRuntimeState.FAILED
            if self.supervisor.recovering:
                return DesktopRuntimeState.STARTING
        return self._state

    def last_error(self) -> tuple[ProblemCode, str] | None:
        report = self.dependencies.report()
        if report.missing and self._state not in (DesktopRuntimeState.STARTING, DesktopRuntimeState.STOPPING):
            return (ProblemCode.DESKTOP_DEPENDENCIES_MISSING, report.message())
        if self.supervisor is not None and self.supervisor.failure is not None:
            return (ProblemCode.DESKTOP_RUNTIME_FAILED, self.supervisor.failure)
        return self._last_error

    def log(self, message: str) -> None:
        """Append one line to the runtime log: `<RFC 3339> <message>`."""
        line = f"{rfc3339_ns(time.time_ns())} {message}\n"
        try:
            with open(self.layout.runtime_log, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:
            logger.warning("cannot write runtime log %s: %s", self.layout.runtime_log, exc)

    def _supervisor_changed(self) -> None:
        """A child exited, was restarted, could not be restarted, or the supervisor gave up."""
        # A restart that failed for want of its binary must read `install_required` now, not after the cache's ttl.
        self.dependencies.report(fresh=True)
        failed = self.supervisor is not None and self.supervisor.failure is not None
        if failed:
            self.hooks.failed(lambda: (self.last_error() or ("", "the desktop failed"))[1])

    # -- guards for actions --------------------------------------------------------------------

    def require_active(self) -> Supervisor:
        """The running session, or the problem that explains why there is none."""
        report = self.dependencies.report()
        if report.missing:
            raise report.refusal()
        if self._state == DesktopRuntimeState.INACTIVE:
            raise DesktopInactive("Desktop runtime has not been started")
        if self.paused_reason is not None:
            raise DesktopPaused(f"the desktop is paused ({self.paused_reason}); "
                                f"POST /v1/desktops/{self.id}/resume first", resume=f"/v1/desktops/{self.id}/resume")
        if self._state in (DesktopRuntimeState.STARTING, DesktopRuntimeState.STOPPING):
            raise DesktopBusy("Desktop runtime is busy transitioning state")
        supervisor = self.supervisor
        if self._state == DesktopRuntimeState.FAILED or supervisor is None or supervisor.failure is not None:
            message = (self.last_error() or ("", "Desktop runtime failed"))[1]
            raise DesktopFailed(message)
        if supervisor.recovering:
            cause = supervisor.last_exit.describe() if supervisor.last_exit else "a crash"
            raise DesktopFailed(f"Desktop is restarting after {cause}; retry shortly", retry_after=1)
        return supervisor

    def running_sound(self) -> tuple[SoundServer, dict[str, str]] | None:
        """The running sound server and its clients' environment, or None (no sound now; docs/audio.md)."""
        return self.supervisor.running_sound() if self.supervisor is not None else None

    def session(self) -> Session:
        """The running desktop for an action, or the ready error explaining why there is none; kept until
        something it carries changes (building it per action was a tenth of a click's time)."""
        s, o = self.require_active(), self.options
        assert self.x is not None and o is not None
        key = (s, s.display, s.bus_address, s.sound, o.width, o.height, self.x, self.layout.root)
        if self._session is None or self._session[0] != key:
            self._session = (key, Session(s.display, o.width, o.height, self.x, s.env(), str(self.layout.home)))
        return self._session[1]

    async def set_display(self, width: int, height: int, dpi: int | None = None) -> DisplayChange:
        """Change the running desktop's screen size (and dpi; None keeps it), its apps and windows kept; returns
        once the X server applied it (docs/display.md). The one setter of the size: everything reading the
        session, the status or the options follows, capture re-opens at the new size, and `display.changed`
        is published. Beyond the framebuffer is a 400 naming the field."""
        async with self._display_lock:  # one change at a time, applied in arrival order
            session = self.session()
            options, supervisor = self.options, self.supervisor
            assert options is not None and supervisor is not None
            dpi = options.dpi if dpi is None else dpi
            began = time.perf_counter()
            geometry = await session.x.call(apply_display, width, height, dpi)
            elapsed = time.perf_counter() - began
            self.options = replace(options, width=geometry.width, height=geometry.height, dpi=dpi)
            supervisor.options = self.options  # an X server restarted after a crash comes back at this size
        self.events.bus.publish(DisplayChanged(geometry.width, geometry.height, dpi))
        self.log(f"display {geometry.width}x{geometry.height}, dpi {dpi} ({elapsed * 1000:.1f} ms)")
        logger.info("desktop %s display %dx%d dpi %d", self.id, geometry.width, geometry.height, dpi)
        return DisplayChange(geometry.width, geometry.height, dpi, geometry.max_width, geometry.max_height, elapsed)

    @property
    def paused(self) -> bool:
        return self.paused_reason is not None

    @property
    def display_num(self) -> int | None:
        return self.supervisor.display_num if self.supervisor is not None else None

    @property
    def display_name(self) -> str | None:
        return self.supervisor.display if self.supervisor is not None and self.display_num is not None else None

    # -- lifecycle -----------------------------------------------------------------------------

    async def pause(self, reason: str) -> None:
        """Freeze every process of the desktop (SIGSTOP of each one carrying its marker: the X server, the
        window manager, the session bus, apps and all their descendants). It then uses no CPU and keeps its
        windows, files and memory; actions answer 409 `desktop_paused` until `resume`."""
        async with self._pausing:  # a resume (an agent's connect) waits for a pause in progress to end
            if self.paused_reason is not None:
                return
            self.require_active()
            self._set_state(paused=reason)  # actions are refused from now on, while the processes are being stopped
            # What X was asked before (a status that looked at the state just before) is answered while it still
            # can: a frozen X server answers nothing until the thaw (a page's status poll hung until the resume).
            if self.x is not None:
                await self.x.drain(X_DRAIN_S)
            # The supervisor waits for exits only (no WUNTRACED): a stopped child is not mistaken for a crash.
            if self.sandbox is None or not await self.sandbox.freeze():
                await asyncio.to_thread(reaper.stop_marked, self._marker)
        logger.info("desktop %s paused: %s", self.id, reason)
        self.log(f"desktop paused: {reason}")

    async def reset(self) -> None:
        """Back to a freshly started state, same id and display, recording and viewers kept: every process of
        the desktop but its X server, window manager and session bus ends, any other X client's windows are
        closed, held keys and buttons are released, the clipboard is emptied and HOME is restored from its
        template (docs/desktops.md, "Reset")."""
        session = self.session()
        supervisor = self.require_active()
        async with session.x.input:
            await self.mouse.release_all(session)
            await end_apps(self.processes, self._marker, keep=supervisor)
            if self.sandbox is not None:  # what shed the marker the apps were found by is still in their cgroup
                await self.sandbox.kill_apps()
            await session.x.call(close_other_clients)
            await self.clipboard.set(session, "", ClipboardSelection.BOTH)
            await asyncio.to_thread(restore_home, self.layout.home, self.home_template)
            if self.sandbox is not None:
                await self.sandbox.give_home()
        self.log("desktop reset")
        logger.info("desktop %s reset", self.id)

    async def resume(self) -> None:
        """Thaw what `pause` froze; a desktop that is not paused is left as it is."""
        async with self._pausing:
            if self.paused_reason is None:
                return
            if self.sandbox is None or not await self.sandbox.thaw():
                await asyncio.to_thread(reaper.signal_marked, self._marker, signal.SIGCONT)
            self._set_state(paused=None)
        logger.info("desktop %s resumed", self.id)
        self.log("desktop resumed")

    async def start(self, options: StartOptions, requested: Iterable[str] = ()) -> DesktopSnapshot:
        """Start the desktop, or return the running one if the request agrees with it."""
        await self.ensure_started(options, requested)
        return await self.snapshot()

    async def ensure_started(self, options: StartOptions, requested: Iterable[str] = ()) -> None:
        """`start` without the snapshot it answers with (a window list, the pointer's grab, usage: ~5-10 ms),
        for a caller that answers with something else (`POST /v1/desktops`, which answers with the resource)."""
        if not sys.platform.startswith("linux"):
            self._set_state(DesktopRuntimeState.FAILED,
                            (ProblemCode.DESKTOP_UNSUPPORTED_PLATFORM, "Desktop is only supported on Linux"))
            raise DesktopUnsupportedPlatform("Desktop is only supported on Linux")
        if self._state in (DesktopRuntimeState.STARTING, DesktopRuntimeState.STOPPING):
            raise DesktopBusy("Desktop runtime is busy transitioning state")
        options.validate()
        report = self.dependencies.report(fresh=True)
        if report.missing:
            raise report.refusal()
        healthy = self.supervisor is not None and self.supervisor.failure is None
        if self._state == DesktopRuntimeState.ACTIVE and healthy and self.options is not None:
            fields = set(requested)
            self.options.refuse_change(options, fields)
            if "report_effects" in fields:  # read per action: it changes on the running desktop
                self.options = replace(self.options, report_effects=options.report_effects)
            return
        if self.supervisor is not None:  # a failed session: clear it away first
            await self._teardown()
        self._set_state(DesktopRuntimeState.STARTING)
        try:
            await self._bring_up(options)
        except BaseException as exc:
            message = exc.message if isinstance(exc, DesktopError) else str(exc)
            self.log("desktop runtime startup failed; cleaning up")
            self.log(f"desktop_runtime_failed: {message}")
            await self._teardown()
            self._set_state(DesktopRuntimeState.FAILED, (ProblemCode.DESKTOP_RUNTIME_FAILED, message))
            raise

    async def _bring_up(self, options: StartOptions) -> None:
        layout = StateLayout(options.state_dir or self.default_state_dir)
        try:
            await asyncio.to_thread(layout.create)
            await asyncio.to_thread(prepare_home, layout.home, self.home_template)
        except OSError as exc:
            reason = f"the state directory {layout.root} cannot be used: {exc.strerror or exc}"
            if options.state_dir is None:  # the server's own --state-dir: not the client's doing
                raise DesktopFailed(reason) from exc
            raise invalid_action(reason, "stateDir") from exc
        self.layout = layout
        self.options = options
        self._marker = uuid.uuid4().hex
        self.log("starting desktop runtime")
        base, extra = dict(os.environ), {}
        if self.sandboxes is not None and self.sandboxes.enabled:
            self.sandbox = await DesktopSandbox.create(self.sandboxes, self.id, layout, self.hidden,
                                                       options.display_num, self.network_rules, self.limits,
                                                       home_alias=image.home_alias if (image := self.vm_image)
                                                       else None)
            assert self.sandbox.sandbox is not None
            extra = self.sandbox.sandbox.environment()
            self.options = options = replace(options, display_num=self.sandbox.display.number)
        vm_image, path = self.vm_image, base.get("PATH", os.defpath)

        def environment(display: str) -> dict[str, str]:
            dressed = vm_image.environment(path, runtime_dir(display)) if vm_image is not None else {}
            return desktop_environment(base, layout.home, display, self._marker) | extra | dressed

        supervisor = Supervisor(
            self.processes, options, layout,
            environment=environment,
            log=self.log, on_change=self._supervisor_changed,
            sandbox=self.sandbox.sandbox if self.sandbox is not None else None, desktop_id=self.id,
        )
        self.supervisor = supervisor
        await supervisor.start(exact_display=self.sandbox is not None)
        if vm_image is not None:  # before any app: the commands tasks name are there when they run
            await asyncio.to_thread(vm_image.write_commands, runtime_dir(supervisor.display), path)
        self.x = XThread(supervisor.display, "desktop")
        # The largest size `set_display` may take, as the X server allows it (its framebuffer).
        limits = await self.x.call(read_geometry)
        self.options = options = replace(options, max_width=limits.max_width, max_height=limits.max_height)
        self.events.start(supervisor.display)
        self.windows.start(supervisor.display)  # window captures' redirection, before apps draw (docs/windows.md)
        self._started_ns = time.time_ns()
        self._set_state(DesktopRuntimeState.ACTIVE)
        self.accessibility.connect_soon(self.session())
        size = f"{options.width}x{options.height}, dpi {options.dpi}"
        self.log(f"desktop runtime active on {supervisor.display} ({size})")

    def sees_home_alias(self) -> bool:
        """Whether its running sandbox shows its HOME at its VM image's alias too (a mount namespace of its own)."""
        running = self.sandbox.sandbox if self.sandbox is not None else None
        return running is not None and running.plan.home_alias is not None and running.host.mode is not Mode.LANDLOCK

    def network_namespace(self) -> str | None:
        """Where its loopback is (desktop/sandbox/portforward.py `Namespace`): its sandbox's network namespace,
        None without a sandbox (the host's); OSError while it is not running."""
        if self._state is not DesktopRuntimeState.ACTIVE:
            raise OSError(errno.ESRCH, "the desktop is not running")
        running = self.sandbox.sandbox if self.sandbox is not None else None
        return running.network_namespace() if running is not None else None

    async def stop(self) -> DesktopSnapshot:
        """Stop everything the desktop started; a stop while inactive is a no-op."""
        if self._state in (DesktopRuntimeState.STARTING, DesktopRuntimeState.STOPPING):
            raise DesktopBusy("Desktop runtime is busy transitioning state")
        if self._state == DesktopRuntimeState.INACTIVE and self.supervisor is None:
            return await self.snapshot()
        self._set_state(DesktopRuntimeState.STOPPING)
        self.log("stopping desktop runtime")
        try:
            await self._teardown()
        finally:
            self._set_state(DesktopRuntimeState.INACTIVE)
        return await self.snapshot()

    async def _teardown(self) -> None:
        await self.hooks.stopping()
        if self.paused_reason is not None:  # stopped processes cannot exit on SIGTERM: thaw them first
            await self.resume()
        for feature in (self.accessibility, self.frames, self.screen, self.keyboard, self.clipboard, self.events,
                        self.windows):
            await feature.close()
        if self.x is not None:
            await self.x.close()
            self.x = None
        # Launched apps first, while the X server is still there for them to exit cleanly.
        if self._marker:
            await end_apps(self.processes, self._marker)
        if self.supervisor is not None:
            await self.supervisor.stop()
        if self._marker:
            await asyncio.to_thread(reaper.kill_marked, self._marker)
        if self.sandbox is not None:
            await self.sandbox.close()
            self.sandbox = None
        self.supervisor = None
        self.options = None
        self._started_ns = None

    async def shutdown(self) -> None:
        """Server exit: stop the desktop and every remaining child."""
        if (self._state not in (DesktopRuntimeState.INACTIVE, DesktopRuntimeState.STOPPING)
                or self.supervisor is not None):
            self._set_state(DesktopRuntimeState.STOPPING)
            await self._teardown()
            self._set_state(DesktopRuntimeState.INACTIVE)
        self.events.shutdown()
        if self.sandboxes is not None:
            self.sandboxes.forget(self.id)
        if self._owns_processes:
            await self.processes.shutdown()

    # -- status --------------------------------------------------------------------------------

    def launcher(self) -> Sandbox | None:
        """Where the desktop's apps and commands start: its sandbox while it runs in one, else None (here)."""
        return self.sandbox.sandbox if self.sandbox is not None else None

    def usage(self) -> Usage | None:
        """What it uses now, read from its cgroups while it runs in a sandbox (docs/sandbox-limits.md)."""
        return self.sandbox.usage() if self.sandbox is not None else None

    def sandbox_report(self) -> SandboxReport:
        """What keeps the desktop apart (docs/security.md): while it runs, its sandbox's; else its next start's."""
        return report_of(self.sandbox, self.sandboxes)

    async def snapshot(self) -> DesktopSnapshot:
        """The status document; never blocks on a transition (desktop/lifecycle/snapshot.py)."""
        return await take_snapshot(self)

    @property
    def started_ns(self) -> int | None:
        """When the running session became active (epoch ns), or None."""
        return self._started_ns
