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
from typing import TypeVar

from sandbox_desktop_wire.desktops import DesktopResource, TokenResponse

from . import _base as b
from ._types import AudioCodec, OnIdle, Role, VideoCodec
from .async_client import AsyncClient
from .client import Client

H = TypeVar("H", "DesktopClient", "AsyncDesktopClient")


def _bind(cls: type[H], client: Client | AsyncClient, desktop_id: str) -> H:
    """A handle sharing `client`'s settings and connection pool (no `__init__`: no second pool)."""
    handle = cls.__new__(cls)
    handle.__dict__.update(client.__dict__)
    handle._desktop = handle.id = desktop_id
    return handle


# -- blocking -------------------------------------------------------------------------------------

class Desktops:
    """`client.desktops` of a `Client`: create, list, get and delete the server's desktops
    (docs/desktops.md). Errors as `Client`'s, plus those each method names."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
               idle_timeout_seconds: int | None = None, on_idle: OnIdle | None = None,
               home_template: str | None = None, width: int | None = None, height: int | None = None,
               dpi: int | None = None, display_num: int | None = None, state_dir: str | None = None,
               stream_video_codec: VideoCodec | None = None, stream_audio_codec: AudioCodec | None = None,
               stream_frame_rate: int | None = None, webrtc_port_range: str | None = None,
               recording_fps: int | None = None, max_width: int | None = None, max_height: int | None = None,
               approve: list[str] | None = None) -> DesktopClient:
        """`POST /v1/desktops`: create and start a desktop; returns a `DesktopClient` on it.

        `tags` label it (`list(tags=...)` finds it), `ttl_seconds` deletes it that long after creation,
        `idle_timeout_seconds` deletes it (or pauses it, `on_idle="pause"`) after that long unused,
        `home_template` is a directory copied into its HOME, `approve` the kinds of agent actions held for a
        person's approval (`pointer`, `type`, `key`, `launch`, `process`, `all`; docs/approvals.md; default the
        server's `--approve`); the other options are `Client.start`'s.
        Raises `ClientError` (429 `too_many_desktops` beyond the server's `--max-desktops`, 400/422
        for a value out of range) and `ServerError` as `start` does."""
        created = self._client.send(b.create_desktop(
            tags=tags, ttl_seconds=ttl_seconds, idle_timeout_seconds=idle_timeout_seconds, on_idle=on_idle,
            home_template=home_template, width=width, height=height, dpi=dpi, display_num=display_num,
            state_dir=state_dir, stream_video_codec=stream_video_codec, stream_audio_codec=stream_audio_codec,
            stream_frame_rate=stream_frame_rate, webrtc_port_range=webrtc_port_range, recording_fps=recording_fps,
            max_width=max_width, max_height=max_height, approve=approve))
        return self.attach(created.id)

    def list(self, *, tags: Mapping[str, str] | None = None) -> list[DesktopResource]:
        """`GET /v1/desktops`: every desktop (`default` first), or those carrying all of `tags`."""
        return self._client.send(b.list_desktops(tags))

    def get(self, desktop_id: str) -> DesktopResource:
        """`GET /v1/desktops/{id}`: one desktop (a deleted one too, with `state="deleted"` and
        `ended_reason`); `NotFoundError` (`desktop_not_found`) for an unknown id."""
        return self._client.send(b.get_desktop(desktop_id))

    def attach(self, desktop_id: str) -> DesktopClient:
        """A handle on an existing desktop, without a request (`default` is the `/v1/desktop` one): an
        unknown id fails on first use with `NotFoundError` (`desktop_not_found`)."""
        return DesktopClient.bind(self._client, desktop_id)

    def delete(self, desktop_id: str) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete a desktop; `ConflictError` (`desktop_is_default`)
        for `default`, `NotFoundError` for an unknown id."""
        self._client.send(b.delete_desktop(desktop_id))


class DesktopClient(Client):
    """Every method of `Client`, on one desktop (`/v1/desktops/{id}/...`), plus its lifecycle; `id` is its
    id. As a context manager it deletes the desktop on exit. It shares its client's connection pool:
    close the client. Its actions raise `NotFoundError` (`desktop_not_found`) once the desktop is gone
    and `ConflictError` (`desktop_paused`) while it is paused."""

    id: str

    @classmethod
    def bind(cls, client: Client, desktop_id: str) -> DesktopClient:
        """A handle on `desktop_id` sharing `client`'s settings and pool (`client.desktops.attach`)."""
        return _bind(cls, client, desktop_id)

    def info(self) -> DesktopResource:
        """`GET /v1/desktops/{id}`: this desktop's state, tags and lifecycle."""
        return self.send(b.get_desktop(self.id))

    def pause(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/pause`: freeze every process of the desktop, windows kept; its actions
        raise `ConflictError` (`desktop_paused`) until `resume`. Returns it."""
        return self.send(b.desktop_lifecycle(self.id, "pause"))

    def resume(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/resume`: thaw a paused desktop; returns it."""
        return self.send(b.desktop_lifecycle(self.id, "resume"))

    def reset(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/reset`: back to a freshly started state (apps gone, clipboard empty,
        HOME from its template); returns it."""
        return self.send(b.desktop_lifecycle(self.id, "reset"))

    def delete(self) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete this desktop (leaving its `with` block does)."""
        self.send(b.delete_desktop(self.id))

    def token(self, role: Role, *, ttl_seconds: int | None = None) -> TokenResponse:
        """`POST /v1/desktops/{id}/tokens`: a token for this desktop only, `view` (watch) or `control`
        (drive too), for `ttl_seconds` (default 3600); `inspector_url` is a share link to its live view."""
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
    """`client.desktops` of an `AsyncClient`: `Desktops` with coroutines (`attach` needs no await)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, *, tags: Mapping[str, str] | None = None, ttl_seconds: int | None = None,
                     idle_timeout_seconds: int | None = None, on_idle: OnIdle | None = None,
                     home_template: str | None = None, width: int | None = None, height: int | None = None,
                     dpi: int | None = None, display_num: int | None = None, state_dir: str | None = None,
                     stream_video_codec: VideoCodec | None = None, stream_audio_codec: AudioCodec | None = None,
                     stream_frame_rate: int | None = None, webrtc_port_range: str | None = None,
                     recording_fps: int | None = None, max_width: int | None = None,
                     max_height: int | None = None, approve: list[str] | None = None) -> AsyncDesktopClient:
        """`POST /v1/desktops`: create and start a desktop; returns an `AsyncDesktopClient` on it.
        The options and errors are `Desktops.create`'s."""
        created = await self._client.send(b.create_desktop(
            tags=tags, ttl_seconds=ttl_seconds, idle_timeout_seconds=idle_timeout_seconds, on_idle=on_idle,
            home_template=home_template, width=width, height=height, dpi=dpi, display_num=display_num,
            state_dir=state_dir, stream_video_codec=stream_video_codec, stream_audio_codec=stream_audio_codec,
            stream_frame_rate=stream_frame_rate, webrtc_port_range=webrtc_port_range, recording_fps=recording_fps,
            max_width=max_width, max_height=max_height, approve=approve))
        return self.attach(created.id)

    async def list(self, *, tags: Mapping[str, str] | None = None) -> list[DesktopResource]:
        """`GET /v1/desktops`: every desktop (`default` first), or those carrying all of `tags`."""
        return await self._client.send(b.list_desktops(tags))

    async def get(self, desktop_id: str) -> DesktopResource:
        """`GET /v1/desktops/{id}`: one desktop (a deleted one too, with `state="deleted"` and
        `ended_reason`); `NotFoundError` (`desktop_not_found`) for an unknown id."""
        return await self._client.send(b.get_desktop(desktop_id))

    def attach(self, desktop_id: str) -> AsyncDesktopClient:
        """A handle on an existing desktop, without a request (`default` is the `/v1/desktop` one): an
        unknown id fails on first use with `NotFoundError` (`desktop_not_found`)."""
        return AsyncDesktopClient.bind(self._client, desktop_id)

    async def delete(self, desktop_id: str) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete a desktop; `ConflictError` (`desktop_is_default`)
        for `default`, `NotFoundError` for an unknown id."""
        await self._client.send(b.delete_desktop(desktop_id))


class AsyncDesktopClient(AsyncClient):
    """Every method of `AsyncClient`, on one desktop, plus its lifecycle: `DesktopClient` with coroutines.
    As an async context manager it deletes the desktop on exit; close the client, not the handle."""

    id: str

    @classmethod
    def bind(cls, client: AsyncClient, desktop_id: str) -> AsyncDesktopClient:
        """A handle on `desktop_id` sharing `client`'s settings and pool (`client.desktops.attach`)."""
        return _bind(cls, client, desktop_id)

    async def info(self) -> DesktopResource:
        """`GET /v1/desktops/{id}`: this desktop's state, tags and lifecycle."""
        return await self.send(b.get_desktop(self.id))

    async def pause(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/pause`: freeze every process of the desktop, windows kept; its actions
        raise `ConflictError` (`desktop_paused`) until `resume`. Returns it."""
        return await self.send(b.desktop_lifecycle(self.id, "pause"))

    async def resume(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/resume`: thaw a paused desktop; returns it."""
        return await self.send(b.desktop_lifecycle(self.id, "resume"))

    async def reset(self) -> DesktopResource:
        """`POST /v1/desktops/{id}/reset`: back to a freshly started state (apps gone, clipboard empty,
        HOME from its template); returns it."""
        return await self.send(b.desktop_lifecycle(self.id, "reset"))

    async def delete(self) -> None:
        """`DELETE /v1/desktops/{id}`: stop and delete this desktop (leaving its `with` block does)."""
        await self.send(b.delete_desktop(self.id))

    async def token(self, role: Role, *, ttl_seconds: int | None = None) -> TokenResponse:
        """`POST /v1/desktops/{id}/tokens`: a token for this desktop only, `view` (watch) or `control`
        (drive too), for `ttl_seconds` (default 3600); `inspector_url` is a share link to its live view."""
        return await self.send(b.desktop_token(self.id, role, ttl_seconds))

    async def aclose(self) -> None:
        """Nothing: the connection pool is the client's."""

    async def __aenter__(self) -> AsyncDesktopClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.delete()
