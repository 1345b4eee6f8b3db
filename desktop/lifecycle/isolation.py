"""A running desktop's sandbox, put together: its display held on the machine, its network, its cgroups, its
Sandbox, and the server's cookie for its display (docs/security.md "The boundary").

`DesktopSandbox.create` makes them in the order each needs the one before (the display number names the
runtime directory the sandbox binds; the network namespace and the cgroups exist before the init joins
them), and `close` undoes them in reverse, each step run even if an earlier one failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from desktop.lifecycle.home import prepare_runtime_dir
from desktop.lifecycle.options import StateLayout
from desktop.sandbox import displays, xauth
from desktop.sandbox.cgroups import CgroupKind, DesktopCgroup, Feature
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.layers import Layer, SandboxReport
from desktop.sandbox.limits import Limits, Usage
from desktop.sandbox.netrules import EgressMode
from desktop.sandbox.network import DesktopNetwork, NetworkRules
from desktop.sandbox.rootless import Mode, server_home
from desktop.sandbox.sandbox import Sandbox
from desktop.sandbox.view import SandboxPlan

logger = logging.getLogger("sandbox_desktop.sandbox")


class DesktopSandbox:
    def __init__(self, host: SandboxHost, display: displays.Display) -> None:
        self.host = host
        self.display = display
        self.network: DesktopNetwork | None = None
        self.cgroup: DesktopCgroup | None = None
        self.sandbox: Sandbox | None = None

    @classmethod
    async def create(cls, host: SandboxHost, desktop_id: str, layout: StateLayout, hidden: tuple[Path, ...],
                     first_display: int, rules: NetworkRules | None = None,
                     limits: Limits | None = None, home_alias: str | None = None) -> DesktopSandbox:
        display = await asyncio.to_thread(displays.reserve, first_display, False)
        made = cls(host, display)
        try:
            runtime = await asyncio.to_thread(prepare_runtime_dir, f":{display.number}")

            async def network() -> None:
                if host.network is not None:
                    made.network = await host.network.create(desktop_id, rules or NetworkRules())

            async def cgroup() -> None:
                if host.cgroups is not None:
                    made.cgroup = await asyncio.to_thread(host.cgroups.create, _cgroup_name(desktop_id), limits)

            # Independent of each other (nft on one side, cgroupfs on the other): made at once, a few ms off a
            # create; on a failure of either, `close` below removes what the other made.
            done = await asyncio.gather(network(), cgroup(), return_exceptions=True)
            failed = next((result for result in done if isinstance(result, BaseException)), None)
            if failed is not None:
                raise failed
            rootless = host.rootless is not None
            home = server_home() if rootless else None
            plan = SandboxPlan(desktop_id, layout.root / "sandbox", layout.home, runtime, display.number,
                               hidden=hidden, shared=host.shared, private=(home,) if home is not None else (),
                               secrets=(host.xauthority,) if rootless else (), home_alias=home_alias)
            egress = (rules or NetworkRules()).egress is EgressMode.ALL
            made.sandbox = sandbox = await Sandbox.create(host, plan, made.network, made.cgroup, egress=egress)
            if host.mode is Mode.LANDLOCK:  # its X server is the machine's /tmp's: it takes the display itself
                await asyncio.to_thread(display.hand_over)
            else:
                await asyncio.to_thread(display.link, sandbox.x11_folder)
            await asyncio.to_thread(xauth.update_shared, host.xauthority, display.number, sandbox.cookie)
        except BaseException:
            await made.close()
            raise
        return made

    def report(self) -> SandboxReport:
        assert self.sandbox is not None
        base = self.sandbox.report
        missing = dict(base.missing)
        if self.host.rootless is not None:
            return self._rootless_report(base)
        if self.network is None and self.host.network_missing is not None:
            missing[Layer.NETWORK] = f"its namespace has only a loopback: {self.host.network_missing}"
        if self.cgroup is None:
            missing[Layer.CGROUP] = "no cgroups on this machine"
        return SandboxReport(base.layers, missing)

    def _rootless_report(self, base: SandboxReport) -> SandboxReport:
        """A server without root's: what its plan lacks, this desktop's network as it came out."""
        assert self.host.rootless is not None and self.sandbox is not None
        missing = self.host.rootless.missing()
        missing.pop(Layer.NETWORK, None)
        if self.host.mode is Mode.LANDLOCK:
            missing[Layer.NETWORK] = self.host.rootless.missing()[Layer.NETWORK]
        elif self.sandbox.slirp is None:
            missing[Layer.NETWORK] = self.sandbox.network_missing or "its namespace has only a loopback: its rules " \
                "allow no egress, or only some, which a server without root cannot enforce (so none)"
        if self.cgroup is not None:
            missing.pop(Layer.CGROUP, None)
        if self.sandbox.exposed:  # Landlock is in force, but cannot hide these: a mount namespace would have
            missing[Layer.MOUNT] = (f"{missing.get(Layer.MOUNT, 'no mount namespace')}; and the server's "
                                    f"{', '.join(self.sandbox.exposed)} lie within /tmp, which Landlock must leave "
                                    "writable to the desktop's X server: the server's token is reachable")
        return SandboxReport(base.layers, missing)


    async def set_network(self, rules: NetworkRules) -> None:
        """New rules for the running desktop's network, in force at once (a refused one keeps the old), and its
        /etc/resolv.conf to match them."""
        if self.network is not None:
            await self.network.update(rules)
            if self.sandbox is not None:
                await asyncio.to_thread(self.sandbox.network_changed)

    def set_limits(self, limits: Limits) -> dict[str, str]:
        """New limits for the running desktop; the ones this machine cannot enforce, by wire field, with why."""
        return self.cgroup.set_limits(limits) if self.cgroup is not None else {}

    def usage(self) -> Usage | None:
        """What the desktop uses now; None without cgroups, and once they are removed or while they are being
        removed (a stop or a delete in progress), so that a status asked meanwhile still answers."""
        cgroup = self.cgroup
        if cgroup is None or cgroup.removed:
            return None
        try:
            return cgroup.usage()
        except OSError:  # removed between the check and the reads
            return None

    async def give_home(self) -> None:
        """Hand HOME to the sandbox's user after the server wrote into it (a reset's template, rc.xml)."""
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.give_home)

    async def freeze(self) -> bool:
        """Freeze every process of the desktop through its cgroup; False where there is no freezer (the caller
        stops them with signals)."""
        if self.cgroup is None or self.host.cgroups is None or "freeze" not in self.host.cgroups.features:
            return False
        await self.cgroup.freeze()
        return True

    async def kill_apps(self) -> None:
        """Kill every process of the desktop's apps cgroup (a reset), daemons that left its session, process group
        and environment too; the session's own programs are in its other part and stay. Nothing where this
        machine cannot kill a cgroup's processes."""
        if self.cgroup is not None and self.host.cgroups is not None and Feature.KILL in self.host.cgroups.features:
            await self.cgroup.kill(CgroupKind.APPS)

    async def thaw(self) -> bool:
        if self.cgroup is None or self.host.cgroups is None or "freeze" not in self.host.cgroups.features:
            return False
        await self.cgroup.thaw()
        return True

    async def close(self) -> None:
        """End everything of the sandbox and give back what it held; every step runs, whatever failed before."""
        steps = []
        if self.sandbox is not None:
            steps.append(self.sandbox.close())
        if self.cgroup is not None:
            steps.append(self._remove_cgroup(self.cgroup))
        if self.network is not None:
            steps.append(self.network.close())
        for step in steps:
            try:
                await step
            except Exception:
                logger.exception("closing a desktop's sandbox")
        with contextlib.suppress(OSError):
            await asyncio.to_thread(xauth.update_shared, self.host.xauthority, self.display.number, None)
        await asyncio.to_thread(self.display.release)
        self.sandbox = self.cgroup = self.network = None

    async def _remove_cgroup(self, cgroup: DesktopCgroup) -> None:
        await cgroup.kill()
        await cgroup.remove()


def _cgroup_name(desktop_id: str) -> str:
    """A cgroup name for the desktop (`default` is the server's own leaf name in some layouts)."""
    return f"desktop-{desktop_id}"


def report_of(running: DesktopSandbox | None, host: SandboxHost | None) -> SandboxReport:
    """A desktop's sandbox as it is while it runs, or as its next start will make it."""
    if running is not None and running.sandbox is not None:
        return running.report()
    if host is None:
        return SandboxReport(frozenset(), {layer: "this desktop was made without the server's sandboxes"
                                           for layer in Layer if layer not in (Layer.USER_NAMESPACE, Layer.LANDLOCK)})
    return host.expected()
