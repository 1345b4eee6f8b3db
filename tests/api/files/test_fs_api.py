"""The `/v1/fs` API over HTTP against a real server process, checked on the real file system."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, assert_problem, launch_server
from tests.support.tars import member, tar_bytes
from tests.support.uploads import abandon_upload, names_once_settled


@pytest.fixture(scope="module")
def home_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """A server whose user's home is a fresh directory, for `~` and relative paths."""
    tmp = tmp_path_factory.mktemp("fs-home")
    home = tmp / "home"
    home.mkdir()
    srv = launch_server(tmp, env={"HOME": str(home)})
    yield srv, home
    srv.stop()


@pytest.fixture
def home_client(home_server: tuple[ServerProcess, Path]) -> Iterator[httpx.Client]:
    with home_server[0].client() as c:
        yield c


def field_names(problem: dict[str, object]) -> list[str]:
    errors = problem.get("errors")
    assert isinstance(errors, list), problem
    return [e["field"] for e in errors]


# --- read and write ------------------------------------------------------------------------------

def test_put_then_get_round_trip(client: httpx.Client, tmp_path: Path) -> None:
    target = tmp_path / "sub" / "hello.bin"
    r = client.put("/v1/fs/file", params={"path": str(target)}, content=b"\x00hello\xff",
                   headers={"content-type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    assert r.json() == {"path": str(target), "bytesWritten": 7}
    assert target.read_bytes() == b"\x00hello\xff"
    r = client.get("/v1/fs/file", params={"path": str(target)})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-length"] == "7"
    assert r.content == b"\x00hello\xff"
    head = client.head("/v1/fs/file", params={"path": str(target)})
    assert head.status_code == 200 and head.headers["content-length"] == "7" and head.content == b""
    part = client.get("/v1/fs/file", params={"path": str(target)}, headers={"Range": "bytes=1-5"})
    assert (part.status_code, part.content, part.headers["content-range"]) == (206, b"hello", "bytes 1-5/7")


def test_read_problems(client: httpx.Client, tmp_path: Path) -> None:
    missing = assert_problem(client.get("/v1/fs/file", params={"path": str(tmp_path / "nope")}), 404,
                             "not_found")
    assert missing["details"] == {"resource": "file", "id": str(tmp_path / "nope")}
    assert_problem(client.get("/v1/fs/file", params={"path": str(tmp_path)}), 400, "invalid_request")
    assert_problem(client.put("/v1/fs/file", params={"path": str(tmp_path)}, content=b"x"), 400,
                   "invalid_request")


@pytest.mark.parametrize("params", [{}, {"path": ""}, {"path": "a\x00b"}, {"path": "../etc/passwd"}])
@pytest.mark.parametrize(("method", "url"), [("GET", "/v1/fs/file"), ("PUT", "/v1/fs/file"),
                                             ("GET", "/v1/fs/stat"), ("POST", "/v1/fs/mkdir"),
                                             ("DELETE", "/v1/fs/entry")])
def test_bad_path_is_400_naming_path(client: httpx.Client, method: str, url: str,
                                     params: dict[str, str]) -> None:
    problem = assert_problem(client.request(method, url, params=params), 400, "invalid_request")
    assert field_names(problem) == ["path"]


def test_large_file_streams_without_buffering(server: ServerProcess, client: httpx.Client,
                                              tmp_path: Path) -> None:
    block = os.urandom(1024 * 1024)
    size_mb = 50
    expected = hashlib.sha256(block * size_mb).hexdigest()
    target = tmp_path / "big.bin"
    with RssSampler(server.proc.pid) as rss:
        r = client.put("/v1/fs/file", params={"path": str(target)}, content=(block for _ in range(size_mb)))
        assert r.status_code == 200, r.text
        assert r.json()["bytesWritten"] == size_mb * len(block)
        digest = hashlib.sha256()
        with client.stream("GET", "/v1/fs/file", params={"path": str(target)}) as response:
            assert response.headers["content-length"] == str(size_mb * len(block))
            for chunk in response.iter_bytes():
                digest.update(chunk)
    assert digest.hexdigest() == expected
    assert hashlib.sha256(target.read_bytes()).hexdigest() == expected
    assert rss.growth < 25 * 1024 * 1024, f"server RSS grew by {rss.growth // 1024} KiB for a 50 MiB file"


class RssSampler:
    """Samples a process's resident set size in a thread; `growth` is the peak over the start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        while not self._stop.wait(0.01) and time.monotonic() < deadline:
            self.peak = max(self.peak, self._rss())

    @property
    def growth(self) -> int:
        return self.peak - self.start

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, self._rss())


def test_aborted_upload_keeps_existing_file(server: ServerProcess, client: httpx.Client,
                                            tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_bytes(b"original contents")
    abandon_upload(server.url + "/v1/fs/file", str(target), server.token)
    assert names_once_settled(tmp_path) == ["precious.txt"]
    assert target.read_bytes() == b"original contents"
    assert client.get("/v1/fs/stat", params={"path": str(target)}).json()["size"] == 17


def test_download_abandoned_by_client_leaves_server_healthy(client: httpx.Client, tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    target.write_bytes(b"z" * 20_000_000)
    with client.stream("GET", "/v1/fs/file", params={"path": str(target)}) as response:
        next(response.iter_raw(65536))
    assert client.get("/v1/fs/stat", params={"path": str(target)}).status_code == 200


# --- entries, stat, mkdir, move, delete ----------------------------------------------------------

def test_entries_and_stat(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_bytes(b"abc")
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to("a")
    r = client.get("/v1/fs/entries", params={"path": str(tmp_path)})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    entries = r.json()
    assert [e["name"] for e in entries] == ["a", "b.txt", "link"]
    b = entries[1]
    assert set(b) == {"name", "path", "entryType", "size", "modified"}
    assert (b["path"], b["entryType"], b["size"]) == (str(tmp_path / "b.txt"), "file", 3)
    assert entries[0]["entryType"] == "directory" and "isSymlink" not in entries[0]
    assert entries[2]["entryType"] == "directory" and entries[2]["isSymlink"] is True
    stat = client.get("/v1/fs/stat", params={"path": str(tmp_path / "b.txt")}).json()
    assert stat == {"path": str(tmp_path / "b.txt"), "entryType": "file", "size": 3,
                    "modified": b["modified"]}
    assert_problem(client.get("/v1/fs/entries", params={"path": str(tmp_path / "b.txt")}), 400)
    assert_problem(client.get("/v1/fs/entries", params={"path": str(tmp_path / "zz")}), 404, "not_found")
    assert_problem(client.get("/v1/fs/stat", params={"path": str(tmp_path / "zz")}), 404, "not_found")


def test_mkdir_move_delete(client: httpx.Client, tmp_path: Path) -> None:
    deep = tmp_path / "x" / "y"
    r = client.post("/v1/fs/mkdir", params={"path": str(deep)})
    assert r.status_code == 200 and r.json() == {"path": str(deep)} and deep.is_dir()
    (deep / "f.txt").write_bytes(b"1")
    (tmp_path / "g.txt").write_bytes(b"2")

    move = {"from": str(deep / "f.txt"), "to": str(tmp_path / "g.txt")}
    assert_problem(client.post("/v1/fs/move", json=move), 409, "conflict")
    r = client.post("/v1/fs/move", json={**move, "overwrite": True})
    assert r.status_code == 200 and r.json() == move
    assert (tmp_path / "g.txt").read_bytes() == b"1" and not (deep / "f.txt").exists()
    assert_problem(client.post("/v1/fs/move", json=move), 404, "not_found")

    assert_problem(client.delete("/v1/fs/entry", params={"path": str(tmp_path / "x")}), 409, "conflict")
    r = client.delete("/v1/fs/entry", params={"path": str(tmp_path / "x"), "recursive": "true"})
    assert r.status_code == 200 and r.json() == {"path": str(tmp_path / "x")}
    assert not (tmp_path / "x").exists()
    root = assert_problem(client.delete("/v1/fs/entry", params={"path": "/", "recursive": "true"}), 400)
    assert "root" in str(root["detail"])


def test_move_body_validation(client: httpx.Client, tmp_path: Path) -> None:
    problem = assert_problem(client.post("/v1/fs/move", json={"from": "", "to": str(tmp_path)}), 400)
    assert field_names(problem) == ["from"]
    problem = assert_problem(client.post("/v1/fs/move", json={"from": str(tmp_path)}), 422)
    assert field_names(problem) == ["to"]


def test_a_move_to_another_file_system_copies_all_or_nothing(client: httpx.Client, tmp_path: Path) -> None:
    """A FIFO or device cannot be copied across file systems: a 400 naming it, nothing left behind
    (docs/files.md); it was a 502, and /dev/zero a copy that never ended."""
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system at /dev/shm")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "a.txt").write_text("a")
    os.mkfifo(tree / "sub" / "pipe")
    os.mkfifo(tmp_path / "pipe")
    dest = other / f"sandbox-desktop-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        for source, named in ((tmp_path / "pipe", tmp_path / "pipe"), (tree, tree / "sub" / "pipe"),
                              (Path("/dev/zero"), Path("/dev/zero"))):
            move = {"from": str(source), "to": str(dest / source.name)}
            problem = assert_problem(client.post("/v1/fs/move", json=move), 400, "invalid_request")
            assert f"{named} is a FIFO, socket or device" in str(problem["detail"]), problem
            assert list(dest.iterdir()) == [] and source.exists()  # no staging copy, the source kept
        (tree / "sub" / "pipe").unlink()
        moved = client.post("/v1/fs/move", json={"from": str(tree), "to": str(dest / "tree")})
        assert moved.status_code == 200, moved.text
        assert (dest / "tree" / "sub" / "a.txt").read_text() == "a" and not tree.exists()
        assert [p.name for p in dest.iterdir()] == ["tree"]
    finally:
        shutil.rmtree(dest, ignore_errors=True)


# --- ~ and relative paths ------------------------------------------------------------------------

def test_home_expansion(home_server: tuple[ServerProcess, Path], home_client: httpx.Client) -> None:
    _, home = home_server
    r = home_client.put("/v1/fs/file", params={"path": "~/notes/a.txt"}, content=b"A")
    assert r.json() == {"path": str(home / "notes/a.txt"), "bytesWritten": 1}
    assert (home / "notes/a.txt").read_bytes() == b"A"
    assert home_client.get("/v1/fs/file", params={"path": "notes/a.txt"}).content == b"A"
    assert home_client.get("/v1/fs/stat", params={"path": "~"}).json()["path"] == str(home)
    assert "notes" in [e["name"] for e in home_client.get("/v1/fs/entries").json()]
    body = tar_bytes([(member("up/loaded.txt"), b"tar")])
    r = home_client.post("/v1/fs/upload-batch", content=body, headers={"content-type": "application/x-tar"})
    assert r.json() == {"paths": [str(home / "up/loaded.txt")], "truncated": False}
    assert (home / "up/loaded.txt").read_bytes() == b"tar"


# --- upload-batch --------------------------------------------------------------------------------

@pytest.mark.parametrize("compress", [False, True])
def test_upload_batch(client: httpx.Client, tmp_path: Path, compress: bool) -> None:
    body = tar_bytes([(member("dir", tarfile.DIRTYPE), None), (member("dir/a.txt"), b"a"),
                      (member("b.txt"), b"bb")], compress)
    dest = tmp_path / "dest"
    r = client.post("/v1/fs/upload-batch", params={"path": str(dest)}, content=body,
                    headers={"content-type": "application/gzip" if compress else "application/x-tar"})
    assert r.status_code == 200, r.text
    assert r.json() == {"paths": [str(dest / "dir"), str(dest / "dir/a.txt"), str(dest / "b.txt")],
                        "truncated": False}
    assert (dest / "dir/a.txt").read_bytes() == b"a" and (dest / "b.txt").read_bytes() == b"bb"


@pytest.mark.parametrize("bad", [
    member("../../escape.txt"), member("/tmp/absolute.txt"), member("evil", tarfile.SYMTYPE, "/etc"),
    member("hard", tarfile.LNKTYPE, "ok.txt"), member("fifo", tarfile.FIFOTYPE),
])
def test_upload_batch_rejects_unsafe_members(client: httpx.Client, tmp_path: Path,
                                             bad: tarfile.TarInfo) -> None:
    body = tar_bytes([(member("ok.txt"), b"ok"), (bad, b"" if bad.isreg() else None)])
    dest = tmp_path / "dest"
    r = client.post("/v1/fs/upload-batch", params={"path": str(dest)}, content=body,
                    headers={"content-type": "application/x-tar"})
    problem = assert_problem(r, 400, "invalid_request")
    assert problem["member"] == bad.name and bad.name in str(problem["detail"])
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the target directory


def test_upload_batch_content_type_and_garbage(client: httpx.Client, tmp_path: Path) -> None:
    body = tar_bytes([(member("ok.txt"), b"ok")])
    assert_problem(client.post("/v1/fs/upload-batch", params={"path": str(tmp_path)}, content=body,
                               headers={"content-type": "text/plain"}), 415, "unsupported_media_type")
    assert_problem(client.post("/v1/fs/upload-batch", params={"path": str(tmp_path)}, content=b"junk" * 200,
                               headers={"content-type": "application/x-tar"}), 400, "invalid_request")
    assert list(tmp_path.iterdir()) == []


def test_fs_requires_the_token(server: ServerProcess) -> None:
    assert_problem(httpx.get(server.url + "/v1/fs/entries"), 401)


def test_undecodable_file_names_do_not_break_listing(client: httpx.Client, tmp_path: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))
    r = client.get("/v1/fs/entries", params={"path": str(tmp_path)})
    assert r.status_code == 200 and [e["name"] for e in r.json()] == ["caf\ufffd.txt"]


def test_permission_denied_is_403(client: httpx.Client) -> None:
    target = "/sys/sandbox-desktop-fs-test"
    try:
        os.mkdir(target)
    except PermissionError:
        pass
    else:
        os.rmdir(target)
        pytest.skip("this user may create directories in /sys")
    problem = assert_problem(client.post("/v1/fs/mkdir", params={"path": target}), 403, "permission_denied")
    assert target in str(problem["detail"])
    assert_problem(client.put("/v1/fs/file", params={"path": target}, content=b"x"), 403, "permission_denied")
