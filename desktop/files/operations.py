"""The blocking part of every file operation: what touches the file system, and nothing else.

`Files` (filesystem.py) resolves paths and streams bodies; each of its operations runs one of these
functions where the files are: in a worker thread of the server (`/v1/fs`, the server's user on the
machine), or in a child of a desktop's sandbox's init, as the desktop's user in its view of the files
(calls.py). So they take and return plain values, and use the standard library, desktop/core/errors.py
and the wire's enums only: the sandbox's zygote imports this module (`python -I -S`, no site-packages).
Failures are DomainErrors a client can act on (404, 403, 409, 400), never a bare 500.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from desktop.core.errors import Conflict, InvalidRequest
from desktop.files.errors import lossy, map_os_error, os_errors
from desktop.files.move import move_across
from sandbox_desktop_wire.enums import FsEntryType


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


def _lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise map_os_error(exc, path) from exc


def _is_within(path: Path, ancestor: Path) -> bool:
    """Whether `path` is `ancestor` or inside it, after resolving symlinks."""
    p, a = os.path.realpath(path), os.path.realpath(ancestor)
    return p == a or p.startswith(a.rstrip("/") + "/")


# -- entries, stat, mkdir, delete, move ------------------------------------------------------------


def list_directory(directory: Path) -> list[Entry]:
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


def stat_path(path: Path) -> Entry:
    with os_errors(path):
        return describe(path)


def make_directory(path: Path) -> None:
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


def delete_path(path: Path, recursive: bool) -> None:
    with os_errors(path, write=True):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and os.path.samestat(st, os.stat("/")):
            raise InvalidRequest("refusing to delete the root directory /")
        _remove(path, st, recursive)


def move_path(source: Path, dest: Path, overwrite: bool) -> None:
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


# -- a staged write ----------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Staged:
    """A temporary file next to the file a write replaces, open for writing (`fd`, the caller's to close)."""

    final: Path
    """The file the write replaces: the target, or what a symlink there points to."""
    temp: Path
    fd: int


def stage(target: Path) -> Staged:
    """Make the temporary file of a write to `target`, with the permission bits the file will have."""
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
    with os_errors(final.parent, resource="directory", write=True):
        final.parent.mkdir(parents=True, exist_ok=True)
    with os_errors(final, write=True):
        fd, temp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".partial")
    try:
        with os_errors(final, write=True):
            os.fchmod(fd, stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_UMASK)
    except BaseException:
        os.close(fd)
        discard(Path(temp))
        raise
    return Staged(final, Path(temp), fd)


def commit(temp: Path, final: Path) -> None:
    """Rename the complete temporary file over the target: readers see the old or the new file, never half."""
    with os_errors(final, write=True):
        os.replace(temp, final)


def discard(temp: Path) -> None:
    """Drop the temporary file; the target is untouched."""
    with suppress(FileNotFoundError):
        os.unlink(temp)
