"""A sandbox whose init is a reaper only (desktop/sandbox/init.py `become_reaper`, desktop/sandbox/entry.py,
desktop/sandbox/serving.py): what it holds while idle, that its programs outlive the process that started them
with their exits still told, and that its orphans are reaped. Real namespaces and programs; the processes are
read from the server's /proc."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from desktop.sandbox import serving
from desktop.sandbox.host import SandboxHost
from desktop.sandbox.sandbox import Sandbox
from tests.unit.desktop.sandbox.test_sandbox import ENV, plan, run, scenario

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes with their own uids need root")


def members(sandbox: Sandbox) -> dict[int, tuple[str, str]]:
    """The processes of the sandbox's pid namespace, by the server's pid: (name, state letter)."""
    assert sandbox._init is not None
    namespace = os.readlink(f"/proc/{sandbox._init.pid}/ns/pid")
    found: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        found[int(entry)] = (name, stat[stat.rindex(")") + 2])
    return found


async def until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def pythons(sandbox: Sandbox) -> list[int]:
    """Its serving processes: forks of the zygote, the only Python processes in it."""
    return [pid for pid, (name, _) in members(sandbox).items() if name.startswith("python")]


def test_an_idle_sandbox_holds_only_its_reaper_and_its_programs(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        assert host.hello is not None and host.hello.pidfd_exit, "this kernel keeps no exits for pidfds"
        init = sandbox._init
        assert init is not None
        # Ready comes just before the init's exec of cat.
        await until(lambda: members(sandbox).get(init.pid, ("", ""))[0] == "cat", "the init to be cat")
        assert await run(sandbox, "echo served") == (0, "served\n")
        assert len(pythons(sandbox)) == 1  # the serving process, kept for the requests that follow
        await until(lambda: not pythons(sandbox), "the serving process to end once idle", serving.IDLE_S + 5)
        assert await run(sandbox, "echo again") == (0, "again\n")  # a new one, on demand

    scenario(tmp_path, body)


def test_a_program_outlives_the_process_that_started_it_and_its_exit_is_told(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        read, write = os.pipe()
        try:
            process = await sandbox.spawn(["sh", "-c", "read line; exit 5"], ENV, None, {0: read, 1: 1, 2: 2})
        finally:
            os.close(read)
        await until(lambda: not pythons(sandbox), "the serving process to end once idle", serving.IDLE_S + 5)
        assert not process.exited.is_set()
        os.write(write, b"go\n")
        os.close(write)
        await asyncio.wait_for(process.exited.wait(), 10)
        assert process.returncode == 5

    scenario(tmp_path, body)


def test_orphans_are_reaped(tmp_path: Path) -> None:
    """A program's background child that outlives it ends up the init's, which must reap it: no zombie stays."""
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        code, _ = await run(sandbox, "(sleep 0.3; exit 3) & exit 0")
        assert code == 0
        await until(lambda: all(name != "sleep" for name, _ in members(sandbox).values()), "the orphan to end")
        await asyncio.sleep(0.2)
        assert [entry for entry in members(sandbox).values() if entry[1] == "Z"] == []

    scenario(tmp_path, body)


def test_a_killed_zygote_is_started_again_for_the_next_request(tmp_path: Path) -> None:
    """Running desktops start their serving processes through the zygote, and new desktops are made by it: one
    that ended (killed here) must not leave them without."""
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        assert await run(sandbox, "echo before") == (0, "before\n")
        await until(lambda: not pythons(sandbox), "the serving process to end once idle", serving.IDLE_S + 5)
        zygote = host._zygote
        assert zygote is not None
        zygote.kill()
        await asyncio.to_thread(zygote.wait)
        assert await run(sandbox, "echo after") == (0, "after\n")
        assert host._zygote is not None and host._zygote.pid != zygote.pid
        other = await Sandbox.create(host, plan(tmp_path, "b", 92))
        try:
            assert await run(other, "echo new") == (0, "new\n")
        finally:
            await other.close()

    scenario(tmp_path, body)
