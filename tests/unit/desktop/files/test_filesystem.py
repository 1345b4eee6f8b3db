"""The file API's domain layer (desktop.files, desktop.tar_upload) on real temporary files."""

from __future__ import annotations

import asyncio
import errno
import gzip
import hashlib
import io
import os
import stat
import tarfile
import tracemalloc
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from api.http.problems import status_of
from desktop.core.errors import Conflict, DomainError, InvalidRequest, NotFound, PermissionDenied
from desktop.files.errors import map_os_error
from desktop.files.filesystem import Files
from desktop.files.operations import _UMASK, rfc3339
from desktop.files.tar_upload import MAX_LISTED_PATHS
from sandbox_desktop_wire.fs import path_problem


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def files(home: Path) -> Files:
    return Files(home=home)


async def chunks(parts: Iterable[bytes], fail_after: int | None = None) -> AsyncIterator[bytes]:
    """An upload body; raises ConnectionError after `fail_after` chunks (a client going away)."""
    for index, part in enumerate(parts):
        if fail_after is not None and index == fail_after:
            raise ConnectionError("client went away")
        yield part


def write(files: Files, path: str, data: bytes) -> None:
    asyncio.run(files.write(path, chunks([data])))


def read(files: Files, path: str) -> bytes:
    async def go() -> bytes:
        handle = await files.open(path)
        try:
            return b"".join([c async for c in handle.chunks()])
        finally:
            handle.close()

    return asyncio.run(go())


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir()
            if p.name.endswith(".partial") or p.name.startswith(".upload-")]


# --- paths ---------------------------------------------------------------------------------------

def test_resolve_expands_home_and_relative_paths(files: Files, home: Path) -> None:
    assert files.resolve("~") == home
    assert files.resolve("~/a/b.txt") == home / "a" / "b.txt"
    assert files.resolve("a/./b") == home / "a" / "b"
    assert files.resolve(".") == home
    assert files.resolve("/etc/hosts") == Path("/etc/hosts")


@pytest.mark.parametrize(("raw", "why"), [
    ("", "empty"), ("a\x00b", "NUL"), ("../etc", "'..'"), ("~/../etc", "'..'"), ("a/../../b", "'..'"),
])
def test_resolve_rejects_bad_paths(files: Files, raw: str, why: str) -> None:
    with pytest.raises(InvalidRequest, match=why) as info:
        files.resolve(raw, "to")
    assert info.value.extensions["field"] == "to"
    assert path_problem(raw) is not None


def test_rfc3339_matches_chrono_precision() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00+00:00"
    assert rfc3339(1_500_000_000) == "1970-01-01T00:00:01.500+00:00"
    assert rfc3339(1_000_123_000) == "1970-01-01T00:00:01.000123+00:00"
    assert rfc3339(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789+00:00"
    assert rfc3339(10**30) is None


def test_os_errors_map_to_client_errors() -> None:
    assert isinstance(map_os_error(OSError(errno.EACCES, "denied"), "/x"), PermissionDenied)
    assert isinstance(map_os_error(OSError(errno.ENOENT, "gone"), "/x"), NotFound)
    assert isinstance(map_os_error(OSError(errno.ENOTEMPTY, "full"), "/x"), Conflict)
    assert isinstance(map_os_error(OSError(errno.ENOTDIR, "nd"), "/x", write=True), Conflict)
    assert status_of(map_os_error(OSError(errno.ENOSPC, "full"), "/x")) == 413
    # What a request gets wrong is never a 5xx (docs/errors.md): a 5xx is left for I/O errors.
    statuses = {e: status_of(map_os_error(OSError(e, os.strerror(e)), "/x"))
                for e in (errno.EFBIG, errno.EMLINK, errno.ETXTBSY, errno.EOPNOTSUPP, errno.ENODEV, errno.EIO)}
    assert statuses == {errno.EFBIG: 413, errno.EMLINK: 409, errno.ETXTBSY: 409, errno.EOPNOTSUPP: 400,
                        errno.ENODEV: 400, errno.EIO: 502}


# --- read and write ------------------------------------------------------------------------------

def test_write_then_read_round_trip_creates_parents(files: Files, home: Path) -> None:
    result = asyncio.run(files.write("~/new/dir/f.bin", chunks([b"ab", b"", b"cd"]), expected_size=4))
    assert result.path == str(home / "new/dir/f.bin") and result.bytes_written == 4
    assert read(files, "new/dir/f.bin") == b"abcd"
    assert stat.S_IMODE(os.stat(result.path).st_mode) == 0o666 & ~_UMASK  # not mkstemp's 0600
    assert leftovers(home / "new/dir") == []


def test_interrupted_write_leaves_existing_file_intact(files: Files, home: Path) -> None:
    write(files, "keep.txt", b"original")
    os.chmod(home / "keep.txt", 0o640)
    with pytest.raises(ConnectionError):
        asyncio.run(files.write("keep.txt", chunks([b"x" * 700_000] * 4, fail_after=3)))
    assert (home / "keep.txt").read_bytes() == b"original"
    assert leftovers(home) == []
    write(files, "keep.txt", b"replaced")
    assert (home / "keep.txt").read_bytes() == b"replaced"
    assert stat.S_IMODE(os.stat(home / "keep.txt").st_mode) == 0o640


def test_short_body_is_rejected_and_file_kept(files: Files, home: Path) -> None:
    write(files, "keep.txt", b"original")
    with pytest.raises(InvalidRequest, match="3 of 10 bytes"):
        asyncio.run(files.write("keep.txt", chunks([b"abc"]), expected_size=10))
    assert (home / "keep.txt").read_bytes() == b"original"
    assert leftovers(home) == []


def test_write_through_symlink_keeps_the_link(files: Files, home: Path) -> None:
    (home / "real.txt").write_bytes(b"old")
    (home / "link.txt").symlink_to("real.txt")
    write(files, "link.txt", b"new")
    assert (home / "link.txt").is_symlink()
    assert (home / "real.txt").read_bytes() == b"new"


def test_write_onto_directory_is_rejected(files: Files, home: Path) -> None:
    (home / "d").mkdir()
    with pytest.raises(InvalidRequest, match="is a directory"):
        write(files, "d", b"x")


def test_read_errors(files: Files, home: Path) -> None:
    (home / "d").mkdir()
    os.mkfifo(home / "fifo")
    with pytest.raises(NotFound) as missing:
        read(files, "nope.txt")
    assert missing.value.extensions["details"] == {"resource": "file", "id": str(home / "nope.txt")}
    with pytest.raises(InvalidRequest, match="is a directory"):
        read(files, "d")
    with pytest.raises(InvalidRequest, match="not a regular file"):
        read(files, "fifo")  # must not block waiting for a writer


def test_large_write_keeps_memory_bounded(files: Files, home: Path) -> None:
    block = os.urandom(64 * 1024)
    count = 320  # 20 MiB
    tracemalloc.start()
    try:
        asyncio.run(files.write("big.bin", chunks([block] * count)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * 1024 * 1024, f"peak {peak} bytes while writing 20 MiB"
    expected = hashlib.sha256(block * count).hexdigest()
    assert hashlib.sha256(read(files, "big.bin")).hexdigest() == expected


# --- entries, stat, mkdir, move, delete ----------------------------------------------------------

def test_entries_sorted_with_types_and_links(files: Files, home: Path) -> None:
    (home / "b.txt").write_bytes(b"12345")
    (home / "a").mkdir()
    (home / "c").symlink_to("a")
    (home / "dangling").symlink_to("missing")
    entries = {e.name: e for e in asyncio.run(files.entries(None))}
    assert list(entries) == ["a", "b.txt", "c", "dangling"]
    assert entries["a"].entry_type == "directory" and not entries["a"].is_symlink
    assert entries["b.txt"].entry_type == "file" and entries["b.txt"].size == 5
    assert entries["b.txt"].path == str(home / "b.txt")
    assert entries["c"].entry_type == "directory" and entries["c"].is_symlink
    assert entries["dangling"].entry_type == "file" and entries["dangling"].is_symlink
    assert entries["b.txt"].modified and entries["b.txt"].modified.endswith("+00:00")


def test_entries_errors(files: Files, home: Path) -> None:
    (home / "f").write_bytes(b"")
    with pytest.raises(InvalidRequest, match="not a directory"):
        asyncio.run(files.entries("f"))
    with pytest.raises(NotFound):
        asyncio.run(files.entries("missing"))


def test_stat(files: Files, home: Path) -> None:
    (home / "f").write_bytes(b"xyz")
    entry = asyncio.run(files.stat("~/f"))
    assert (entry.path, entry.entry_type, entry.size) == (str(home / "f"), "file", 3)
    assert asyncio.run(files.stat("~")).entry_type == "directory"
    with pytest.raises(NotFound):
        asyncio.run(files.stat("nope"))
    with pytest.raises(NotFound):
        asyncio.run(files.stat("f/below-a-file"))


def test_mkdir(files: Files, home: Path) -> None:
    assert asyncio.run(files.mkdir("x/y/z")) == home / "x/y/z"
    assert (home / "x/y/z").is_dir()
    asyncio.run(files.mkdir("x/y/z"))  # already there: fine
    (home / "file").write_bytes(b"")
    with pytest.raises(Conflict):
        asyncio.run(files.mkdir("file"))
    with pytest.raises(DomainError) as below_file:
        asyncio.run(files.mkdir("file/sub"))
    assert status_of(below_file.value) == 409


def test_move(files: Files, home: Path) -> None:
    (home / "a.txt").write_bytes(b"a")
    (home / "b.txt").write_bytes(b"b")
    src, dst = asyncio.run(files.move("a.txt", "sub/dir/a.txt"))
    assert (src, dst) == (home / "a.txt", home / "sub/dir/a.txt")
    assert (home / "sub/dir/a.txt").read_bytes() == b"a" and not (home / "a.txt").exists()
    with pytest.raises(Conflict, match="overwrite=true"):
        asyncio.run(files.move("b.txt", "sub/dir/a.txt"))
    asyncio.run(files.move("b.txt", "sub/dir/a.txt", overwrite=True))
    assert (home / "sub/dir/a.txt").read_bytes() == b"b"
    with pytest.raises(NotFound):
        asyncio.run(files.move("b.txt", "c.txt"))


def test_move_directories(files: Files, home: Path) -> None:
    (home / "d1/inner").mkdir(parents=True)
    (home / "d2").mkdir()
    (home / "d2/old").write_bytes(b"")
    with pytest.raises(InvalidRequest, match="into itself"):
        asyncio.run(files.move("d1", "d1/inner/d1"))
    with pytest.raises(InvalidRequest, match="contains the source"):
        asyncio.run(files.move("d1/inner", "d1", overwrite=True))
    asyncio.run(files.move("d1", "d2", overwrite=True))
    assert (home / "d2/inner").is_dir() and not (home / "d2/old").exists() and not (home / "d1").exists()
    asyncio.run(files.move("d2", "d2", overwrite=True))  # same path: a no-op, nothing deleted
    assert (home / "d2/inner").is_dir()


def test_delete(files: Files, home: Path) -> None:
    (home / "f").write_bytes(b"")
    (home / "d/sub").mkdir(parents=True)
    (home / "target").mkdir()
    (home / "target/keep").write_bytes(b"")
    (home / "link").symlink_to("target")
    assert asyncio.run(files.delete("f")) == home / "f" and not (home / "f").exists()
    with pytest.raises(Conflict, match="recursive=true"):
        asyncio.run(files.delete("d"))
    asyncio.run(files.delete("d", recursive=True))
    assert not (home / "d").exists()
    asyncio.run(files.delete("link", recursive=True))
    assert (home / "target/keep").exists() and not (home / "link").exists()
    with pytest.raises(NotFound):
        asyncio.run(files.delete("f"))


@pytest.mark.parametrize("root", ["/", "//", "/tmp/..", "/."])
def test_delete_refuses_root(files: Files, root: str) -> None:
    with pytest.raises(InvalidRequest, match="root directory"):
        asyncio.run(files.delete(root, recursive=True))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_permission_denied_is_403(files: Files, home: Path) -> None:
    locked = home / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(PermissionDenied):
            write(files, "locked/f", b"x")
    finally:
        locked.chmod(0o700)


# --- tar upload ----------------------------------------------------------------------------------

def make_tar(members: list[tuple[tarfile.TarInfo, bytes | None]], compress: bool = False) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o644 if kind != tarfile.DIRTYPE else 0o755
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def upload(files: Files, path: str | None, body: bytes) -> list[str]:
    pieces = [body[i:i + 10_000] for i in range(0, len(body), 10_000)]
    return asyncio.run(files.upload(path, chunks(pieces))).paths


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize("compress", [False, True])
def test_upload_extracts_files_and_dirs(files: Files, home: Path, compress: bool) -> None:
    body = make_tar([
        (member("./", tarfile.DIRTYPE), None),
        (member("docs", tarfile.DIRTYPE), None),
        (member("docs/readme.md", mode=0o4755), b"# hi"),
        (member("./src/main.py"), b"print(1)"),
    ], compress)
    paths = upload(files, "~/proj", body)
    base = home / "proj"
    assert paths == [str(base / "docs"), str(base / "docs/readme.md"), str(base / "src/main.py")]
    assert (base / "src/main.py").read_bytes() == b"print(1)"
    assert stat.S_IMODE(os.stat(base / "docs/readme.md").st_mode) == 0o755  # setuid dropped
    assert tree(base) == ["docs", "docs/readme.md", "src", "src/main.py"]


def test_upload_defaults_to_home_and_replaces_files(files: Files, home: Path) -> None:
    (home / "a.txt").write_bytes(b"old")
    upload(files, None, make_tar([(member("a.txt"), b"new")]))
    assert (home / "a.txt").read_bytes() == b"new"
    assert leftovers(home) == []


@pytest.mark.parametrize(("bad", "why"), [
    (member("../escape.txt"), "'..'"),
    (member("ok/../../escape.txt"), "'..'"),
    (member("/etc/evil"), "absolute"),
    (member("link", tarfile.SYMTYPE, linkname="/etc/passwd"), "symbolic link"),
    (member("hard", tarfile.LNKTYPE, linkname="good.txt"), "hard link"),
    (member("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), "device"),
    (member("fifo", tarfile.FIFOTYPE), "FIFO"),
])
def test_upload_rejects_dangerous_members_and_writes_nothing(
    files: Files, home: Path, bad: tarfile.TarInfo, why: str
) -> None:
    body = make_tar([(member("good.txt"), b"fine"), (bad, b"" if bad.isreg() else None)])
    with pytest.raises(InvalidRequest, match=why) as info:
        upload(files, "~/dest", body)
    assert info.value.extensions["member"] == bad.name
    assert tree(home) == []  # not even the target directory was created


def test_upload_rejects_file_and_directory_clash_in_archive(files: Files, home: Path) -> None:
    body = make_tar([(member("a/b.txt"), b"1"), (member("a"), b"2")])
    with pytest.raises(InvalidRequest, match="both as a file and as a directory"):
        upload(files, "dest", body)
    assert tree(home) == []


def test_upload_refuses_to_write_through_existing_symlink(files: Files, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "dest").mkdir()
    (home / "dest/sneaky").symlink_to(outside)
    with pytest.raises(InvalidRequest, match="symbolic link"):
        upload(files, "dest", make_tar([(member("sneaky/x.txt"), b"x")]))
    assert list(outside.iterdir()) == []


def test_upload_damaged_or_empty_archives(files: Files, home: Path) -> None:
    good = make_tar([(member("one.txt"), b"1" * 5000), (member("two.txt"), b"2" * 50_000)], compress=True)
    with pytest.raises(InvalidRequest):
        upload(files, "dest", good[: len(good) // 2])
    assert tree(home) == []
    with pytest.raises(InvalidRequest, match="not a tar archive"):
        upload(files, "dest", b"this is not a tar file" * 100)
    with pytest.raises(InvalidRequest, match="empty"):
        upload(files, "dest", b"")
    assert tree(home) == []


def test_upload_lists_at_most_1024_paths(files: Files, home: Path) -> None:
    body = make_tar([(member(f"f{i:04d}"), b"") for i in range(MAX_LISTED_PATHS + 6)])
    result = asyncio.run(files.upload("many", chunks([body])))
    assert len(result.paths) == MAX_LISTED_PATHS and result.truncated
    assert len(list((home / "many").iterdir())) == MAX_LISTED_PATHS + 6


def test_undecodable_names_are_reported_lossily(files: Files, home: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(home), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))
    (entry,) = asyncio.run(files.entries("~"))
    assert entry.name == "caf\ufffd.txt" and entry.path.endswith("caf\ufffd.txt")
    entry.name.encode("utf-8")  # JSON-safe
