"""Keeps one desktop session's children alive: Xvfb, openbox, the session bus, the accessibility bus and the
sound server.

A watcher task awaits each child's exit (no polling) and restarts it at once; repeated crashes
and failed restarts back off and, past a cap per minute, the session is declared failed (docs/desktop.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from desktop.accessibility.browsers import install_debian_hook
from desktop.accessibility.launcher import find_launcher, switch_on
from desktop.core.dependencies import which
from desktop.core.errors import DesktopFailed, DomainError
from desktop.lifecycle.home import autostart_script, prepare_runtime_dir, runtime_dir
from desktop.lifecycle.options import StartOptions, StateLayout
from desktop.lifecycle.xserver import await_announcement, launch_xvfb
from desktop.processes import ManagedProcess, ProcessManager
from desktop.sandbox.sandbox import Sandbox
from desktop.sound.server import READY_TIMEOUT_S as SOUND_READY_TIMEOUT_S
from desktop.sound.server import SoundServer, SoundState, find_pulseaudio
from desktop.x11.thread import open_display
from sandbox_desktop_wire.enums import ProcessOwner, SupervisedChild

logger = logging.getLogger("sandbox_desktop.supervisor")

MAX_RESTARTS_PER_MINUTE = 5
WM_READY_TIMEOUT_S = 5.0
ACCESSIBILITY_READY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ChildExit:
    """How a supervised child last ended."""

    name: SupervisedChild
    pid: int
    exit_code: int | None
    signal: int | None
    at: float

    def describe(self) -> str:
        how = f"signal {self.signal}" if self.signal is not None else f"exit code {self.exit_code}"
        return f"{self.name} (pid {self.pid}) ended with {how}"


class Supervisor:
    """Starts, watches and restarts the processes that make up one desktop session."""

    def __init__(
        self,
        processes: ProcessManager,
        options: StartOptions,
        layout: StateLayout,
        environment: Callable[[str], dict[str, str]],
        log: Callable[[str], None],
        on_change: Callable[[], None],
        sandbox: Sandbox | None = None,
        desktop_id: str | None = None,
    ) -> None:
        self.processes = processes
        self.desktop_id = desktop_id
        self.sandbox = sandbox
        """Where the session's children run (desktop/sandbox/sandbox.py), or None: here, as the server's user."""
        self._launcher = sandbox.session if sandbox is not None else None
        self.options = options
        self.layout = layout
        self._environment = environment
        self._log = log
        self._on_change = on_change
        self.display_num: int | None = None
        self.children: dict[SupervisedChild, ManagedProcess] = {}
        self.bus_address: str | None = None
        self.sound: SoundServer | None = None
        """The desktop's PulseAudio while it runs (docs/audio.md); None: the desktop has no sound."""
        self.sound_state = SoundState.MISSING
        self._env: tuple[tuple[str, str | None, SoundServer | None], dict[str, str]] | None = None
        self.restart_count = 0
        self.last_exit: ChildExit | None = None
        self.recovering = False
        self.failure: str | None = None
        self._restart_error: str | None = None
        """Why the last restart attempt failed, while the next one is pending."""
        self._restarts: deque[float] = deque()
        self._watchers: dict[SupervisedChild, asyncio.Task[None]] = {}
        self._recovery = asyncio.Lock()
        self._retries: set[asyncio.Future[None]] = set()
        self._closing = False

    @property
    def display(self) -> str:
        return f":{self.display_num}"

    def env(self) -> dict[str, str]:
        """The environment for processes on this desktop (with the session bus when running). Built once per
        display and bus (every action's `Session` carries it); each caller gets its own copy."""
        key = (self.display, self.bus_address, self.sound)
        if self._env is None or self._env[0] != key:
            env = self._with_bus(self._environment(self.display))
            if self.sound is not None:
                env.update(self.sound.environment())
            self._env = (key, env)
        return dict(self._env[1])

    def outside_env(self) -> dict[str, str]:
        """`env()` for programs on this desktop that run here, as the server's user, outside its sandbox (the
        sound capture's readers, `/v1/processes` commands). Not marked as the desktop's: a reset or a stop,
        which end every marked process but the supervised ones, must leave them. In a sandbox, with the
        server's X cookies, since the sandbox's Xauthority names only the sandbox's hostname (python-xlib
        matches that), and with a PulseAudio cookie of the server's own: libpulse would otherwise make
        ~/.config/pulse in the desktop's HOME as the server's user, and the desktop's PulseAudio, which reads
        its configuration there, could not start again."""
        env = self.env()
        env.pop("SANDBOX_DESKTOP_INSTANCE", None)
        if self.sandbox is not None:
            env.pop("XAUTHORITY", None)
            if "XAUTHORITY" in os.environ:
                env["XAUTHORITY"] = os.environ["XAUTHORITY"]
            env["PULSE_COOKIE"] = str(self.sandbox.plan.state / "pulse-cookie")
        return env

    def running_sound(self) -> tuple[SoundServer, dict[str, str]] | None:
        """The running sound server and the environment its clients (the server's readers) use, or None."""
        pulse = self.children.get(SupervisedChild.PULSE)
        if self.sound is None or pulse is None or not pulse.running:
            return None
        return self.sound, self.outside_env()

    def _with_bus(self, env: dict[str, str]) -> dict[str, str]:
        if self.bus_address:
            env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        return env

    async def start(self, exact_display: bool) -> None:
        """Bring up the session bus, Xvfb and openbox; returns once the window manager is ready."""
        bus = asyncio.create_task(self._start_bus())
        try:
            await self._start_xvfb(self.options.display_num, exact_display)
            # Once per session: the sockets in it (accessibility bus, sound server) outlive each other's restarts.
            # A sandbox's was made before it, to be bound into it: made again, the binding would lose it.
            if self.sandbox is None:
                await asyncio.to_thread(prepare_runtime_dir, self.display)
            # The bus before the sound server: a PulseAudio that finds none autolaunches one of its own through
            # X11 (a stray `dbus-launch`, which ignores SIGTERM and so costs the first reset its grace period).
            await bus
            # With no autostart apps, openbox comes up beside the accessibility bus and the sound server (it
            # needs neither), which takes its ~50 ms off every start; with them, after both, which they need.
            autostart = await asyncio.to_thread(autostart_script, self.layout.home)
            wm = asyncio.create_task(self._start_openbox(first=True)) if autostart is None else None
            started = [t for t in (wm,) if t is not None]
            try:
                sound = asyncio.create_task(self._start_sound())
                started.append(sound)
                await self._start_accessibility_bus()  # before any app: Chromium decides at its start
                await sound  # before autostart apps: they must find the sound server
                if wm is None:
                    await self._start_openbox(first=True)
                else:
                    await wm
            except BaseException:
                for task in started:
                    task.cancel()
                await asyncio.gather(*started, return_exceptions=True)
                raise
        except BaseException:
            bus.cancel()
            await self.stop()
            raise

    async def _start_bus(self) -> None:
        if which("dbus-daemon") is None:
            self._log("dbus-daemon not found; continuing without a D-Bus session bus")
            return
        read_fd, write_fd = os.pipe()
        # In a sandbox the bus is on a socket path of its runtime directory, which the server reaches too (an
        # abstract socket belongs to the sandbox's network namespace), and admits the server's uid.
        where = (["--session"] if self.sandbox is None else
                 [f"--config-file={self.sandbox.dbus_config}", f"--address=unix:dir={self.sandbox.plan.runtime}"])
        try:
            proc = await self._spawn("dbus-daemon", [*where, "--nofork", "--nopidfile", f"--print-address={write_fd}"],
                                     self._environment(":0"), "dbus.log", pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        try:
            address = await await_announcement(read_fd, proc, 5.0)
        finally:
            os.close(read_fd)
        if address is None:
            self._log("dbus-daemon exited at start; continuing without a D-Bus session bus")
            return
        self.bus_address = address.decode().strip().splitlines()[0]
        self._adopt(SupervisedChild.DBUS, proc)

    async def _start_accessibility_bus(self) -> None:
        """`at-spi-bus-launcher` on the session bus, with accessibility switched on (docs/accessibility.md).
        Without a session bus or the launcher the desktop runs without accessibility, as it does without dbus."""
        launcher = find_launcher()
        if self.bus_address is None or launcher is None:
            self._log("no session bus or no at-spi-bus-launcher; continuing without accessibility")
            return
        with contextlib.suppress(OSError):  # not root: `install desktop` wrote it, or Chromium is not Debian's
            await asyncio.to_thread(install_debian_hook)
        proc = await self._spawn(launcher, ["--launch-immediately"], self.env(), "at-spi.log")
        try:
            ready = await switch_on(self.bus_address, ACCESSIBILITY_READY_TIMEOUT_S)
        except Exception as exc:  # the session bus went away meanwhile: its own watcher restarts it
            ready = False
            self._log(f"switching accessibility on failed: {exc}")
        if not ready:
            self._log(f"at-spi-bus-launcher did not start: {_tail(proc)}; continuing without accessibility")
            await proc.kill(1000)
            return
        self._adopt(SupervisedChild.AT_SPI, proc)

    async def _start_sound(self) -> None:
        """The desktop's PulseAudio (docs/audio.md); without it the desktop runs, without sound."""
        binary = find_pulseaudio()
        if binary is None:
            self.sound_state = SoundState.MISSING
            self._log("pulseaudio not found; continuing without sound (`sandbox-desktop install desktop` adds it)")
            return
        server = SoundServer(runtime_dir(self.display))
        server.socket.unlink(missing_ok=True)  # a crashed predecessor's: readiness is the socket appearing
        try:
            proc = await self._spawn(binary, server.arguments(), self._with_bus(self._environment(self.display)),
                                     "pulseaudio.log")
        except DomainError as exc:  # optional: the desktop goes on without sound
            self.sound_state = SoundState.FAILED
            self._log(f"pulseaudio could not be started: {exc.message}; continuing without sound")
            return
        deadline = time.monotonic() + SOUND_READY_TIMEOUT_S
        while not server.socket.exists():
            if not proc.running or time.monotonic() > deadline:
                self.sound_state = SoundState.FAILED
                self._log(f"pulseaudio did not start: {_tail(proc)}; continuing without sound")
                await proc.kill(1000)
                return
            await asyncio.sleep(0.005)
        self.sound = server
        self.sound_state = SoundState.RUNNING
        self._adopt(SupervisedChild.PULSE, proc)

    async def _spawn(self, command: str, args: list[str], env: dict[str, str], log: str,
                     pass_fds: tuple[int, ...] = ()) -> ManagedProcess:
        """Start one of the session's own programs: the desktop's, protected, in its sandbox if it has one."""
        return await self.processes.spawn(command, args, env=env, owner=ProcessOwner.DESKTOP, protected=True,
                                          pass_fds=pass_fds, log_path=self.layout.logs / log,
                                          launcher=self._launcher, desktop_id=self.desktop_id)

    def bus_daemons(self) -> set[int]:
        """Pids of the supervised children whose own children are part of the session, not apps: the
        accessibility launcher starts its bus daemon (a reset keeps it, and the registry that bus started)."""
        launcher = self.children.get(SupervisedChild.AT_SPI)
        return {launcher.host_pid} if launcher is not None and launcher.running else set()

    async def _start_xvfb(self, first_display: int, exact: bool) -> None:
        o = self.options
        proc, num = await launch_xvfb(
            self.processes, first_display=first_display, width=o.width, height=o.height, dpi=o.dpi,
            env=self._environment(f":{first_display}"), log_path=self.layout.logs / "Xvfb.log", exact=exact,
            max_size=o.framebuffer(), launcher=self._launcher,
            extra_args=self.sandbox.xvfb_arguments() if self.sandbox is not None else (), desktop_id=self.desktop_id,
            opengl=o.opengl,
        )
        self.display_num = num
        self._adopt(SupervisedChild.XVFB, proc)

    async def _start_openbox(self, first: bool) -> None:
        args: list[str] = []
        script = autostart_script(self.layout.home)
        if first and script is not None:
            # Only on the session's first openbox: a crash-restart must not launch the apps twice.
            args = ["--startup", f"sh {shlex.quote(str(script))}"]
        proc = await self._spawn("openbox", args, self.env(), "openbox.log")
        self._adopt(SupervisedChild.OPENBOX, proc)
        await self._wait_for_wm(proc)

    async def _wait_for_wm(self, proc: ManagedProcess) -> None:
        """openbox is ready once it has claimed the screen (`_NET_SUPPORTING_WM_CHECK` set)."""
        display = await asyncio.to_thread(open_display, self.display)
        try:
            atom = await asyncio.to_thread(display.intern_atom, "_NET_SUPPORTING_WM_CHECK")
            root = display.screen().root
            deadline = time.monotonic() + WM_READY_TIMEOUT_S
            while await asyncio.to_thread(root.get_full_property, atom, 0) is None:
                if not proc.running:
                    raise DesktopFailed(f"openbox exited during start: {_tail(proc)}")
                if time.monotonic() > deadline:
                    raise DesktopFailed(f"openbox did not manage the screen within {WM_READY_TIMEOUT_S:.0f} s")
                await asyncio.sleep(0.005)
        finally:
            await asyncio.to_thread(display.close)

    def _adopt(self, name: SupervisedChild, proc: ManagedProcess) -> None:
        self.children[name] = proc
        old = self._watchers.pop(name, None)
        if old is not None and old is not asyncio.current_task():
            old.cancel()
        self._watchers[name] = asyncio.create_task(self._watch(name, proc), name=f"watch-{name}")
        self._on_change()

    async def _watch(self, name: SupervisedChild, proc: ManagedProcess) -> None:
        code = await proc.wait()
        if self._closing or self.children.get(name) is not proc:
            return
        self.last_exit = ChildExit(name, proc.pid, proc.exit_code, proc.exit_signal, time.time())
        self._log(f"{self.last_exit.describe()}; attempting restart")
        logger.warning("%s exited (%s); restarting", name, code)
        await self._recover(name)

    async def _recover(self, name: SupervisedChild) -> None:
        async with self._recovery:
            if self._closing or self.failure is not None:
                return
            current = self.children.get(name)
            if current is not None and current.running:
                return  # another recovery already replaced it
            xvfb = self.children.get(SupervisedChild.XVFB)
            if name is not SupervisedChild.XVFB and (xvfb is None or not xvfb.running):
                return  # the X server died too; its own recovery restarts everything on top of it
            now = time.monotonic()
            while self._restarts and now - self._restarts[0] > 60:
                self._restarts.popleft()
            if len(self._restarts) >= MAX_RESTARTS_PER_MINUTE:
                self._give_up(name)
                return
            # Back off only when crashes repeat: the first restart is immediate.
            delay = 0.0 if not self._restarts else min(0.1 * 2 ** (len(self._restarts) - 1), 2.0)
            self._restarts.append(now)
            self.recovering = True
            self._on_change()
            try:
                await asyncio.sleep(delay)
                await RESTART[name](self)
                self.restart_count += 1
                self._restart_error = None
                self._log(f"{name} restarted; desktop active on {self.display}")
            except Exception as exc:
                # Still recovering until a retry succeeds or we give up: status must not say `active` meanwhile.
                self._restart_error = str(exc)
                self._log(f"restart of {name} failed: {exc}")
                self._on_change()
                asyncio.get_running_loop().call_later(0.2, self._retry, name)
                return
            self.recovering = False
            self._on_change()

    def _give_up(self, name: SupervisedChild) -> None:
        """Too many restarts within a minute: the session is failed until the next start."""
        last = self.last_exit.describe() if self.last_exit else f"{name} ended"
        if self._restart_error is not None:
            self.failure = (f"{last}, and restarting it failed ({len(self._restarts)} attempts within a minute): "
                            f"{self._restart_error}")
        else:
            self.failure = f"{name} crashed {len(self._restarts) + 1} times within a minute; last: {last}"
        self.recovering = False
        self._log(f"desktop_runtime_failed: {self.failure}")
        self._on_change()

    def _retry(self, name: SupervisedChild) -> None:
        if not self._closing:
            task = asyncio.ensure_future(self._recover(name))
            self._retries.add(task)
            task.add_done_callback(self._retries.discard)

    async def _restart_x(self) -> None:
        """Xvfb on its display again, and a new openbox on it: the old one lost its X server."""
        openbox = self.children.get(SupervisedChild.OPENBOX)
        if openbox is not None and openbox.running:
            self.children.pop(SupervisedChild.OPENBOX)
            await openbox.kill(1000)
        assert self.display_num is not None
        await self._start_xvfb(self.display_num, exact=True)
        await self._start_openbox(first=False)

    async def _restart_openbox(self) -> None:
        await self._start_openbox(first=False)

    async def _restart_bus(self) -> None:
        await self._start_bus()
        # The launcher's name and the apps' registrations lived on the old bus.
        launcher = self.children.pop(SupervisedChild.AT_SPI, None)
        if launcher is not None and launcher.running:
            await launcher.kill(1000)
        await self._start_accessibility_bus()

    async def stop(self) -> None:
        """Stop every child (openbox first, Xvfb last); watchers see `_closing` and stand down."""
        self._closing = True
        for task in self._watchers.values():
            if task is not asyncio.current_task():
                task.cancel()
        for name in STOP_ORDER:
            proc = self.children.get(name)
            if proc is not None and proc.running:
                await proc.stop(2000)
                if proc.running:
                    await proc.kill(1000)


RESTART: dict[SupervisedChild, Callable[[Supervisor], Awaitable[None]]] = {
    SupervisedChild.XVFB: Supervisor._restart_x,
    SupervisedChild.OPENBOX: Supervisor._restart_openbox,
    SupervisedChild.DBUS: Supervisor._restart_bus,
    SupervisedChild.AT_SPI: Supervisor._start_accessibility_bus,
    SupervisedChild.PULSE: Supervisor._start_sound,  # on the same socket: apps and the capture reconnect to it
}
"""How each child comes back after it ended (every child has a way)."""

STOP_ORDER = (SupervisedChild.OPENBOX, SupervisedChild.PULSE, SupervisedChild.AT_SPI, SupervisedChild.XVFB,
              SupervisedChild.DBUS)
"""Apps are gone by the time the children stop; the sound server after the window manager, the buses and X last."""


def _tail(proc: ManagedProcess) -> str:
    """The last bytes a failed child printed, for an error message that explains itself."""
    return proc.output_tail(400).strip() or f"exit code {proc.exit_code}"
