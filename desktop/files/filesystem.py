"""The file API: list, stat, read, write, move and delete paths on the server's own file system.

Paths are absolute, `~` / `~/...` (the server user's home), or relative to that home, as in the
reference. Every blocking call runs in a worker thread; failures are DomainErrors a client can
act on (404, 403, 409, 400), never a bare 500.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TypeVar

import anyio.to_thread

from desktop.core.errors import Conflict, InvalidRequest
from desktop.files.errors import lossy, map_os_error, os_errors
from desktop.files.move import move_across
from sandbox_desktop_wire.enums import FsEntryType
from sandbox_desktop_wire.fs import path_problem

READ_CHUNK = 256 * 1024
"""Bytes per read when a file is streamed out."""
WRITE_BATCH = 1024 * 1024
"""Incoming chunks are gathered up to this size before one worker-thread write (bounds memory)."""

T = TypeVar("T")


async def run_blocking(fn: Callable[..., T], *args: object) -> T:
    """Run `fn` in a worker thread. On cancellation anyio waits for the thread to return, so a
    descriptor is never closed while a thread still uses it."""
    return await anyio.to_thread.run_sync(fn, *args)


def rfc3339(ns: int) -> str | None:
    """A UTC timestamp as the reference prints it (chrono `to_rfc3339`: 0, 3, 6 or 9 digits)."""
    secs, frac = divmod(ns, 1_000_000_000)
    try:
        text = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return None  # outside what a datetime can hold: the field is omitted
    if frac % 1_000_000 == 0:
        digits = f".{frac // 1_000_000:03d}" if frac else ""
    elif frac % 1000 == 0:
        digits = f".{frac // 1000:06d}"
    else:
        digits = f".{frac:09d}"
    return f"{text}{digits}+00:00"


@dataclass(frozen=True)
class Entry:
    """One path as the entries and stat endpoints describe it (symlinks are followed, as in the
    reference; `is_symlink` says the path itself is a link)."""

    name: str
    path: str
    entry_type: FsEntryType
    size: int
    modified: str | None
    is_symlink: bool = False


def describe(path: Path, name: str | None = None) -> Entry:
    """Stat `path` (following a symlink; a dangling link is described as itself)."""
    st = os.lstat(path)
    is_link = stat.S_ISLNK(st.st_mode)
    if is_link:
        with suppress(OSError):
            st = os.stat(path)
    return Entry(
        name=lossy(path.name if name is None else name),
        path=lossy(path),
        entry_type=FsEntryType.DIRECTORY if stat.S_ISDIR(st.st_mode) else FsEntryType.FILE,
        size=st.st_size,
        modified=rfc3339(st.st_mtime_ns),
        is_symlink=is_link,
    )


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


def _open_for_read(path: Path) -> ReadHandle:
    # O_NONBLOCK so that opening a FIFO does not hang; the type is checked on the open descriptor.
    with os_errors(path):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
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


def _umask() -> int:
    # Read, not set: os.umask() would briefly change it for every thread in the process.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


_UMASK = _umask()


class StagedFile:
    """A temporary file next to its target, renamed over it only once complete (atomic replace)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        final = target
        existing = _lstat_or_none(target)
        if existing is not None and stat.S_ISLNK(existing.st_mode):
            # Write through the link, as a plain write would, instead of replacing the link itself.
            final = Path(os.path.realpath(target))
            existing = _lstat_or_none(final)
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise InvalidRequest(f"{target} is a directory; choose a file path inside it")
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            raise InvalidRequest(f"{target} is not a regular file (a device, FIFO or socket)")
        self.final = final
        with os_errors(final.parent, resource="directory", write=True):
            final.parent.mkdir(parents=True, exist_ok=True)
        with os_errors(final, write=True):
            fd, temp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".partial")
        self.temp = Path(temp)
        self.file: BinaryIO = os.fdopen(fd, "wb")
        try:
            with os_errors(final, write=True):
                os.fchmod(fd, stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_UMASK)
        except BaseException:
            self.discard()
            raise

    def write(self, parts: list[bytes]) -> None:
        with os_errors(self.final, write=True):
            self.file.writelines(parts)

    def commit(self) -> None:
        """Flush to disk and rename over the target: readers see the old or the new file, never half."""
        with os_errors(self.final, write=True):
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temp, self.final)

    def discard(self) -> None:
        """Drop the temporary file; the target is untouched. Synchronous: runs during cancellation."""
        self.file.close()
        with suppress(FileNotFoundError):
            self.temp.unlink()


def _lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise map_os_error(exc, path) from exc


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


def _is_within(path: Path, ancestor: Path) -> bool:
    """Whether `path` is `ancestor` or inside it, after resolving symlinks."""
    p, a = os.path.realpath(path), os.path.realpath(ancestor)
    return p == a or p.startswith(a.rstrip("/") + "/")


def _list(directory: Path) -> list[Entry]:
    with os_errors(directory, resource="directory"):
        if not stat.S_ISDIR(os.stat(directory).st_mode):
            raise InvalidRequest(f"{directory} is a file, not a directory; read it with GET /v1/fs/file")
        with os.scandir(directory) as it:
            names = [entry.name for entry in it]
    entries = []
    for name in names:
        try:
            entries.append(describe(directory / name, name))
        except FileNotFoundError:
            continue  # removed while we were listing
        except OSError as exc:
            raise map_os_error(exc, directory / name) from exc
    entries.sort(key=lambda e: e.name)
    return entries


def _stat(path: Path) -> Entry:
    with os_errors(path):
        return describe(path)


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise Conflict(f"{path} exists and is not a directory") from None
    except OSError as exc:
        raise map_os_error(exc, path, resource="directory", write=True) from exc


def _remove(path: Path, st: os.stat_result, recursive: bool) -> None:
    if stat.S_ISDIR(st.st_mode):
        if recursive:
            shutil.rmtree(path)
        else:
            os.rmdir(path)
    else:
        os.unlink(path)  # a symlink is removed itself, never what it points to


def _delete(path: Path, recursive: bool) -> None:
    with os_errors(path, write=True):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and os.path.samestat(st, os.stat("/")):
            raise InvalidRequest("refusing to delete the root directory /")
        _remove(path, st, recursive)


def _move(source: Path, dest: Path, overwrite: bool) -> None:
    with os_errors(source):
        src_st = os.lstat(source)
    dst_st = _lstat_or_none(dest)
    if dst_st is not None and os.path.samestat(src_st, dst_st):
        return  # same file under both names: nothing to do (and nothing may be deleted)
    if stat.S_ISDIR(src_st.st_mode) and _is_within(dest, source):
        raise InvalidRequest(f"cannot move directory {source} into itself ({dest})")
    if dst_st is not None:
        if not overwrite:
            raise Conflict(f"{dest} already exists; pass overwrite=true to replace it")
        if _is_within(source, dest):
            raise InvalidRequest(f"cannot replace {dest}: it contains the source {source}")
        # File over file is left to the rename below, which replaces atomically.
        if stat.S_ISDIR(dst_st.st_mode) or stat.S_ISDIR(src_st.st_mode):
            with os_errors(dest, write=True):
                _remove(dest, dst_st, recursive=True)
    with os_errors(dest.parent, resource="directory", write=True):
        dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise map_os_error(exc, source, write=True) from exc
        move_across(source, dest)  # another file system: copy, then delete the source


class Files:
    """The file operations, rooted at the server user's home for `~` and relative paths."""

    def __init__(self, home: Path | str | None = None) -> None:
        self._home = Path(home) if home is not None else None

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

    async def entries(self, raw: str | None) -> list[Entry]:
        """The directory's entries sorted by name (default: the home directory)."""
        return await run_blocking(_list, self.resolve(raw if raw is not None else "."))

    async def stat(self, raw: str) -> Entry:
        return await run_blocking(_stat, self.resolve(raw))

    async def open(self, raw: str) -> ReadHandle:
        """Open a regular file for streaming; the caller must `close()` the handle."""
        return await run_blocking(_open_for_read, self.resolve(raw))

    async def write(
        self, raw: str, chunks: AsyncIterable[bytes], expected_size: int | None = None
    ) -> WriteResult:
        """Stream `chunks` into the file atomically: on any failure the old file stays as it was."""
        target = self.resolve(raw)
        staged = await run_blocking(StagedFile, target)
        try:
            written = await copy_chunks(chunks, staged.write)
            if expected_size is not None and written != expected_size:
                raise InvalidRequest(
                    f"body ended after {written} of {expected_size} bytes; {target} was left unchanged"
                )
            await run_blocking(staged.commit)
        except BaseException:
            staged.discard()
            raise
        return WriteResult(lossy(target), written)

    async def mkdir(self, raw: str) -> Path:
        """Create the directory and any missing parents (fine if it already exists)."""
        path = self.resolve(raw)
        await run_blocking(_mkdir, path)
        return path

    async def move(self, source: str, dest: str, overwrite: bool = False) -> tuple[Path, Path]:
        """Rename `source` to `dest` (creating dest's parents); 409 if dest exists unless `overwrite`."""
        src, dst = self.resolve(source, "from"), self.resolve(dest, "to")
        await run_blocking(_move, src, dst, overwrite)
        return src, dst

    async def delete(self, raw: str, recursive: bool = False) -> Path:
        """Delete a file, link or empty directory; a non-empty directory needs `recursive`."""
        path = self.resolve(raw)
        await run_blocking(_delete, path, recursive)
        return path
