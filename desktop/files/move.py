"""A move to another file system, where a rename cannot do it: copy, then delete the source.

The copy goes to a hidden staging name beside the destination and is renamed into place only once
complete, so a failed move (a FIFO in the tree, no space left) leaves the destination as it was and
answers the error of the first file that failed (docs/files.md).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from contextlib import suppress
from pathlib import Path

from desktop.files.errors import map_os_error, os_errors


def move_across(source: Path, dest: Path) -> None:
    """Move `source` to `dest` on another file system (`dest`, if any, is a file to replace)."""
    staging = dest.parent / f".moving-{secrets.token_hex(6)}"
    failures: list[tuple[OSError, str]] = []  # with the source file each is about

    def copy(src: str, dst: str) -> object:
        try:
            if not stat.S_ISREG(os.lstat(src).st_mode):  # a FIFO would block the copy, /dev/zero never end it
                raise shutil.SpecialFileError(f"{src} is not a regular file")
            return shutil.copy2(src, dst)
        except OSError as exc:  # copytree would fold it into one shutil.Error, errno lost
            failures.append((exc, src))
            raise

    try:
        st = os.lstat(source)
        if stat.S_ISDIR(st.st_mode):
            shutil.copytree(source, staging, symlinks=True, copy_function=copy)
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(source), staging)
        else:
            copy(str(source), str(staging))
        os.replace(staging, dest)
    except OSError as exc:
        _discard(staging)
        first, about = failures[0] if failures else (exc, str(source))
        raise map_os_error(first, _named(first, about, staging, dest), write=True) from exc
    with os_errors(source, write=True):
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(source)
        else:
            os.unlink(source)


def _named(exc: OSError, about: str, staging: Path, dest: Path) -> str:
    """The path the error is about, with the staging name shown as the destination it stands for."""
    name = os.fsdecode(exc.filename) if exc.filename is not None else about
    if name == str(staging) or name.startswith(f"{staging}/"):
        return str(dest) + name[len(str(staging)):]
    return name


def _discard(staging: Path) -> None:
    with suppress(OSError):
        if os.path.isdir(staging) and not os.path.islink(staging):
            shutil.rmtree(staging)
        else:
            os.unlink(staging)
