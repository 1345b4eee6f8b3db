"""The file API: list, stat, read, write, move and delete paths, and extract tar archives, where a `Place` says.

Paths are absolute, `~` / `~/...` (the home), or relative to that home, as in the reference. `Files` resolves
them and streams bodies; the blocking part of each operation is one call (calls.py) that its place runs:

- `Machine`: the server's own files, as its user, in a worker thread (`/v1/fs`);
- `InSandbox`: a desktop's, in its sandbox as its user, in its view of the files (`/v1/desktops/{id}/fs`):
  each call in a child of the sandbox's init, and a read's file opened there (`Sandbox.open`); bytes move
  through descriptors opened as that user, never through the init.

Failures are DomainErrors a client can act on (404, 403, 409, 400), never a bare 500.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeVar

import anyio
import anyio.to_thread

from desktop.core.errors import InvalidRequest, StreamError
from desktop.files import calls
from desktop.files.errors import lossy, os_errors
from desktop.files.operations import Entry
from desktop.files.tar_upload import UploadResult
from sandbox_desktop_wire.enums import FsEntryType
from sandbox_desktop_wire.fs import path_problem

if TYPE_CHECKING:
    from desktop.sandbox.sandbox import Sandbox

READ_CHUNK = 256 * 1024
"""Bytes per read when a file is streamed out."""
WRITE_BATCH = 1024 * 1024
"""Incoming chunks are gathered up to this size before one worker-thread write (bounds memory)."""

T = TypeVar("T")


async def run_blocking(fn: Callable[..., T], *args: object) -> T:
    """Run `fn` in a worker thread. On cancellation anyio waits for the thread to return, so a
    descriptor is never closed while a thread still uses it."""
    return await anyio.to_thread.run_sync(fn, *args)


@dataclass(frozen=True)
class WriteResult:
    path: str
    bytes_written: int


class ReadHandle:
    """An open regular file being streamed out; it owns the descriptor until `close()`."""

    def __init__(self, file: BinaryIO, path: Path, size: int, modified_ns: int) -> None:
        self._file = file
        self.path = path
        self.size = size
        """Bytes that will be sent: the size when opened (a file growing meanwhile is cut there)."""
        self.modified_ns = modified_ns

    def narrow(self, first: int, last: int) -> None:
        """Send only bytes `first` to `last` (inclusive; a Range request's). A seek reads nothing: fine anywhere."""
        self._file.seek(first)
        self.size = last - first + 1

    async def chunks(self, chunk_size: int = READ_CHUNK) -> AsyncIterator[bytes]:
        """The file's bytes, at most `size` of them, read in a worker thread chunk by chunk."""
        remaining = self.size
        while remaining > 0:
            chunk = await run_blocking(self._file.read, min(chunk_size, remaining))
            if not chunk:
                return  # the file shrank: the response ends short and the server drops the connection
            remaining -= len(chunk)
            yield chunk

    def close(self) -> None:
        # Synchronous on purpose: it must also run while the request is being cancelled.
        self._file.close()


def _read_handle(fd: int, path: Path) -> ReadHandle:
    """A handle of `fd`, opened non-blocking (a FIFO must not hang the open), once it is seen to be a regular file;
    `fd` is closed if it is not."""
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InvalidRequest(f"{path} is a directory; list it with GET /v1/fs/entries")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidRequest(f"{path} is not a regular file (a device, FIFO or socket)")
        os.set_blocking(fd, True)
        return ReadHandle(os.fdopen(fd, "rb", buffering=0), path, st.st_size, st.st_mtime_ns)
    except BaseException:
        os.close(fd)
        raise


async def copy_chunks(chunks: AsyncIterable[bytes], write: Callable[[list[bytes]], object]) -> int:
    """Feed an async byte stream to a blocking `write(parts)` in batches; returns the byte count."""
    batch: list[bytes] = []
    batched = total = 0
    async for chunk in chunks:
        if not chunk:
            continue
        batch.append(chunk)
        batched += len(chunk)
        if batched >= WRITE_BATCH:
            await run_blocking(write, batch)
            total += batched
            batch, batched = [], 0
    if batch:
        await run_blocking(write, batch)
        total += batched
    return total


# -- where the files are ----------------------------------------------------------------------------


class Place(Protocol):
    """Where the blocking part of a file operation runs, and as whom."""

    async def call(self, asked: dict[str, Any], fds: Sequence[int] = ()) -> calls.Answer:
        """Run one call (calls.py `serve`): its answer, and the descriptors it opened (the caller's now)."""
        ...

    async def open(self, path: Path, flags: int) -> int:
        """A descriptor of `path`; OSError as os.open raises it."""
        ...


class Machine:
    """The server's own files, as the server's user."""

    async def call(self, asked: dict[str, Any], fds: Sequence[int] = ()) -> calls.Answer:
        return await run_blocking(calls.serve, asked, list(fds))

    async def open(self, path: Path, flags: int) -> int:
        return await run_blocking(os.open, path, flags | os.O_CLOEXEC)


class InSandbox:
    """A desktop's files, as its sandbox's user sees them and may touch them."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def call(self, asked: dict[str, Any], fds: Sequence[int] = ()) -> calls.Answer:
        try:
            return await self.sandbox.call(calls.ENTRY, asked, fds)
        except OSError as exc:  # the call could not run there (no fork, a bug): about no path of the request
            raise StreamError(f"the desktop's sandbox could not run the file call: {exc}") from exc

    async def open(self, path: Path, flags: int) -> int:
        return await self.sandbox.open(str(path), flags)


MACHINE = Machine()


class Files:
    """The file operations in one place, rooted at a home for `~` and relative paths."""

    def __init__(self, home: Path | str | None = None, place: Place = MACHINE) -> None:
        self._home = Path(home) if home is not None else None
        self.place = place

    def home(self) -> Path:
        """The home directory (read at each call when not fixed, so `$HOME` changes are seen)."""
        return self._home if self._home is not None else Path(os.path.expanduser("~"))

    def resolve(self, raw: str, field: str = "path") -> Path:
        """The absolute path for `raw`; `~`, `~/x` and relative paths resolve from the home."""
        problem = path_problem(raw)
        if problem is not None:
            raise InvalidRequest(f"invalid {field} {raw!r}: {problem}", field=field)
        if raw.startswith("/"):
            return Path(raw)
        rest = "" if raw == "~" else raw[2:] if raw.startswith("~/") else raw
        return self.home().joinpath(*(part for part in rest.split("/") if part not in ("", ".")))

    async def _call(self, name: str, *args: object, fds: Sequence[int] = ()) -> calls.Answer:
        value, received = await self.place.call(calls.request(name, *args), fds)
        try:
            return calls.answer(value), received
        except BaseException:
            for fd in received:
                os.close(fd)
            raise

    async def entries(self, raw: str | None) -> list[Entry]:
        """The directory's entries sorted by name (default: the home directory)."""
        value, _ = await self._call("entries", self.resolve(raw if raw is not None else "."))
        return calls.entries_of(value)

    async def stat(self, raw: str) -> Entry:
        value, _ = await self._call("stat", self.resolve(raw))
        return calls.entry_of(value.get("entry"))

    async def kind(self, path: Path) -> FsEntryType | None:
        """What `path` is in this place (following links), None when it does not exist there (a dangling
        link included)."""
        value, _ = await self._call("kind", path)
        return calls.kind_of(value)

    async def open(self, raw: str) -> ReadHandle:
        """Open a regular file for streaming; the caller must `close()` the handle."""
        path = self.resolve(raw)
        with os_errors(path):
            fd = await self.place.open(path, os.O_RDONLY | os.O_NONBLOCK)
        return await run_blocking(_read_handle, fd, path)

    async def write(
        self, raw: str, chunks: AsyncIterable[bytes], expected_size: int | None = None
    ) -> WriteResult:
        """Stream `chunks` into a temporary file beside the target, renamed over it once complete: on any
        failure the old file stays as it was."""
        target = self.resolve(raw)
        staged = calls.staged_of(*await self._call("stage", target))
        file: BinaryIO = os.fdopen(staged.fd, "wb")
        try:
            written = await copy_chunks(chunks, lambda parts: _write(file, staged.final, parts))
            if expected_size is not None and written != expected_size:
                raise InvalidRequest(
                    f"body ended after {written} of {expected_size} bytes; {target} was left unchanged"
                )
            await run_blocking(_flush, file, staged.final)
            await self._call("commit", staged.temp, staged.final)
        except BaseException:
            file.close()
            with anyio.CancelScope(shield=True), suppress(Exception):  # runs while the request is cancelled too
                await self._call("discard", staged.temp)
            raise
        return WriteResult(lossy(target), written)

    async def mkdir(self, raw: str) -> Path:
        """Create the directory and any missing parents (fine if it already exists)."""
        path = self.resolve(raw)
        await self._call("mkdir", path)
        return path

    async def move(self, source: str, dest: str, overwrite: bool = False) -> tuple[Path, Path]:
        """Rename `source` to `dest` (creating dest's parents); 409 if dest exists unless `overwrite`."""
        src, dst = self.resolve(source, "from"), self.resolve(dest, "to")
        await self._call("move", src, dst, overwrite)
        return src, dst

    async def delete(self, raw: str, recursive: bool = False) -> Path:
        """Delete a file, link or empty directory; a non-empty directory needs `recursive`."""
        path = self.resolve(raw)
        await self._call("delete", path, recursive)
        return path

    async def upload(self, raw: str | None, chunks: AsyncIterable[bytes]) -> UploadResult:
        """Spool a tar body to a temporary file of the server, then validate and extract it into the directory
        (tar_upload.py), all or nothing."""
        base = self.resolve(raw if raw is not None else ".")
        spool: BinaryIO = await run_blocking(tempfile.TemporaryFile)
        try:
            size = await copy_chunks(chunks, spool.writelines)
            if size == 0:
                raise InvalidRequest("the request body is empty; send a tar archive")
            await run_blocking(spool.flush)
            value, _ = await self._call("extract", base, fds=[spool.fileno()])
            return calls.upload_of(value)
        finally:
            spool.close()


def _write(file: BinaryIO, final: Path, parts: list[bytes]) -> None:
    with os_errors(final, write=True):
        file.writelines(parts)


def _flush(file: BinaryIO, final: Path) -> None:
    """Everything on disk before the rename, so that the new file is whole even after a crash."""
    with os_errors(final, write=True):
        file.flush()
        os.fsync(file.fileno())
        file.close()
