"""Tar archives built in memory for the file API's upload-batch tests (tests/api/files)."""

from __future__ import annotations

import gzip
import io
import tarfile


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], compress: bool = False) -> bytes:
    """An archive of `members` (a header and its data, None for what has none), gzipped if asked."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    """A member's header: a regular file unless `kind` says otherwise (a link names `linkname`)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, 0o644
    return info
