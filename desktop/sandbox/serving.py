"""Who serves a sandbox's requests, on the server's side: its init, or a serving process started on demand.

A sandbox whose init is a reaper only (`Create.reaper`, desktop/sandbox/init.py) has no process that could start
a program inside it once set up. The first request starts one (`Enter`: desktop/sandbox/entry.py, ~3 ms); the
requests that follow go to it while they come, and it is closed `IDLE_S` after the last, so that an idle desktop
holds no Python process (its ~2.7 MiB of private memory), a busy one pays the start once per burst.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from desktop.core.errors import DesktopFailed
from desktop.sandbox import protocol
from desktop.sandbox.channel import Channel, Received, SandboxGone
from desktop.sandbox.host import SandboxHost

IDLE_S = 2.0
"""How long a serving process outlives the last request: longer than the gaps of a burst (a desktop's start, an
agent's step), short enough that an idle desktop soon costs nothing."""
READY_TIMEOUT_S = 10.0
T = TypeVar("T")


class Server:
    """The channel a sandbox's requests go on. `init` is the channel to its init; with `entering` (what the zygote
    needs to start a serving process) the init is a reaper only, and the requests go to serving processes."""

    def __init__(self, host: SandboxHost, init: Channel, entering: protocol.Enter | None,
                 init_pidfd: Callable[[], int], on_reaped: Callable[[protocol.Exited], None]) -> None:
        self.host = host
        self.on_reaped = on_reaped
        """Told of each program a serving process reaped (the exit then on the program's pidfd)."""
        self.init = init
        self.entering = entering
        self._init_pidfd = init_pidfd
        self._serving: Channel | None = None
        self._starting = asyncio.Lock()
        self._busy = 0
        self._idle: asyncio.TimerHandle | None = None

    @property
    def reaper_init(self) -> bool:
        return self.entering is not None

    async def request(self, make: Callable[[int], protocol.Message], fds: list[int]) -> Received:
        """Send the request `make(id)` and wait for its answer."""
        async def ask(channel: Channel) -> Received:
            return await channel.request(make(channel.next_id()), fds)
        return await self._use(ask)

    async def send(self, message: protocol.Message, fds: list[int]) -> None:
        """Send a request answered elsewhere (a `Call`, on its own socket)."""
        async def send(channel: Channel) -> None:
            await channel.send(message, fds)
        await self._use(send)

    async def _use(self, action: Callable[[Channel], Awaitable[T]]) -> T:
        if self.init.closed:
            raise SandboxGone("the desktop's sandbox is not running")
        if self.entering is None:
            return await action(self.init)
        self._busy += 1
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        try:
            return await action(await self._serving_channel())
        finally:
            self._busy -= 1
            if self._busy == 0 and self._serving is not None:
                self._idle = asyncio.get_running_loop().call_later(IDLE_S, self._close_serving)

    async def _serving_channel(self) -> Channel:
        async with self._starting:
            if self._serving is not None and not self._serving.closed:
                return self._serving
            assert self.entering is not None
            ours, theirs = protocol.socket_pair()
            try:
                await self.host.ask_zygote(self.entering, [self._init_pidfd(), theirs.fileno()])
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            channel = Channel(ours, on_exit=self.on_reaped)
            try:
                async with asyncio.timeout(READY_TIMEOUT_S):
                    message, _fds = await channel.expect()
            except (TimeoutError, SandboxGone) as exc:
                channel.close()
                raise SandboxGone(f"the desktop's sandbox could not serve a request: {exc}") from exc
            if isinstance(message, protocol.Failed):
                channel.close()
                raise DesktopFailed(f"the desktop's sandbox could not serve a request ({message.stage}): "
                                    f"{message.message}")
            self._serving = channel
            return channel

    def _close_serving(self) -> None:
        self._idle = None
        if self._busy == 0 and self._serving is not None:
            self._serving.close()  # it reads the end, and exits; what it started is the init's
            self._serving = None

    def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self._serving is not None:
            with contextlib.suppress(OSError):
                self._serving.close()
            self._serving = None
