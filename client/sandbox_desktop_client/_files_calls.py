"""The file API as `Call`s: the server's (`/v1/fs`, the admin's, on the machine) or a desktop's
(`/v1/desktop/fs`, scoped to `/v1/desktops/{id}/fs` on a handle: inside its sandbox, as its user, `~` its
HOME); docs/files.md. `where` is the prefix: the clients pass their own."""

from __future__ import annotations

import httpx

from sandbox_desktop_wire.fs import (
    FsActionResponse,
    FsEntry,
    FsEntryList,
    FsMoveResponse,
    FsStat,
    FsWriteResponse,
)

from ._base import Call, model, wire

SERVER_FILES = "/v1/fs"
DESKTOP_FILES = "/v1/desktop/fs"


def read_file(path: str, where: str) -> Call[bytes]:
    return Call("GET", f"{where}/file", lambda r: r.content, params={"path": path}, extra_timeout=60)


def write_file(path: str, data: bytes, where: str) -> Call[FsWriteResponse]:
    return Call("PUT", f"{where}/file", model(FsWriteResponse), params={"path": path}, content=data,
                extra_timeout=60)


def list_files(path: str | None, where: str) -> Call[list[FsEntry]]:
    return Call("GET", f"{where}/entries", _entries, params=wire(path=path))


def stat(path: str, where: str) -> Call[FsStat]:
    return Call("GET", f"{where}/stat", model(FsStat), params={"path": path})


def delete(path: str, recursive: bool, where: str) -> Call[FsActionResponse]:
    return Call("DELETE", f"{where}/entry", model(FsActionResponse),
                params=wire(path=path, recursive="true" if recursive else None))


def make_directory(path: str, where: str) -> Call[FsActionResponse]:
    return Call("POST", f"{where}/mkdir", model(FsActionResponse), params={"path": path})


def move(source: str, target: str, overwrite: bool, where: str) -> Call[FsMoveResponse]:
    return Call("POST", f"{where}/move", model(FsMoveResponse),
                json={"from": source, "to": target, **({"overwrite": True} if overwrite else {})})


def _entries(response: httpx.Response) -> list[FsEntry]:
    return FsEntryList.model_validate(response.json()).root
