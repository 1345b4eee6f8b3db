"""`/v1/fs` (the server's) and `/v1/desktop/fs` (a desktop's, in its sandbox): the file API, translating HTTP to
`desktop.files.filesystem.Files` calls in the request's scope (api/server/file_scope.py).

File bodies are streamed both ways in chunks (never held whole in memory). Paths, fields and
response shapes are the reference's (`router.rs`, `router/types.rs`); see docs/files.md.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from api.http.desktop_paths import in_desktop
from api.http.file_response import FileStreamResponse
from api.http.operations import Operation
from api.server.file_scope import files_of
from desktop.core.errors import InvalidRequest, UnsupportedMediaType
from desktop.core.parsing import ascii_int
from desktop.files.errors import lossy
from desktop.files.operations import Entry
from sandbox_desktop_wire.fs import (
    FsActionResponse,
    FsDeleteQuery,
    FsEntriesQuery,
    FsEntry,
    FsEntryList,
    FsMoveRequest,
    FsMoveResponse,
    FsPathQuery,
    FsStat,
    FsUploadBatchQuery,
    FsUploadBatchResponse,
    FsWriteResponse,
)

TAR_MEDIA_TYPES = frozenset({
    "application/x-tar", "application/tar", "application/x-gtar", "application/gzip",
    "application/x-gzip", "application/x-compressed-tar",
})


def _entry(e: Entry) -> FsEntry:
    return FsEntry(name=e.name, path=e.path, entry_type=e.entry_type, size=e.size, modified=e.modified,
                   is_symlink=e.is_symlink or None)


def _content_length(request: Request) -> int | None:
    return ascii_int(request.headers.get("content-length"))


async def list_entries(request: Request, *, query: FsEntriesQuery) -> Response:
    entries = await files_of(request).entries(query.path)
    body = FsEntryList([_entry(e) for e in entries]).model_dump_json(by_alias=True, exclude_none=True)
    return Response(body, media_type="application/json")


async def read_file(request: Request, *, query: FsPathQuery) -> Response:
    return FileStreamResponse.ranged(await files_of(request).open(query.path), request.headers.get("range"))


async def write_file(request: Request, *, query: FsPathQuery) -> FsWriteResponse:
    try:
        result = await files_of(request).write(query.path, request.stream(), _content_length(request))
    except ClientDisconnect:
        raise InvalidRequest("upload interrupted: the client disconnected before the body ended; "
                             "the existing file was left unchanged") from None
    return FsWriteResponse(path=result.path, bytes_written=result.bytes_written)


async def delete_entry(request: Request, *, query: FsDeleteQuery) -> FsActionResponse:
    path = await files_of(request).delete(query.path, bool(query.recursive))
    return FsActionResponse(path=lossy(path))


async def make_directory(request: Request, *, query: FsPathQuery) -> FsActionResponse:
    return FsActionResponse(path=lossy(await files_of(request).mkdir(query.path)))


async def move(request: Request, *, body: FsMoveRequest) -> FsMoveResponse:
    source, dest = await files_of(request).move(body.from_, body.to, bool(body.overwrite))
    return FsMoveResponse.model_validate({"from": lossy(source), "to": lossy(dest)})


async def stat(request: Request, *, query: FsPathQuery) -> FsStat:
    e = await files_of(request).stat(query.path)
    return FsStat(path=e.path, entry_type=e.entry_type, size=e.size, modified=e.modified,
                  is_symlink=e.is_symlink or None)


async def upload_batch(request: Request, *, query: FsUploadBatchQuery) -> FsUploadBatchResponse:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in TAR_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"expected Content-Type: application/x-tar (or application/gzip), got {media_type or 'none'}"
        )
    try:
        result = await files_of(request).upload(query.path, request.stream())
    except ClientDisconnect:
        raise InvalidRequest("upload interrupted: the client disconnected before the body ended; "
                             "nothing was written") from None
    return FsUploadBatchResponse(paths=result.paths, truncated=result.truncated)


_TAGS = ("fs",)
SERVER_OPERATIONS = [
    Operation("GET", "/v1/fs/entries", list_entries, "List a directory (default: the home directory)",
              query=FsEntriesQuery, response=FsEntryList, errors=(403, 404), tags=_TAGS),
    Operation("GET", "/v1/fs/file", read_file, "Download a file (raw bytes, streamed; one byte range if asked)",
              query=FsPathQuery, media_type="application/octet-stream", ranges=True, errors=(403, 404, 416),
              tags=_TAGS),
    Operation("PUT", "/v1/fs/file", write_file, "Upload a file (raw body, streamed; replaces atomically)",
              query=FsPathQuery, response=FsWriteResponse, upload="application/octet-stream", errors=(403, 409, 413),
              tags=_TAGS),
    Operation("DELETE", "/v1/fs/entry", delete_entry, "Delete a file, link or directory",
              query=FsDeleteQuery, response=FsActionResponse, errors=(403, 404, 409), tags=_TAGS),
    Operation("POST", "/v1/fs/mkdir", make_directory, "Create a directory and its parents",
              query=FsPathQuery, response=FsActionResponse, errors=(403, 409), tags=_TAGS),
    Operation("POST", "/v1/fs/move", move, "Move or rename a file or directory",
              body=FsMoveRequest, body_required=True, response=FsMoveResponse, errors=(403, 404, 409),
              tags=_TAGS),
    Operation("GET", "/v1/fs/stat", stat, "Type, size and modification time of a path",
              query=FsPathQuery, response=FsStat, errors=(403, 404), tags=_TAGS),
    Operation("POST", "/v1/fs/upload-batch", upload_batch,
              "Extract a tar (optionally gzip) into a directory, all or nothing",
              query=FsUploadBatchQuery, response=FsUploadBatchResponse, upload="application/x-tar, application/gzip",
              errors=(403, 409, 413, 415), tags=_TAGS),
]
OPERATIONS = [*SERVER_OPERATIONS, *in_desktop(SERVER_OPERATIONS, "/v1/fs", "/v1/desktop/fs")]
"""The server's, and each desktop's in its sandbox (api/server/file_scope.py)."""
