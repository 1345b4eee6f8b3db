"""A desktop's own file API (`/v1/desktops/{id}/fs`, docs/files.md "Files of one desktop") as its agent meets it:
two desktops in sandboxes on a server that made its own token; desktop A's agent, with only A's control token,
reads and writes A's files as A's user, in A's view of them, and reaches nothing of the server's or of B's that a
missing or forbidden file would not answer the same. Checked on the real files from outside."""

from __future__ import annotations

import os
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import assert_problem, running_server
from tests.support.sandboxes import Pair, home_of, sandboxed_pair
from tests.support.tars import member, tar_bytes
from tests.support.uploads import abandon_upload, names_once_settled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a desktop of its own uid and namespaces needs root")

@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with sandboxed_pair(tmp_path_factory.mktemp("desktop-fs")) as made:
        yield made


@pytest.fixture(scope="module")
def agent(pair: Pair) -> httpx.Client:
    """Desktop A's agent, at `/v1/desktops/{A}`: only A's control token."""
    return pair.agent


@pytest.fixture(scope="module")
def home(pair: Pair) -> Path:
    return home_of(pair.admin, pair.a)


@pytest.fixture
def folder(home: Path) -> Path:
    """A path in A's HOME for one test, which the test makes through the API (so it is its user's)."""
    return home / f"t-{secrets.token_hex(4)}"


def uid_of(home: Path) -> int:
    uid = home.stat().st_uid
    assert uid not in (0, os.getuid())  # the sandbox's own user, not the server's
    return uid


def put(agent: httpx.Client, path: str, data: bytes) -> httpx.Response:
    return agent.put("/fs/file", params={"path": path}, content=data)


# --- where a path leads, and as whom ------------------------------------------------------------------------


def test_a_write_lands_in_its_home_owned_by_its_user(agent: httpx.Client, home: Path, folder: Path) -> None:
    written = put(agent, f"~/{folder.name}/notes/a.txt", b"hello")
    assert written.status_code == 200, written.text
    assert written.json() == {"path": str(folder / "notes/a.txt"), "bytesWritten": 5}
    assert (folder / "notes/a.txt").read_bytes() == b"hello"
    assert {(folder / p).stat().st_uid for p in ("", "notes", "notes/a.txt")} == {uid_of(home)}
    assert agent.get("/fs/file", params={"path": f"{folder.name}/notes/a.txt"}).content == b"hello"  # relative
    assert agent.get("/fs/stat", params={"path": "~"}).json()["path"] == str(home)
    assert folder.name in [e["name"] for e in agent.get("/fs/entries").json()]  # default: its HOME


def test_its_tmp_is_its_own(agent: httpx.Client, home: Path) -> None:
    name = f"desktop-fs-{secrets.token_hex(4)}"
    machine = Path("/tmp") / f"{name}-machine"
    machine.write_text("the machine's")
    try:
        assert put(agent, f"/tmp/{name}", b"mine").status_code == 200
        assert not (Path("/tmp") / name).exists()
        assert agent.get("/fs/file", params={"path": f"/tmp/{name}"}).content == b"mine"
        listed = [e["name"] for e in agent.get("/fs/entries", params={"path": "/tmp"}).json()]
        assert name in listed and machine.name not in listed
        assert_problem(agent.get("/fs/stat", params={"path": str(machine)}), 404, "not_found")
    finally:
        machine.unlink()


def test_the_servers_state_and_another_desktops_home_answer_as_missing(pair: Pair, agent: httpx.Client) -> None:
    server, b_home = pair.server, home_of(pair.admin, pair.b)
    (b_home / "secret.txt").write_text("B's secret")
    token = server.state_dir / "token"
    missing = assert_problem(agent.get("/fs/file", params={"path": str(token) + "-nope"}), 404, "not_found")
    for path in (token, b_home / "secret.txt"):
        for route in ("/fs/file", "/fs/stat"):
            problem = assert_problem(agent.get(route, params={"path": str(path)}), 404, "not_found")
            assert set(problem) == set(missing)
    assert_problem(agent.get("/fs/entries", params={"path": str(b_home)}), 404, "not_found")
    assert "token" not in [e["name"] for e in agent.get("/fs/entries", params={"path": str(server.state_dir)}).json()]
    # Nor written: B's HOME is not there, and its user may not make it in the server's (emptied) state.
    assert_problem(put(agent, str(b_home / "secret.txt"), b"A was here"), 403, "permission_denied")
    assert (b_home / "secret.txt").read_text() == "B's secret"


@pytest.fixture
def roots_file() -> Iterator[Path]:
    """A file of root's that only root may read, in a folder only root may write: /etc, which desktops see."""
    path = Path("/etc") / f"sandbox-desktop-test-{secrets.token_hex(4)}"
    path.write_text("root's")
    path.chmod(0o600)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def test_what_its_user_may_not_touch_is_a_403_as_on_the_machine(agent: httpx.Client, roots_file: Path) -> None:
    assert_problem(agent.get("/fs/file", params={"path": str(roots_file)}), 403, "permission_denied")
    assert agent.get("/fs/stat", params={"path": str(roots_file)}).json()["size"] == 6  # its folder may be read
    assert_problem(agent.delete("/fs/entry", params={"path": str(roots_file)}), 403, "permission_denied")
    assert_problem(put(agent, str(roots_file), b"over"), 403, "permission_denied")
    assert roots_file.read_text() == "root's"
    for path in (f"{roots_file}-new", f"/usr/local/{roots_file.name}"):
        assert_problem(put(agent, path, b"x"), 403, "permission_denied")
        assert_problem(agent.post("/fs/mkdir", params={"path": path + ".d"}), 403, "permission_denied")
        assert not Path(path).exists() and not Path(path + ".d").exists()


# --- the operations, as /v1/fs does them -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "a\x00b", "../etc/passwd"])
def test_a_bad_path_is_a_400_naming_it(agent: httpx.Client, path: str) -> None:
    for method, route in (("GET", "/fs/file"), ("PUT", "/fs/file"), ("GET", "/fs/stat"), ("DELETE", "/fs/entry")):
        problem = assert_problem(agent.request(method, route, params={"path": path}), 400, "invalid_request")
        errors = problem["errors"]
        assert isinstance(errors, list) and [e["field"] for e in errors] == ["path"], problem


def test_range_reads(agent: httpx.Client, folder: Path) -> None:
    data = bytes(range(100))
    assert put(agent, f"~/{folder.name}/r.bin", data).status_code == 200
    path = {"path": f"~/{folder.name}/r.bin"}
    whole = agent.get("/fs/file", params=path)
    assert whole.status_code == 200 and whole.content == data and whole.headers["accept-ranges"] == "bytes"
    for asked, first, last in (("bytes=10-19", 10, 19), ("bytes=95-", 95, 99), ("bytes=-5", 95, 99)):
        part = agent.get("/fs/file", params=path, headers={"Range": asked})
        assert part.status_code == 206 and part.content == data[first:last + 1], asked
        assert part.headers["content-range"] == f"bytes {first}-{last}/100"
    past = agent.get("/fs/file", params=path, headers={"Range": "bytes=100-"})
    assert_problem(past, 416) and past.headers["content-range"] == "bytes */100"


def test_a_failed_write_leaves_the_old_file(agent: httpx.Client, folder: Path) -> None:
    assert put(agent, f"~/{folder.name}/keep.txt", b"original").status_code == 200
    token = agent.headers["authorization"].removeprefix("Bearer ")
    abandon_upload(f"{agent.base_url}/fs/file", f"~/{folder.name}/keep.txt", token)
    assert names_once_settled(folder) == ["keep.txt"]
    assert (folder / "keep.txt").read_bytes() == b"original"
    assert put(agent, f"~/{folder.name}/keep.txt", b"replaced").json()["bytesWritten"] == 8
    assert (folder / "keep.txt").read_bytes() == b"replaced" and names_once_settled(folder) == ["keep.txt"]


def test_mkdir_move_and_recursive_delete(agent: httpx.Client, home: Path, folder: Path) -> None:
    deep = f"~/{folder.name}/x/y"
    assert agent.post("/fs/mkdir", params={"path": deep}).json() == {"path": str(folder / "x/y")}
    assert put(agent, f"{deep}/f.txt", b"1").status_code == 200
    assert put(agent, f"~/{folder.name}/g.txt", b"2").status_code == 200
    move = {"from": f"{deep}/f.txt", "to": f"~/{folder.name}/g.txt"}
    assert_problem(agent.post("/fs/move", json=move), 409, "conflict")
    moved = agent.post("/fs/move", json={**move, "overwrite": True})
    assert moved.json() == {"from": str(folder / "x/y/f.txt"), "to": str(folder / "g.txt")}
    assert (folder / "g.txt").read_bytes() == b"1" and not (folder / "x/y/f.txt").exists()
    assert_problem(agent.post("/fs/move", json=move), 404, "not_found")
    # Out of its own /tmp and back: another file system, copied as its user.
    there = agent.post("/fs/move", json={"from": f"~/{folder.name}/x", "to": f"/tmp/{folder.name}-x"})
    assert there.status_code == 200, there.text
    assert not (folder / "x").exists() and not Path(f"/tmp/{folder.name}-x").exists()
    assert agent.post("/fs/move", json={"from": f"/tmp/{folder.name}-x", "to": f"~/{folder.name}/x"}).status_code == 200
    assert (folder / "x/y").is_dir() and (folder / "x/y").stat().st_uid == uid_of(home)
    assert_problem(agent.delete("/fs/entry", params={"path": f"~/{folder.name}"}), 409, "conflict")
    gone = agent.delete("/fs/entry", params={"path": f"~/{folder.name}", "recursive": "true"})
    assert gone.json() == {"path": str(folder)} and not folder.exists()


def test_a_tar_upload_is_extracted_as_its_user_all_or_nothing(agent: httpx.Client, home: Path, folder: Path) -> None:
    body = tar_bytes([(member("dir", tarfile.DIRTYPE), None), (member("dir/a.txt"), b"a"), (member("b.txt"), b"bb")],
                     compress=True)
    done = agent.post("/fs/upload-batch", params={"path": f"~/{folder.name}/up"}, content=body,
                      headers={"content-type": "application/gzip"})
    assert done.status_code == 200, done.text
    up = folder / "up"
    assert done.json() == {"paths": [str(up / "dir"), str(up / "dir/a.txt"), str(up / "b.txt")], "truncated": False}
    assert (up / "dir/a.txt").read_bytes() == b"a" and (up / "dir/a.txt").stat().st_uid == uid_of(home)
    for bad in (member("../../escape.txt"), member("/tmp/absolute.txt"), member("evil", tarfile.SYMTYPE, "/etc")):
        body = tar_bytes([(member("ok.txt"), b"ok"), (bad, b"" if bad.isreg() else None)])
        refused = agent.post("/fs/upload-batch", params={"path": f"~/{folder.name}/bad"}, content=body,
                             headers={"content-type": "application/x-tar"})
        assert assert_problem(refused, 400, "invalid_request")["member"] == bad.name
        assert not (folder / "bad").exists() and not (home / "escape.txt").exists()
    # Where its user may not write, nothing is extracted either.
    assert_problem(agent.post("/fs/upload-batch", params={"path": "/etc/sandbox-desktop-up"},
                              content=tar_bytes([(member("ok.txt"), b"ok")]),
                              headers={"content-type": "application/x-tar"}), 403, "permission_denied")
    assert not Path("/etc/sandbox-desktop-up").exists()


# --- whose token, which desktop -----------------------------------------------------------------------------


def test_its_token_reaches_its_own_files_only(pair: Pair, agent: httpx.Client) -> None:
    assert agent.get("/fs/stat", params={"path": "~"}).status_code == 200
    for url in ("/v1/fs/stat", f"/v1/desktops/{pair.b['id']}/fs/stat", "/v1/desktop/fs/stat"):
        refused = httpx.get(pair.server.url + url, params={"path": "/"}, headers=agent.headers)
        assert_problem(refused, 403, "token_scope")


def test_a_desktop_that_is_not_running_has_no_files(pair: Pair) -> None:
    assert_problem(pair.admin.get("/v1/desktop/fs/stat", params={"path": "~"}), 409, "desktop_runtime_inactive")


def test_without_a_sandbox_its_files_are_the_machines_from_its_home(tmp_path: Path) -> None:
    """`--isolation off`: the desktop's processes run as the server's user, and so do its file operations."""
    with running_server(tmp_path, "--isolation", "off", desktop={"width": 640, "height": 400}) as srv, \
            srv.client() as api:
        home = Path(api.get("/v1/desktop/status").json()["stateDir"]) / "home"
        written = api.put("/v1/desktop/fs/file", params={"path": "~/plain.txt"}, content=b"plain")
        assert written.json()["path"] == str(home / "plain.txt")
        assert (home / "plain.txt").stat().st_uid == os.getuid()
        assert api.get("/v1/desktop/fs/file", params={"path": "/etc/hostname"}).content == Path(
            "/etc/hostname").read_bytes()
