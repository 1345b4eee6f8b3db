"""Wire models of the file API `/v1/fs/*` (names and fields as in the reference's router/types.rs)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, RootModel

from sandbox_desktop_wire.base import QueryModel, WireModel
from sandbox_desktop_wire.enums import FsEntryType


def path_problem(raw: str) -> str | None:
    """Why `raw` is not an acceptable path (empty, NUL byte, `..` in a relative path), or None."""
    if raw == "":
        return "must not be empty"
    if "\x00" in raw:
        return "must not contain NUL bytes"
    if not raw.startswith("/") and ".." in raw.split("/"):
        return "'..' is not allowed in a relative path; use an absolute path"
    return None


def _check_path(value: str) -> str:
    problem = path_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


FsPath = Annotated[str, AfterValidator(_check_path)]
"""Absolute, `~` / `~/...`, or relative to the server user's home; not empty, no NUL, no `..` if relative."""


class FsPathQuery(QueryModel):
    path: FsPath = Field(description="File or directory path")


class FsEntriesQuery(QueryModel):
    path: FsPath | None = Field(default=None, description="Directory to list (default: the home directory)")


class FsDeleteQuery(QueryModel):
    path: FsPath = Field(description="File or directory path")
    recursive: bool | None = Field(default=None, description="Delete a non-empty directory with its contents")


class FsUploadBatchQuery(QueryModel):
    path: FsPath | None = Field(default=None, description="Directory to extract into, created if missing "
                                "(default: the home directory)")


class FsEntry(WireModel):
    name: str
    path: str
    entry_type: FsEntryType = Field(description="What the path is, following symlinks")
    size: int
    modified: str | None = Field(default=None, description="Last modification, RFC 3339 UTC")
    is_symlink: bool | None = Field(default=None, description="Present (true) when the path itself is a "
                                    "symbolic link (extension; not in the reference)")


class FsEntryList(RootModel[list[FsEntry]]):
    """The entries of a directory, sorted by name."""


class FsStat(WireModel):
    path: str
    entry_type: FsEntryType
    size: int
    modified: str | None = None
    is_symlink: bool | None = None


class FsWriteResponse(WireModel):
    path: str
    bytes_written: int


class FsMoveRequest(WireModel):
    from_: FsPath = Field(alias="from", description="Existing path")
    to: FsPath = Field(description="New path; missing parents are created")
    overwrite: bool | None = Field(default=None, description="Replace an existing `to` (default: 409 if it exists)")


class FsMoveResponse(WireModel):
    from_: str = Field(alias="from")
    to: str


class FsActionResponse(WireModel):
    path: str


class FsUploadBatchResponse(WireModel):
    paths: list[str] = Field(description="Extracted paths in archive order, at most 1024")
    truncated: bool = Field(description="More paths were extracted than listed")
