"""Translating OSErrors into the DomainErrors a client can act on, and paths fit for JSON."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from desktop.core.errors import (
    Conflict,
    DomainError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    StreamError,
)


def lossy(text: str | os.PathLike[str]) -> str:
    """A file name fit for JSON: undecodable bytes (kept as surrogates by Python) become U+FFFD."""
    text = os.fspath(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def map_os_error(
    exc: OSError, path: Path | str, *, resource: str = "file", write: bool = False
) -> DomainError:
    """Translate an OSError about `path` into the error a client should see."""
    p = lossy(path)
    reason = exc.strerror or str(exc)
    code = exc.errno
    if code == errno.ENOENT:
        return NotFound(resource, p)
    if code == errno.ENOTDIR:
        if write:
            return Conflict(f"cannot write {p}: one of its parents is a file, not a directory")
        return NotFound(resource, p, f"{resource} {p} not found: one of its parents is not a directory")
    if code in (errno.EACCES, errno.EPERM):
        # The server's user for /v1/fs, a desktop's in its sandbox for its own routes (docs/files.md).
        return PermissionDenied(f"permission denied for {p}: the user the request acts as may not do this here")
    if code == errno.EROFS:
        return PermissionDenied(f"{p} is on a read-only file system")
    if code == errno.EEXIST:
        return Conflict(f"{p} already exists")
    if code == errno.ENOTEMPTY:
        return Conflict(f"directory {p} is not empty; pass recursive=true to delete it with its contents")
    if code == errno.EBUSY:
        return Conflict(f"{p} is busy (a mount point or in use)")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return PayloadTooLarge(f"no space left on the device (or quota) holding {p}")
    if code == errno.EFBIG:
        return PayloadTooLarge(f"{p}: the file would be larger than its file system (or the server's limit) allows")
    if code in (errno.EMLINK, errno.ETXTBSY):
        return Conflict(f"{p}: {reason}")
    if isinstance(exc, shutil.SpecialFileError):  # no errno: shutil refuses to copy a FIFO, socket or device
        return InvalidRequest(f"{p} is a FIFO, socket or device, which cannot be copied to another file system")
    if code in (errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL, errno.ENXIO, errno.ENODEV,
                errno.EOPNOTSUPP):
        return InvalidRequest(f"{p}: {reason}")
    # What is left (EIO, ENOMEM, ...) is the machine failing, not the request.
    return StreamError(f"{p}: {reason}")


@contextmanager
def os_errors(path: Path | str, *, resource: str = "file", write: bool = False) -> Iterator[None]:
    """Re-raise any OSError inside the block as the matching DomainError about `path`."""
    try:
        yield
    except OSError as exc:
        raise map_os_error(exc, path, resource=resource, write=write) from exc
