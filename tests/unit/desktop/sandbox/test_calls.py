"""`Sandbox.call` on real sandboxes: a preloaded function run in a child of the init as the sandbox's user, and
the desktop's file operations (desktop/files) run that way, checked on the real files from outside."""

from __future__ import annotations

import asyncio
import os
import tarfile
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from desktop.core.errors import InvalidRequest, NotFound, PermissionDenied, StreamError
from desktop.files import calls as file_calls
from desktop.files.filesystem import Files, InSandbox
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.in_sandbox import OWN_FDS_FROM
from desktop.sandbox.sandbox import Sandbox
from tests.support import sandbox_calls
from tests.support.tars import member, tar_bytes
from tests.unit.desktop.sandbox.test_sandbox import run, scenario

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes with their own uids need root")

PRELOAD = (file_calls.__name__, sandbox_calls.__name__)


def of(name: str) -> str:
    return f"{sandbox_calls.__name__}:{name}"


def test_a_call_runs_as_the_sandboxes_user_with_nothing_of_the_init(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        read, write = os.pipe()
        os.write(write, b"given")
        os.close(write)
        try:
            value, fds = await sandbox.call(of("whoami"), {}, [read])
        finally:
            os.close(read)
        assert fds == []
        assert (value["uid"], value["euid"], value["gid"]) == (sandbox.user.uid,) * 2 + (sandbox.user.gid,)
        assert value["groups"] == [] and value["cap_eff"] == value["cap_prm"] == "0000000000000000"
        assert value["no_new_privs"] == "1" and value["dumpable"] == 0  # its uid's programs may not trace it
        assert max(value["fds"]) < OWN_FDS_FROM and len(value["fds"]) <= 6, value["fds"]  # not the init's socket
        assert value["got"] == ["given"] and value["cwd"] == "/"

    scenario(tmp_path, body, preload=PRELOAD)


def test_a_long_call_holds_up_nothing_and_a_large_answer_comes_whole(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        slow = asyncio.create_task(sandbox.call(of("sleep"), {"seconds": 2}))
        await asyncio.sleep(0.1)
        began = time.monotonic()
        code, _ = await run(sandbox, "true")
        big, _ = await sandbox.call(of("big"), {"size": 3 << 20})  # over a message: spilled into a memfd
        assert code == 0 and big == {"text": "x" * (3 << 20)}
        assert time.monotonic() - began < 1.5 and not slow.done()
        assert (await slow)[0] == {"slept": 2}

    scenario(tmp_path, body, preload=PRELOAD)


def test_what_a_call_opens_comes_back_and_a_failure_is_an_oserror(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        value, fds = await sandbox.call(of("echo"), {"open": "/etc/hostname"})
        assert value == {"open": "/etc/hostname"}
        try:
            assert os.read(fds[0], 100) == b"desktop-a\n"  # its own /etc/hostname
        finally:
            os.close(fds[0])
        with pytest.raises(OSError, match="ValueError: boom"):
            await sandbox.call(of("boom"), {})
        with pytest.raises(OSError, match="KeyError"):  # only what the zygote preloaded can be called
            await sandbox.call("sandbox_desktop_no_such_module:f", {})

    scenario(tmp_path, body, preload=PRELOAD)


async def chunks(parts: Iterable[bytes], fail_after: int | None = None) -> AsyncIterator[bytes]:
    for i, part in enumerate(parts):
        if i == fail_after:
            raise ConnectionError("the client went away")
        yield part


def test_files_in_a_sandbox_act_as_its_user_in_its_view(tmp_path: Path) -> None:
    secret = tmp_path / "state" / "token"  # in the server's state, which the sandbox must not see

    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        home = sandbox.plan.home
        secret.write_text("the server's token")
        files = Files(home, InSandbox(sandbox))
        written = await files.write("notes/a.txt", chunks([b"hello"]))
        assert written.path == str(home / "notes/a.txt")
        assert {(home / p).stat().st_uid for p in ("notes", "notes/a.txt")} == {sandbox.user.uid}
        assert [e.name for e in await files.entries("~/notes")] == ["a.txt"]
        with pytest.raises(ConnectionError):
            await files.write("notes/a.txt", chunks([b"x" * 700_000] * 4, fail_after=3))
        assert (home / "notes/a.txt").read_bytes() == b"hello" and os.listdir(home / "notes") == ["a.txt"]
        with pytest.raises(NotFound):
            await files.open(str(secret))
        with pytest.raises(PermissionDenied):
            await files.mkdir("/etc/sandbox-desktop-test")
        await files.write("/tmp/mine.txt", chunks([b"mine"]))
        assert not Path("/tmp/mine.txt").exists() and (await files.stat("/tmp/mine.txt")).size == 4
        # The decompressors tarfile imports late are there (the interpreter's files may not be readable).
        archive = tar_bytes([(member("d/x.txt"), b"x")], compress=True)
        uploaded = await files.upload("up", chunks([archive]))
        assert uploaded.paths == [str(home / "up/d/x.txt")] and (home / "up/d/x.txt").stat().st_uid == sandbox.user.uid
        with pytest.raises(InvalidRequest):
            await files.upload("up", chunks([tar_bytes([(member("l", tarfile.SYMTYPE, "/etc"), None)])]))
        await files.delete("up", recursive=True)
        assert not (home / "up").exists()

    scenario(tmp_path, body, preload=PRELOAD)


def test_a_file_call_the_sandbox_cannot_run_is_a_stream_error(tmp_path: Path) -> None:
    """A host whose zygote did not preload the file calls: a 502 naming why, never a bare 500."""
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        with pytest.raises(StreamError, match="could not run the file call"):
            await Files(sandbox.plan.home, InSandbox(sandbox)).stat("~")

    scenario(tmp_path, body, preload=(sandbox_calls.__name__,))
