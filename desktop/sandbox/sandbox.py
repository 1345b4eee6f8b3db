"""One desktop's sandbox: its user, its namespaces, its X cookie, its init and what runs in it; its view of the
files is desktop/sandbox/view.py's (docs/security.md "The boundary").
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from desktop.core.errors import Conflict, DesktopFailed
from desktop.sandbox import landlock, linux, protocol, rootless, users, view, xauth
from desktop.sandbox.call import run_call
from desktop.sandbox.cgroups import CgroupKind, DesktopCgroup, Feature
from desktop.sandbox.channel import Channel, SandboxGone
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.layers import Layer, SandboxReport
from desktop.sandbox.network import DesktopNetwork
from desktop.sandbox.process import SandboxedProcess
from desktop.sandbox.rootless import Mode
from desktop.sandbox.serving import Server
from desktop.sandbox.slirp import RESOLVER, Slirp, firewall, host_addresses
from desktop.sandbox.view import SandboxPlan
from desktop.sandbox.zygote import NAMESPACES

logger = logging.getLogger("sandbox_desktop.sandbox")

READY_TIMEOUT_S = 10.0
GONE_TIMEOUT_S = 5.0
"""How long the end of a sandbox may take: its init and every process of its namespace killed and reaped."""
class Sandbox:
    def __init__(self, host: SandboxHost, plan: SandboxPlan, user: users.SandboxUser, cookie: bytes,
                 network: DesktopNetwork | None, cgroup: DesktopCgroup | None) -> None:
        self.host = host
        self.plan = plan
        self.user = user
        self.cookie = cookie
        self.network = network
        self.cgroup = cgroup
        self.report = SandboxReport(host.layers() | ({Layer.CGROUP} if cgroup is not None else set()), {})
        self.slirp: Slirp | None = None
        """Its network where the server is not root (desktop/sandbox/slirp.py)."""
        self.refused: list[str] = []
        """The host's addresses its rules refuse, on slirp4netns (kept up to date: `refuse_host`)."""
        self.network_missing: str | None = None
        """Why it has only its loopback, where the server is not root and it asked for more."""
        self.exposed: tuple[str, ...] = ()
        """What of the server Landlock was to hide and cannot, being within a folder it must leave writable."""
        self._channel: Channel | None = None
        self._init: SandboxedProcess | None = None
        self._processes: dict[int, SandboxedProcess] = {}
        self.app_cgroups: tuple[str, ...] = ()
        """Where its programs start (the apps' cgroups, once the desktop has them)."""
        self._early_exits: dict[int, int] = {}
        """Exits reported before their spawn's reply was taken (both can come in one read)."""
        self._watched: dict[int, SandboxedProcess] = {}
        """Where the init is a reaper only: the running programs by their pid in the sandbox, whose exits are read
        off their pidfds."""
        self._server: Server | None = None
        """Who serves its requests (desktop/sandbox/serving.py), once it runs."""

    # -- making it --------------------------------------------------------------------------------------------

    @classmethod
    async def create(cls, host: SandboxHost, plan: SandboxPlan, network: DesktopNetwork | None = None,
                     cgroup: DesktopCgroup | None = None, egress: bool = False) -> Sandbox:
        """Make the sandbox: in `network`'s namespace (else one with only a loopback), its programs in
        `cgroup`'s apps part and the session's in its session part, when given. `egress`: where the server is
        not root, give it slirp4netns's network where the machine allows (else it has only its loopback)."""
        user = await host.user_for(plan.desktop_id)
        sandbox = cls(host, plan, user, xauth.new_cookie(), network, cgroup)
        try:
            await sandbox._start(egress)
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    async def _start(self, egress: bool) -> None:
        mode, plan = self.host.mode, self.host.rootless
        slirp = plan.slirp4netns if plan is not None and egress else None
        if plan is not None and egress and slirp is None:
            self.network_missing = plan.network_missing
        mounts = await asyncio.to_thread(self._prepare, slirp is not None)
        session = self.cgroup.procs_files(CgroupKind.SESSION) if self.cgroup is not None else ()
        self.app_cgroups = self.cgroup.procs_files(CgroupKind.APPS) if self.cgroup is not None else ()
        netns = os.open(self.network.netns_path, os.O_RDONLY | os.O_CLOEXEC) if self.network is not None else None
        namespaces = NAMESPACES & ~linux.CLONE_NEWNET if netns is not None else NAMESPACES
        hello = self.host.hello
        reaper = hello is not None and hello.pidfd_exit and mode is not Mode.LANDLOCK
        if slirp is not None:
            self.refused = await asyncio.to_thread(host_addresses)
        try:
            request = protocol.Create(
                reaper=reaper, namespaces=0 if mode is Mode.LANDLOCK else namespaces,
                hostname=self.plan.hostname, mounts=tuple(mounts), uid=self.user.uid, gid=self.user.gid,
                join_netns=1 if netns is not None else None, cgroup_files=session,
                user_namespace=mode is Mode.USER_NAMESPACE, landlock=self._confinement(),
                loopback=mode is Mode.USER_NAMESPACE,
                firewall=firewall(self.refused) if slirp is not None else None)
            self._channel = await self.host.create_init(request, [netns] if netns is not None else [])
            entering = protocol.Enter(
                request.namespaces | linux.CLONE_NEWNET | (linux.CLONE_NEWUSER if request.user_namespace else 0),
                request.uid, request.gid, request.landlock, request.cgroup_files) if reaper else None
            self._server = Server(self.host, self._channel, entering, lambda: self._init_process().pidfd,
                                  self._reaped)
        finally:
            if netns is not None:
                os.close(netns)
        self._channel_listen()
        # `Started` comes from the process that forked the init, `Ready` from the init: in either order.
        ready = False
        async with asyncio.timeout(READY_TIMEOUT_S):
            while self._init is None or not ready:
                message, fds = await self._channel.expect()
                match message:
                    case protocol.Failed():
                        raise DesktopFailed(f"the sandbox could not be made ({message.stage}): {message.message}")
                    case protocol.Started():
                        self._init = SandboxedProcess(fds[0], 1)
                        if self.cgroup is not None:  # before it starts anything: its programs begin where it is
                            self.cgroup.add(self._init.pid, CgroupKind.SESSION)
                    case protocol.Ready():
                        ready = True
        if slirp is not None:
            await self._start_slirp(slirp)

    async def _start_slirp(self, binary: str) -> None:
        """Its network, through slirp4netns; without it (a failure), only its loopback, and it says why."""
        assert self._init is not None
        try:
            self.slirp = await Slirp.start(binary, self._init.pid)
        except OSError as exc:
            self.network_missing = f"its namespace has only a loopback: {exc}"
            logger.warning("desktop %s: %s", self.plan.desktop_id, self.network_missing)
            return
        self.host.addresses.follow(self)

    async def refuse_host(self, addresses: list[str]) -> None:
        """Its rules replaced by ones refusing the host's `addresses` (they changed: slirp.HostAddresses)."""
        if self._init is not None:
            await self.host.firewall(self._init.pidfd, firewall(addresses))
            self.refused = addresses
            logger.info("desktop %s refuses the host's addresses as they are now: %s", self.plan.desktop_id,
                        ", ".join(addresses))

    def _confinement(self) -> landlock.Confinement | None:
        plan, rootless_plan = self.plan, self.host.rootless
        if rootless_plan is None:
            return None
        private = tuple(d for d in view.PRIVATE_DIRS if os.path.isdir(d)) if rootless_plan.mode is Mode.USER_NAMESPACE \
            else ("/tmp",)
        cgroups = tuple(str(Path(f).parent) for f in (*self.app_cgroups, *(self.cgroup.procs_files(CgroupKind.SESSION)
                                                                            if self.cgroup is not None else ())))
        confinement = rootless.confinement(rootless_plan.mode, rootless_plan.landlock_abi, (plan.home, plan.runtime),
                                           (*private, *cgroups), plan.shared,
                                           (*plan.hidden, *plan.private, *plan.secrets))
        if confinement is not None:
            self.exposed = confinement.exposed()
            if self.exposed:
                logger.warning("desktop %s can reach %s: Landlock cannot hide it within /tmp, which its X server "
                               "writes", plan.desktop_id, ", ".join(self.exposed))
        return confinement

    def _channel_listen(self) -> None:
        assert self._channel is not None
        self._channel._on_exit = self._exited
        self._channel._on_close = self._lost

    def _prepare(self, slirp: bool = False) -> list[protocol.Mount]:
        """The sandbox's files on the host, and its mount plan (blocking)."""
        return view.prepare(self.plan, self.user, self.cookie, self._resolv_conf(slirp))

    def _resolv_conf(self, slirp: bool) -> str:
        """Its resolvers: its network's by its rules; slirp4netns's where the server is not root; else none."""
        if self.network is not None:
            return self.network.resolv_conf()
        return f"nameserver {RESOLVER}\n" if slirp else ""

    def network_changed(self) -> None:
        """Rewrite its /etc/resolv.conf for its network's rules as they are now (blocking): the resolvers it may
        reach come and go with egress `none`. The file is bound into the sandbox by its inode, rewritten in place,
        so the desktop's next lookup reads the new one."""
        (self.plan.state / "etc" / "resolv.conf").write_text(self._resolv_conf(self.slirp is not None))

    def network_namespace(self) -> str | None:
        """Where the server may join its network namespace; None where it has none (Landlock only: it shares the
        host's); OSError where the server may not join it (a server without root) or it is gone."""
        if self.network is not None:
            return self.network.netns_path
        if self.host.mode is Mode.LANDLOCK:
            return None
        if self.host.rootless is not None:
            raise OSError(errno.EPERM, "a server without root cannot join a desktop's network namespace")
        if self._init is None:
            raise OSError(errno.ESRCH, "the desktop's sandbox is not running")
        return f"/proc/{self._init.pid}/ns/net"

    def give_home(self) -> None:
        """The desktop's HOME and all in it to the sandbox's user (blocking)."""
        view.chown_tree(self.plan.home, self.user.uid)

    # -- what runs in it --------------------------------------------------------------------------------------

    @property
    def dbus_config(self) -> Path:
        """The desktop's session bus configuration: the machine's, and the server's uid may join it."""
        return self.plan.runtime / "dbus-session.conf"

    @property
    def x11_folder(self) -> Path:
        """Where its X server's socket is, on the server's side."""
        return self.plan.state / "x11"

    def xvfb_arguments(self) -> list[str]:
        """What its X server needs besides the usual: only clients with the cookie, no abstract socket."""
        return ["-auth", str(self.plan.runtime / "Xauthority"), "-nolisten", "local"]

    @property
    def session(self) -> SessionLauncher:
        """Starts the desktop's own programs (X, window manager, buses, sound) in the session's cgroup."""
        return SessionLauncher(self)

    def environment(self) -> dict[str, str]:
        """What every program of the sandbox finds in its environment besides the desktop's own."""
        return {"USER": users.USER_NAME, "LOGNAME": users.USER_NAME,
                "XAUTHORITY": str(self.plan.runtime / "Xauthority")}

    async def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None,
                    fds: Mapping[int, int], tty: bool = False, cgroups: Sequence[str] | None = None
                    ) -> SandboxedProcess:
        """Start a program in the sandbox with `fds` (target number -> our descriptor) as its descriptors.
        Raises OSError (errno of the failing step, as a local spawn would), ValueError (arguments no program can
        take: an embedded NUL, a '=' in a variable's name) or SandboxGone."""
        targets = tuple(fds)
        files = tuple(self.app_cgroups if cgroups is None else cgroups)
        reply, received = await self._live_server().request(
            lambda request_id: protocol.Spawn(request_id, tuple(argv), dict(env), cwd, targets, tty=tty,
                                              cgroup_files=files), [fds[t] for t in targets])
        if isinstance(reply, protocol.Failed):
            limit = self._apps_pids_limit() if cgroups is None else None
            if reply.errno == errno.EAGAIN and limit is not None:  # the desktop's own limit, not the machine's
                raise Conflict(f"{argv[0]!r} cannot start: the desktop's apps are at their limit of {limit} processes "
                               f"and threads (limits.pids); end some of them, or raise it with PATCH "
                               f"/v1/desktops/{self.plan.desktop_id}", limit=limit)
            if reply.stage == protocol.ARGUMENTS_STAGE:
                raise ValueError(reply.message)  # as a local spawn raises it: the caller's mistake
            raise OSError(reply.errno, f"{reply.message} ({reply.stage})")
        assert isinstance(reply, protocol.Spawned)
        process = SandboxedProcess(received[0], reply.pid)
        if self._live_server().reaper_init:  # its exit is read off its pidfd (the init that may reap it says nothing)
            self._watched[reply.pid] = process
            process.callbacks.append(lambda: self._unwatch(reply.pid, process))
            process.watch_exit()
            return process
        early = self._early_exits.pop(reply.pid, None)
        if early is not None:
            process.ended(early)
        else:
            self._processes[reply.pid] = process
        return process

    def _live_server(self) -> Server:
        if self._server is None or self._server.init.closed:
            raise SandboxGone("the desktop's sandbox is not running")
        return self._server

    def _init_process(self) -> SandboxedProcess:
        if self._init is None:
            raise SandboxGone("the desktop's sandbox is not running")
        return self._init

    def _apps_pids_limit(self) -> int | None:
        """The pids limit the kernel enforces on the desktop's apps, if any."""
        cgroup = self.cgroup
        return cgroup.limits.pids if cgroup is not None and Feature.PIDS in cgroup.root.features else None

    async def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """A descriptor of `path` opened as the sandbox's user would, in its view of the files."""
        reply, received = await self._live_server().request(
            lambda request_id: protocol.Open(request_id, path, flags, mode), [])
        if isinstance(reply, protocol.Failed):
            raise OSError(reply.errno, reply.message)
        return received[0]

    async def call(self, function: str, args: Mapping[str, Any], fds: Sequence[int] = ()
                   ) -> tuple[dict[str, Any], list[int]]:
        """Run `function(args, fds)` ("module:name" of a module in the host's `preload`) in a child of the init,
        as the sandbox's user (desktop/sandbox/call.py). Raises OSError or SandboxGone."""
        return await run_call(self._live_server().send, function, args, fds, self.app_cgroups)

    def _unwatch(self, pid: int, process: SandboxedProcess) -> None:
        if self._watched.get(pid) is process:
            del self._watched[pid]

    def _reaped(self, message: protocol.Exited) -> None:
        """The serving process reaped a program it started: its exit is on its pidfd now, read it at once."""
        process = self._watched.get(message.pid)
        if process is not None:
            process.check_exit()

    def _exited(self, message: protocol.Exited) -> None:
        process = self._processes.pop(message.pid, None)
        if process is not None:
            process.ended(message.status)
        else:
            self._early_exits[message.pid] = message.status

    def _lost(self) -> None:
        for process in self._processes.values():
            process.ended(9 if process.returncode is None else 0)  # killed with the namespace
        self._processes.clear()

    @property
    def running(self) -> bool:
        return self._channel is not None and not self._channel.closed

    # -- ending it --------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """End every process of the sandbox: the init is killed, and the kernel kills the rest of its pid
        namespace and reaps it before the init's own exit shows on its pidfd. The uid stays the desktop's
        (SandboxHost.user_for)."""
        if self.slirp is not None:
            await self.host.addresses.unfollow(self)  # no new rules for it from here on
        if self._server is not None:
            self._server.close()
        if self._channel is not None:
            self._channel.close()
        if self._init is not None:
            if self.host.mode is Mode.LANDLOCK:  # no pid namespace to end with it: the init ends its programs first
                await self._init.gone(1.0)
            self._init.send_signal(9)
            if not await self._init.gone(GONE_TIMEOUT_S):
                logger.warning("the init of %s's sandbox did not end in %.0f s", self.plan.desktop_id, GONE_TIMEOUT_S)
            self._init.close()
        if self.slirp is not None:
            await self.slirp.close()
            self.slirp = None
        self._lost()


class SessionLauncher:
    """A sandbox's programs that make up the desktop itself: started in the session's cgroup, which limits
    on the apps do not cover (an app that runs out of memory must not take the X server with it)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, fds: Mapping[int, int],
                    tty: bool = False) -> SandboxedProcess:
        return await self.sandbox.spawn(argv, env, cwd, fds, tty, cgroups=())  # where the init itself is
