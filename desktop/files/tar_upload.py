"""Batch upload: extract a tar archive (plain, gzip, bzip2 or xz) into a directory, all or nothing.

Every member is checked before anything is written: only regular files and directories whose
normalised path stays inside the target are accepted, so links, devices, FIFOs, absolute paths
and `..` make the whole request a 400 naming the member. Files are then extracted into a staging
directory inside the target and renamed into place only when all of them have been read.

Standard library and desktop/core/errors.py only, like operations.py: a desktop's uploads are extracted in
its sandbox, as its user (calls.py); `Files.upload` (filesystem.py) spools the body and calls `extract`.
"""

from __future__ import annotations

# tarfile imports the decompressors when it first needs them; in a sandbox the interpreter's own files may not be
# readable by then (its user's), so they are imported with this module, which the zygote preloads (calls.py).
import bz2  # noqa: F401
import gzip  # noqa: F401
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from desktop.core.errors import InvalidRequest
from desktop.files.errors import lossy, map_os_error, os_errors

MAX_MEMBERS = 50_000
"""Members per archive; bounds the memory the header list takes."""
MAX_LISTED_PATHS = 1024
"""The response lists at most this many paths and then sets `truncated`, as the reference does."""
_COPY_CHUNK = 1024 * 1024
# What reading a damaged or truncated archive can raise (gzip and bz2 report through OSError).
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


@dataclass(frozen=True)
class UploadResult:
    paths: list[str]
    truncated: bool


@dataclass(frozen=True)
class Member:
    """An accepted archive member: its header and its normalised path below the target."""

    info: tarfile.TarInfo
    parts: tuple[str, ...]

    @property
    def is_dir(self) -> bool:
        return self.info.isdir()


def _reject(info: tarfile.TarInfo, why: str) -> InvalidRequest:
    name = lossy(info.name)
    return InvalidRequest(lossy(f"tar member {name!r} {why}; nothing was written"), member=name)


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return "is a symbolic link"
    if info.islnk():
        return "is a hard link"
    if info.ischr() or info.isblk():
        return "is a device"
    if info.isfifo():
        return "is a FIFO"
    return f"has unsupported type {info.type!r}"


def member_parts(info: tarfile.TarInfo) -> tuple[str, ...]:
    """The member's path components below the target, or a 400 if it would land outside."""
    name = info.name
    if "\x00" in name:
        raise _reject(info, "contains a NUL byte")
    if name.startswith("/"):
        raise _reject(info, "has an absolute path; archive members must be relative")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise _reject(info, "contains '..' and would land outside the target directory")
    return parts


def plan(tar: tarfile.TarFile) -> list[Member]:
    """Read every header and validate it; nothing is written here."""
    members: list[Member] = []
    is_dir: dict[tuple[str, ...], bool] = {}  # every path the archive needs, file or directory
    for info in tar:
        if len(members) >= MAX_MEMBERS:
            raise InvalidRequest(f"the archive has more than {MAX_MEMBERS} members; split it up")
        parts = member_parts(info)
        if not parts:
            continue  # "./": the target itself
        if not (info.isreg() or info.isdir()):
            raise _reject(info, f"{_kind(info)}; only regular files and directories are accepted")
        for depth in range(1, len(parts)):
            if is_dir.setdefault(parts[:depth], True) is False:
                raise _reject(info, f"needs {'/'.join(parts[:depth])!r} to be a directory, "
                                    "but the archive also has it as a file")
        if is_dir.setdefault(parts, info.isdir()) != info.isdir():
            raise _reject(info, "appears both as a file and as a directory")
        members.append(Member(info, parts))
    return members


def check_destination(base: Path, members: list[Member]) -> None:
    """Refuse members that would write through a symlink or replace a directory by a file (or back)."""
    try:
        if not stat.S_ISDIR(os.stat(base).st_mode):
            raise InvalidRequest(f"{base} exists and is not a directory; choose a directory to extract into")
    except FileNotFoundError:
        return  # nothing exists below a missing target
    except OSError as exc:
        raise map_os_error(exc, base, resource="directory") from exc
    checked: dict[tuple[str, ...], os.stat_result | None] = {}
    for member in members:
        for depth in range(1, len(member.parts) + 1):
            sub = member.parts[:depth]
            if sub not in checked:
                try:
                    checked[sub] = os.lstat(base.joinpath(*sub))
                except FileNotFoundError:
                    checked[sub] = None
                except OSError as exc:
                    raise map_os_error(exc, base.joinpath(*sub)) from exc
            st = checked[sub]
            if st is None:
                break
            path = base.joinpath(*sub)
            leaf_file = depth == len(member.parts) and not member.is_dir
            if stat.S_ISLNK(st.st_mode) and not leaf_file:
                raise _reject(member.info, f"would be written through the symbolic link {path}")
            if leaf_file and stat.S_ISDIR(st.st_mode):
                raise _reject(member.info, f"would replace the directory {path}")
            if not leaf_file and not stat.S_ISDIR(st.st_mode):
                raise _reject(member.info, f"needs {path} to be a directory, but it is a file")


def _make_dirs(path: Path) -> list[Path]:
    """`mkdir -p`, returning the directories it created (outermost first) so they can be undone."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with os_errors(directory, resource="directory", write=True):
            directory.mkdir(exist_ok=True)
    return list(reversed(missing))


def _stage(tar: tarfile.TarFile, member: Member, temp: Path) -> None:
    source = tar.extractfile(member.info)
    if source is None:
        raise _reject(member.info, "has no data")
    with os_errors(temp, write=True), open(temp, "xb") as out:
        while True:
            try:
                block = source.read(_COPY_CHUNK)
            except _READ_ERRORS as exc:
                raise _reject(member.info, f"could not be read, the archive is damaged ({exc})") from exc
            if not block:
                break
            out.write(block)
    # Like tarfile's data filter: no setuid/setgid/sticky or group/other write bits; owner can rw.
    with os_errors(temp, write=True):
        os.chmod(temp, (member.info.mode & 0o755) | 0o600)
        with suppress(OverflowError, ValueError):  # a nonsensical header timestamp: keep today's
            os.utime(temp, (member.info.mtime, member.info.mtime))


def extract(archive: BinaryIO, base: Path) -> UploadResult:
    """Validate the whole archive, then extract it into `base` (created if missing)."""
    archive.seek(0)
    try:
        tar = tarfile.open(fileobj=archive, mode="r:*")  # noqa: SIM115 (closed by the `with` below)
    except _READ_ERRORS as exc:
        raise InvalidRequest(f"the body is not a tar archive (plain, gzip, bzip2 or xz): {exc}") from exc
    with tar:
        try:
            members = plan(tar)
        except _READ_ERRORS as exc:
            raise InvalidRequest(f"the archive is damaged: {exc}; nothing was written") from exc
        check_destination(base, members)
        created = _make_dirs(base)
        try:
            _extract_members(tar, base, members)
        except BaseException:
            for directory in reversed(created):
                shutil.rmtree(directory, ignore_errors=True)
            raise
    paths = [lossy(base.joinpath(*m.parts)) for m in members]
    return UploadResult(paths[:MAX_LISTED_PATHS], len(paths) > MAX_LISTED_PATHS)


def _extract_members(tar: tarfile.TarFile, base: Path, members: list[Member]) -> None:
    with os_errors(base, resource="directory", write=True):
        staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=base))
    try:
        staged = []
        for index, member in enumerate(members):
            if not member.is_dir:
                temp = staging / str(index)
                _stage(tar, member, temp)
                staged.append((temp, member))
        # Every byte is on disk; only renames on one file system are left.
        for member in members:
            if member.is_dir:
                path = base.joinpath(*member.parts)
                with os_errors(path, resource="directory", write=True):
                    path.mkdir(parents=True, exist_ok=True)
        for temp, member in staged:
            dest = base.joinpath(*member.parts)
            with os_errors(dest, write=True):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temp, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
