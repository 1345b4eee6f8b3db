"""The desktops of one server: create, find, list by tag, delete, pause, resume, and the ones that end
by themselves (TTL, idle timeout). docs/desktops.md describes the resource; docs/architecture.md
where it sits.

The `default` desktop always exists (it is `/v1/desktop`, started and stopped as before); created
desktops are started at once and deleted, never stopped. Each has its own state directory under
`<state root>/desktops/<id>` and its own display, found by `DisplayAllocator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from api.http.desktop_paths import DEFAULT_DESKTOP_ID
from api.server.desktop_services import DesktopServices, Lifecycle
from desktop.core.errors import DesktopIsDefault, DesktopNotFound, TooManyDesktops
from desktop.lifecycle.options import StartOptions
from desktop.lifecycle.runtime import Desktop
from desktop.lifecycle.xserver import display_in_use
from sandbox_desktop_wire.enums import DesktopEndReason, DesktopRuntimeState, OnIdle

logger = logging.getLogger("sandbox_desktop.desktops")

Factory = Callable[[str, Path, Lifecycle], DesktopServices]

REAP_INTERVAL_S = 1.0
FIRST_CREATED_DISPLAY = 100
LAST_DISPLAY = 4000
ENDED_KEPT = 256
"""How many deleted desktops' last states are kept for `GET /v1/desktops/{id}`."""


class DisplayAllocator:
    """Display numbers for created desktops: never one of ours, never one with a live lock file (another
    server's or anyone's). Xvfb still takes the lock atomically, so a race with another server ends
    with its start trying the next numbers (docs/desktops.md)."""

    def __init__(self, first: int = FIRST_CREATED_DISPLAY) -> None:
        self.first = first
        self._next = first

    def pick(self, ours: Iterable[int]) -> int:
        taken = set(ours)
        span = LAST_DISPLAY - self.first
        for step in range(span):
            num = self.first + (self._next - self.first + step) % span
            if num not in taken and not display_in_use(num):
                self._next = num + 1
                return num
        raise TooManyDesktops("no free X display number is left on this machine")


class Ended:
    """What is left of a deleted desktop: why and when it ended."""

    def __init__(self, services: DesktopServices, code: DesktopEndReason, detail: str | None = None) -> None:
        self.id = services.id
        self.lifecycle = services.lifecycle
        self.code = code
        self.reason = reason_text(code, detail)
        """`endedReason`: the code, and the detail after a colon."""
        self.ended_at = time.time()


def reason_text(code: DesktopEndReason, detail: str | None) -> str:
    return f"{code}: {detail}" if detail else str(code)


class DesktopRegistry:
    """Every desktop of the server by id; the only place desktops are created and deleted."""

    def __init__(self, factory: Factory, state_root: Path, default_state_dir: Path, max_desktops: int,
                 on_deleted: Callable[[str], None] = lambda desktop_id: None) -> None:
        self._factory = factory
        self._on_deleted = on_deleted
        self.state_root = state_root
        self.max_desktops = max_desktops
        self.default = factory(DEFAULT_DESKTOP_ID, default_state_dir, Lifecycle())
        self._desktops: dict[str, DesktopServices] = {DEFAULT_DESKTOP_ID: self.default}
        self._ended: dict[str, Ended] = {}
        self._creating = 0
        self._displays = DisplayAllocator()
        self._reaper: asyncio.Task[None] | None = None

    # -- finding -----------------------------------------------------------------------------------

    def get(self, desktop_id: str) -> DesktopServices:
        services = self._desktops.get(desktop_id)
        if services is None:
            ended = self._ended.get(desktop_id)
            if ended is not None:
                raise DesktopNotFound(f"desktop {desktop_id!r} was deleted ({ended.reason})",
                                      desktopId=desktop_id, endedReason=ended.reason)
            raise DesktopNotFound(f"no desktop with id {desktop_id!r}; GET /v1/desktops lists them",
                                  desktopId=desktop_id)
        return services

    def ended(self, desktop_id: str) -> Ended | None:
        return self._ended.get(desktop_id)

    def list(self, tags: dict[str, str] | None = None) -> list[DesktopServices]:
        """Desktops in creation order, those carrying every `tags` item only."""
        wanted = (tags or {}).items()
        return [s for s in self._desktops.values() if wanted <= s.lifecycle.tags.items()]

    def count(self) -> int:
        """Desktops that hold resources: every created one, and the default one while it runs."""
        created = len(self._desktops) - 1 + self._creating
        return created + (self.default.desktop.state != DesktopRuntimeState.INACTIVE)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def create(self, options: StartOptions, requested: set[str], lifecycle: Lifecycle,
                     prepare: Callable[[Desktop], Awaitable[None]] | None = None) -> DesktopServices:
        """A new desktop, started (after `prepare`: its sandbox's settings); 429 beyond `max_desktops`."""
        if self.count() >= self.max_desktops:
            raise TooManyDesktops(f"this server holds at most {self.max_desktops} desktops "
                                  "(--max-desktops); DELETE /v1/desktops/{id} one first", maxDesktops=self.max_desktops)
        desktop_id = f"dsk_{secrets.token_hex(6)}"
        if "display_num" not in requested:
            ours = [s.desktop.display_num for s in self._desktops.values() if s.desktop.display_num is not None]
            options = StartOptions(**{**options.__dict__, "display_num": self._displays.pick(ours)})
        state_dir = self.state_root / desktop_id
        services = self._factory(desktop_id, state_dir, lifecycle)
        self._creating += 1
        try:
            await services.open()
            if prepare is not None:
                await prepare(services.desktop)
            await services.desktop.ensure_started(options, requested)
        except BaseException:
            await services.close()
            await asyncio.to_thread(shutil.rmtree, state_dir, True)
            raise
        finally:
            self._creating -= 1
        self._desktops[desktop_id] = services
        logger.info("desktop %s created on %s, tags %s", desktop_id, services.desktop.display_name,
                    lifecycle.tags, extra={"desktop": desktop_id, "display": services.desktop.display_name,
                                           "tags": lifecycle.tags})
        return services

    async def delete(self, desktop_id: str, code: DesktopEndReason = DesktopEndReason.DELETED,
                     detail: str | None = None) -> Ended:
        """Stop everything the desktop ran and forget it; its recordings stay on disk."""
        if desktop_id == DEFAULT_DESKTOP_ID:
            raise DesktopIsDefault("the default desktop cannot be deleted; "
                                   "POST /v1/desktop/stop stops it")
        services = self.get(desktop_id)
        del self._desktops[desktop_id]
        ended = Ended(services, code, detail)
        self._ended[desktop_id] = ended
        self._on_deleted(desktop_id)
        while len(self._ended) > ENDED_KEPT:
            self._ended.pop(next(iter(self._ended)))
        await services.close()
        await asyncio.to_thread(_remove_all_but_recordings, services.desktop.layout.root)
        logger.info("desktop %s deleted: %s", desktop_id, ended.reason,
                    extra={"desktop": desktop_id, "reason": ended.reason})
        return ended

    # -- ending by themselves ---------------------------------------------------------------------

    def start_reaper(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever(), name="desktop-reaper")

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(REAP_INTERVAL_S)
            try:
                await self.reap(time.time())
            except Exception:
                logger.exception("ending expired desktops failed")

    async def reap(self, now: float) -> None:
        """Delete desktops past their TTL; delete or pause those idle past their idle timeout."""
        for services in list(self._desktops.values()):
            life = services.lifecycle
            if services.id == DEFAULT_DESKTOP_ID:
                continue
            expires = life.expires_at
            if expires is not None and now >= expires:
                await self.delete(services.id, DesktopEndReason.TTL_EXPIRED, f"{life.ttl_seconds} s after creation")
                continue
            desktop = services.desktop
            if life.auto_delete_seconds is not None and desktop.paused_at is not None \
                    and now - desktop.paused_at >= life.auto_delete_seconds:
                await self.delete(services.id, DesktopEndReason.AUTO_DELETE, f"{life.auto_delete_seconds} s after it "
                                  "paused")
                continue
            if life.auto_pause_seconds is not None and not desktop.paused and desktop.state == "active" \
                    and now - max(desktop.active_since, life.created_at) >= life.auto_pause_seconds:
                reason = reason_text(DesktopEndReason.AUTO_PAUSE, f"{life.auto_pause_seconds} s active")
                logger.info("desktop %s paused: %s", services.id, reason, extra={"desktop": services.id})
                await desktop.pause(reason)
                continue
            idle = life.idle_timeout_seconds
            if idle is None or now - life.last_activity_at < idle or services.desktop.paused:
                continue
            detail = f"no request for {idle} s"
            if life.on_idle is OnIdle.PAUSE:
                reason = reason_text(DesktopEndReason.IDLE_TIMEOUT, detail)
                logger.info("desktop %s paused: idle for %d s", services.id, idle,
                            extra={"desktop": services.id, "reason": reason})
                await services.desktop.pause(reason)
            else:
                await self.delete(services.id, DesktopEndReason.IDLE_TIMEOUT, detail)

    async def shutdown(self) -> None:
        """Server exit: end the reaper, then close every desktop (created ones are gone with the server)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        created = [i for i in self._desktops if i != DEFAULT_DESKTOP_ID]
        await asyncio.gather(*(self.delete(i, DesktopEndReason.SERVER_SHUTDOWN) for i in created),
                             return_exceptions=True)
        await self.default.close()


def _remove_all_but_recordings(root: Path) -> None:
    """A deleted desktop's HOME, logs and sockets go; recordings are the user's and stay."""
    if not root.exists():
        return
    for entry in root.iterdir():
        if entry.name == "recordings" and any(entry.iterdir()):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
    with contextlib.suppress(OSError):
        root.rmdir()  # only if nothing was kept
