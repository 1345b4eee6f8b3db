"""What one server has for its sandboxes: the zygote, the network hub, the cgroup root, the X cookies file,
and what this machine allows.

`SandboxHost.open()` starts the zygote (desktop/sandbox/zygote.py), learns from its first message what
this machine allows, and opens the server's network hub (desktop/sandbox/network.py) and cgroup root
(desktop/sandbox/cgroups.py) where it can, keeping why where it cannot. A server without root takes the
strongest sandbox its machine allows it (desktop/sandbox/rootless.py) and logs what desktops lack. With
`Isolation.OFF`, or on a machine that allows nothing, desktops run as the server's user in its namespaces,
as before sandboxes existed, and say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

from desktop.core.errors import DesktopFailed
from desktop.sandbox import protocol, users
from desktop.sandbox.cgroups import CgroupRoot
from desktop.sandbox.channel import Channel, SandboxGone, one_answer
from desktop.sandbox.layers import SANDBOX_LAYERS, Layer, SandboxReport
from desktop.sandbox.network import NetworkHub, NetworkUnavailable
from desktop.sandbox.rootless import Mode, RootlessPlan, exposed
from desktop.sandbox.slirp import HostAddresses

logger = logging.getLogger("sandbox_desktop.sandbox")

ZYGOTE = Path(__file__).with_name("zygote.py")
START_TIMEOUT_S = 10.0


class Isolation(StrEnum):
    """`sandbox-desktop server --isolation`."""

    AUTO = "auto"
    """The strongest sandbox this machine allows (the default)."""
    REQUIRED = "required"
    """Refuse to create a desktop that would not be isolated."""
    OFF = "off"
    """Desktops run as the server's user, in its namespaces (the behaviour before sandboxes)."""


class IsolationUnavailable(DesktopFailed):
    """`--isolation required` on a machine that cannot isolate a desktop."""


class SandboxHost:
    def __init__(self, isolation: Isolation, xauthority: Path, server_ports: tuple[int, ...] = (),
                 shared: tuple[Path, ...] = (), hidden: tuple[Path, ...] = (), preload: tuple[str, ...] = (),
                 uids: users.UidRange | None = None) -> None:
        self.isolation = isolation
        self.hidden = hidden
        """The server's state directories, which desktops must not reach (said at start where they can)."""
        self.preload = preload
        """Modules the zygote imports, whose functions a sandbox may run (`Sandbox.call`)."""
        self.uids = uids or users.UidRange()
        """The range desktops take their uids from (`--sandbox-uids`)."""
        self.uids_missing: str | None = None
        """Why those uids cannot be used (not mapped in the server's user namespace), where they cannot."""
        self.xauthority = xauthority
        """The server's own X cookies, one entry per display it runs (desktop/sandbox/xauth.py)."""
        self.server_ports = server_ports
        self.shared = shared
        """Host paths every desktop sees at their own paths (`--share`)."""
        self.hello: protocol.Hello | None = None
        self.network: NetworkHub | None = None
        self.network_missing: str | None = None
        """Why desktops get a namespace with only a loopback instead of the hub's network."""
        self.cgroups: CgroupRoot | None = None
        self.rootless: RootlessPlan | None = None
        """What desktops get where the server is not root (None where it is, or before `open`)."""
        self.addresses = HostAddresses()
        """The host's own addresses, followed for the desktops on slirp4netns (desktop/sandbox/slirp.py)."""
        self._zygote: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._lock = asyncio.Lock()
        self._restarting = asyncio.Lock()
        self._closed = False
        self._users: dict[str, users.SandboxUser] = {}

    @property
    def enabled(self) -> bool:
        if self.isolation is Isolation.OFF or self.hello is None:
            return False
        if self.rootless is not None:
            return self.rootless.mode is not Mode.NONE
        return self.hello.namespaces != 0 and self.hello.root and self.uids_missing is None

    @property
    def mode(self) -> Mode | None:
        """Where the server is not root, how its desktops are sandboxed; None where it is root."""
        return self.rootless.mode if self.rootless is not None else None

    async def open(self) -> None:
        """Start the zygote and learn what the machine allows (at server start, before any desktop)."""
        if self.isolation is Isolation.OFF:
            return
        try:
            message = await self._start_zygote()
        except DesktopFailed:
            await self.close()
            raise
        self.hello = message
        if not message.root:
            await self._open_rootless(message)
            return
        if message.namespaces != 0:
            self.uids_missing = self.uids.unmapped()
        if not self.enabled:
            logger.warning("desktops are not isolated: %s", "; ".join(set(self.missing().values())))
            return
        try:
            self.network = await NetworkHub.open(self.server_ports)
            for warning in self.network.warnings:
                logger.warning("desktop networks: %s", warning)
        except NetworkUnavailable as exc:
            self.network_missing = exc.reason
            logger.warning("desktops get no network (only their own loopback): %s", exc.reason)
        self.cgroups = await asyncio.to_thread(CgroupRoot.open)
        for feature, reason in self.cgroups.missing.items():
            logger.warning("desktop cgroups: no %s: %s", feature, reason)

    async def _start_zygote(self) -> protocol.Hello:
        ours, theirs = protocol.socket_pair()
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-I", "-S", str(ZYGOTE), str(theirs.fileno()), *self.preload],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        finally:
            theirs.close()
        self._channel = Channel(ours, on_close=self._zygote_ended)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                message, _ = await self._channel.expect()
        except (TimeoutError, DesktopFailed) as exc:
            raise DesktopFailed(f"the sandbox zygote did not start: {exc}") from exc
        if not isinstance(message, protocol.Hello):
            raise DesktopFailed(f"the sandbox zygote said {message.kind!r} before its hello")
        return message

    async def _zygote_channel(self) -> Channel:
        """The channel to a running zygote: one that ended (killed, or a fault of its own) is started again, once
        per request, so that new desktops and the serving processes of running ones do not depend on it."""
        if self._channel is not None and not self._channel.closed:
            return self._channel
        async with self._restarting:
            if self._channel is None or self._channel.closed:
                if self.hello is None or self._closed:
                    raise DesktopFailed("the sandbox zygote is not running")
                await self._end_zygote()
                logger.warning("the sandbox zygote ended: starting it again")
                await self._start_zygote()
            assert self._channel is not None
            return self._channel

    async def _open_rootless(self, hello: protocol.Hello) -> None:
        """Not root: decide what desktops get, with a cgroup where a delegated subtree has room, and log it."""
        cgroups_missing = ""
        if hello.user_namespace or hello.landlock_abi:
            cgroups = await asyncio.to_thread(CgroupRoot.open)
            if cgroups.tops:
                self.cgroups = cgroups
            else:
                await cgroups.aclose()
                reasons = {part for why in cgroups.missing.values() for part in why.split("; ")}
                cgroups_missing = "; ".join(sorted(reasons)[:3]) + ("; ..." if len(reasons) > 3 else "")
        self.rootless = RootlessPlan.decide(hello, cgroups_missing)
        self.network_missing = self.rootless.network_missing
        for line in self.rootless.log_lines():
            logger.warning("%s", line)
        within_tmp = exposed(self.rootless.mode, (*self.hidden, self.xauthority))
        if within_tmp:
            logger.warning("desktops lack mount: the server's %s lie within /tmp, which Landlock must leave writable "
                           "to every desktop's X server: the server's token is reachable (give --state-dir and "
                           "--xauthority outside /tmp)", ", ".join(within_tmp))
        if self.rootless.mode is not Mode.NONE and not self.expected().isolated:
            logger.warning("desktops are not isolated: the token or another desktop is within their reach "
                           "(docs/security.md \"Without root\")")

    def layers(self) -> frozenset[Layer]:
        """What every desktop's sandbox has on this server, before its cgroup."""
        return self.rootless.layers() if self.rootless is not None else SANDBOX_LAYERS

    def missing(self) -> dict[Layer, str]:
        """Why each layer cannot be had on this server (empty where all can)."""
        if self.isolation is not Isolation.OFF and self.rootless is not None:
            return self.rootless.missing()
        if self.isolation is Isolation.OFF:
            reason = "the server was started with --isolation off"
            return {layer: reason for layer in Layer if layer not in (Layer.USER_NAMESPACE, Layer.LANDLOCK)}
        hello = self.hello
        if hello is None or not hello.root:
            reason = ("the server is not root: separate uids and namespaces need root "
                      "(docs/security.md \"Without root\")")
        elif hello.namespaces == 0:
            reason = f"this machine refuses new namespaces ({os.strerror(hello.errno)})"
        elif self.uids_missing is not None:
            reason = self.uids_missing
        else:
            return {}
        return {layer: reason for layer in Layer if layer not in (Layer.USER_NAMESPACE, Layer.LANDLOCK)}

    def expected(self) -> SandboxReport:
        """What a desktop's sandbox will have when it starts here (desktop/lifecycle/isolation.py reports a
        running one's)."""
        if not self.enabled:
            return SandboxReport(frozenset(), self.missing())
        if self.rootless is not None:
            missing = self.rootless.missing()
            if self.cgroups is not None:
                missing.pop(Layer.CGROUP, None)
            return SandboxReport(self.layers() | ({Layer.CGROUP} if self.cgroups is not None else set()), missing)
        layers, missing = set(SANDBOX_LAYERS), {}
        if self.cgroups is not None:
            layers.add(Layer.CGROUP)
        else:
            missing[Layer.CGROUP] = "no cgroups on this machine"
        if self.network is None and self.network_missing is not None:
            missing[Layer.NETWORK] = f"its namespace has only a loopback: {self.network_missing}"
        return SandboxReport(frozenset(layers), missing)

    def check_required(self) -> None:
        if self.isolation is Isolation.REQUIRED and not self.expected().isolated:
            raise IsolationUnavailable("this server requires isolated desktops (--isolation required), and this "
                                       f"machine cannot isolate one: {'; '.join(set(self.missing().values()))}")

    async def create_init(self, request: protocol.Create, fds: list[int]) -> Channel:
        """Ask the zygote for a sandbox's init; the channel to it, once its `Started` came."""
        channel = await self._zygote_channel()
        ours, theirs = protocol.socket_pair()
        try:
            async with self._lock:
                await channel.send(request, [theirs.fileno(), *fds])
        finally:
            theirs.close()
        return Channel(ours)

    async def ask_zygote(self, message: protocol.Enter | protocol.Firewall, fds: list[int]) -> None:
        """Ask the zygote for a serving process in a sandbox whose init is a reaper only (`Enter`; `fds`: [the
        init's pidfd, the serving process's end of its socket]): it says `Ready` on that socket
        (desktop/sandbox/entry.py). Or for new rules in a sandbox's network namespace (`Firewall`; `fds`: [the
        init's pidfd, the socket a child of the zygote answers on])."""
        try:
            channel = await self._zygote_channel()
        except DesktopFailed as exc:
            raise SandboxGone(str(exc)) from exc
        async with self._lock:
            await channel.send(message, fds)

    async def firewall(self, init_pidfd: int, script: str) -> None:
        """Apply `script` in the network namespace of the sandbox whose init `init_pidfd` is, from a child of the
        zygote (desktop/sandbox/zygote.py `_firewall`). OSError if it could not be."""
        try:
            message, fds = await one_answer(
                lambda answer: self.ask_zygote(protocol.Firewall(script), [init_pidfd, answer]))
        except SandboxGone as exc:
            raise OSError(f"no answer from the sandbox: {exc}") from exc
        for fd in fds:
            os.close(fd)
        if isinstance(message, protocol.Failed):
            raise OSError(message.errno, message.message)

    async def user_for(self, desktop_id: str) -> users.SandboxUser:
        """The desktop's uid, the same for its whole life: a stop and a start keep it, so what it wrote
        anywhere (a shared folder, its HOME) stays its own. Given back by `forget`."""
        user = self._users.get(desktop_id)
        if user is None:
            if self.rootless is not None:  # a uid of its own needs root: the server's (desktop/sandbox/rootless.py)
                user = self._users[desktop_id] = users.SandboxUser(os.getuid(), os.getgid(), None)
            else:
                user = self._users[desktop_id] = await asyncio.to_thread(users.allocate, self.uids)
        return user

    def forget(self, desktop_id: str) -> None:
        """The desktop is deleted: its uid may go to another (its sandbox is closed, its processes gone)."""
        user = self._users.pop(desktop_id, None)
        if user is not None:
            user.release()

    def _zygote_ended(self) -> None:
        if self._zygote is not None and self._zygote.poll() is None:
            return
        logger.warning("the sandbox zygote ended; it is started again with the next request that needs it")

    async def _end_zygote(self) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._zygote is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self._zygote.wait, 2.0)
            if self._zygote.poll() is None:
                self._zygote.kill()
                await asyncio.to_thread(self._zygote.wait)

    async def close(self) -> None:
        self._closed = True
        await self.addresses.close()
        for desktop_id in list(self._users):
            self.forget(desktop_id)
        if self.network is not None:
            await self.network.close()
        if self.cgroups is not None:
            await self.cgroups.aclose()
        await self._end_zygote()
