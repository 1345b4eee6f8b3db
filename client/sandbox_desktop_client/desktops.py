"""Many desktops from the clients: `client.desktops.create(...)` returns a handle that has every method
of the client, bound to that desktop (docs/desktops.md, docs/client.md).

    with Client() as client:
        with client.desktops.create(tags={"agent": "a1"}, ttl_seconds=3600) as desktop:
            desktop.launch("xterm", wait=True)
            desktop.screenshot().save("screen.png")
        # leaving the `with` deleted the desktop

A handle shares its client's connection pool: close the client, not the handle.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

from sandbox_desktop_wire.desktops import DesktopResource, TokenResponse

from . import _base as b
from .async_client import AsyncClient
from .client import Client


def _lifecycle(tags: Mapping[str, str] | None, ttl_seconds: int | None, idle_timeout_seconds: int | None,
               on_idle: str | None, home_template: str | None) -> dict[str, Any]:
    return {"tags": dict(tags) if tags else None, "ttl_seconds": ttl_seconds,
            "idle_timeout_seconds": idle_timeout_seconds, "on_idle": on_idle, "home_template": home_template}


H = TypeVar("H", "DesktopClient", "AsyncDesktopClient")


def _bind(cls: type[H], client: Client | AsyncClient, desktop_id: str) -> H:
    """A handle sharing `client`'s settings and connection pool (no `__init__`: no second pool)."""
    handle = cls.__new__(cls)
    handle.__dict__.update(client.__dict__)
    handle._desktop = handle.id = desktop_id
    return handle


# -- blocking -------------------------------------------------------------------------------------

class Desktops:
    """`client.desktops`: the server's desktops."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
               idle_timeout_seconds: int | None = None, on_idle: str | None = None,
               home_template: str | None = None, **start: Any) -> DesktopClient:
        """Create and start a desktop; `start` takes the start options in snake_case (width, height, dpi...)."""
        lifecycle = _lifecycle(tags, ttl_seconds, idle_timeout_seconds, on_idle, home_template)
        return self.attach(self._client.send(b.create_desktop(lifecycle, start)).id)

    def list(self, *, tags: Mapping[str, str] | None = None) -> list[DesktopResource]:
        """Every desktop (`default` first), or those carrying all of `tags`."""
        return self._client.send(b.list_desktops(tags))

    def get(self, desktop_id: str) -> DesktopResource:
        return self._client.send(b.get_desktop(desktop_id))

    def attach(self, desktop_id: str) -> DesktopClient:
        """A handle on an existing desktop (`default` is the `/v1/desktop` one)."""
        return DesktopClient.bind(self._client, desktop_id)

    def delete(self, desktop_id: str) -> None:
        self._client.send(b.delete_desktop(desktop_id))


class DesktopClient(Client):
    """Every method of `Client`, on one desktop; plus its lifecycle. As a context manager it deletes the
    desktop on exit."""

    id: str

    @classmethod
    def bind(cls, client: Client, desktop_id: str) -> DesktopClient:
        return _bind(cls, client, desktop_id)

    def info(self) -> DesktopResource:
        return self.send(b.get_desktop(self.id))

    def pause(self) -> DesktopResource:
        """Freeze every process of the desktop; its actions answer 409 `desktop_paused` until `resume`."""
        return self.send(b.desktop_lifecycle(self.id, "pause"))

    def resume(self) -> DesktopResource:
        return self.send(b.desktop_lifecycle(self.id, "resume"))

    def reset(self) -> DesktopResource:
        """Back to a freshly started state: apps gone, clipboard empty, HOME from its template."""
        return self.send(b.desktop_lifecycle(self.id, "reset"))

    def delete(self) -> None:
        self.send(b.delete_desktop(self.id))

    def token(self, role: str, *, ttl_seconds: int | None = None) -> TokenResponse:
        """A token for this desktop only: `view` (watch) or `control` (drive); a share link in `inspector_url`."""
        return self.send(b.desktop_token(self.id, role, ttl_seconds))

    def close(self) -> None:
        """Nothing: the connection pool is the client's."""

    def __enter__(self) -> DesktopClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.delete()


# -- asyncio --------------------------------------------------------------------------------------

class AsyncDesktops:
    """`client.desktops` of an `AsyncClient`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
                     idle_timeout_seconds: int | None = None, on_idle: str | None = None,
                     home_template: str | None = None, **start: Any) -> AsyncDesktopClient:
        """Create and start a desktop; `start` takes the start options in snake_case (width, height, dpi...)."""
        lifecycle = _lifecycle(tags, ttl_seconds, idle_timeout_seconds, on_idle, home_template)
        return self.attach((await self._client.send(b.create_desktop(lifecycle, start))).id)

    async def list(self, *, tags: Mapping[str, str] | None = None) -> list[DesktopResource]:
        """Every desktop (`default` first), or those carrying all of `tags`."""
        return await self._client.send(b.list_desktops(tags))

    async def get(self, desktop_id: str) -> DesktopResource:
        return await self._client.send(b.get_desktop(desktop_id))

    def attach(self, desktop_id: str) -> AsyncDesktopClient:
        """A handle on an existing desktop (`default` is the `/v1/desktop` one)."""
        return AsyncDesktopClient.bind(self._client, desktop_id)

    async def delete(self, desktop_id: str) -> None:
        await self._client.send(b.delete_desktop(desktop_id))


class AsyncDesktopClient(AsyncClient):
    """Every method of `AsyncClient`, on one desktop; plus its lifecycle. As an async context manager it
    deletes the desktop on exit."""

    id: str

    @classmethod
    def bind(cls, client: AsyncClient, desktop_id: str) -> AsyncDesktopClient:
        return _bind(cls, client, desktop_id)

    async def info(self) -> DesktopResource:
        return await self.send(b.get_desktop(self.id))

    async def pause(self) -> DesktopResource:
        """Freeze every process of the desktop; its actions answer 409 `desktop_paused` until `resume`."""
        return await self.send(b.desktop_lifecycle(self.id, "pause"))

    async def resume(self) -> DesktopResource:
        return await self.send(b.desktop_lifecycle(self.id, "resume"))

    async def reset(self) -> DesktopResource:
        """Back to a freshly started state: apps gone, clipboard empty, HOME from its template."""
        return await self.send(b.desktop_lifecycle(self.id, "reset"))

    async def delete(self) -> None:
        await self.send(b.delete_desktop(self.id))

    async def token(self, role: str, *, ttl_seconds: int | None = None) -> TokenResponse:
        """A token for this desktop only: `view` (watch) or `control` (drive); a share link in `inspector_url`."""
        return await self.send(b.desktop_token(self.id, role, ttl_seconds))

    async def aclose(self) -> None:
        """Nothing: the connection pool is the client's."""

    async def __aenter__(self) -> AsyncDesktopClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.delete()
