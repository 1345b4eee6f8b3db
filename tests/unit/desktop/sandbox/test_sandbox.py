"""A desktop's sandbox on its own (desktop/sandbox/): real namespaces, real uids, real programs in them.

What a program run in a sandbox can see and do is checked from inside it (its own answers) and from
outside (the server's view of the same files and processes)."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from desktop.sandbox.host import Isolation, SandboxHost
from desktop.sandbox.layers import Layer
from desktop.sandbox.process import SandboxedProcess
from desktop.sandbox.sandbox import Sandbox
from desktop.sandbox.view import SandboxPlan

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes with their own uids need root")

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def plan(root: Path, name: str, display: int = 91) -> SandboxPlan:
    state = root / "state" / name
    return SandboxPlan(name, state / "sandbox", state / "home", Path(f"/tmp/sandbox-test-{os.getpid()}-{name}"),
                       display, hidden=(root / "state",))


Scenario = Callable[[SandboxHost, Sandbox], Awaitable[None]]


INITS = pytest.mark.parametrize("reaper", [True, False], ids=["reaper-init", "serving-init"])
"""A sandbox's init is a reaper only where the kernel keeps exits for pidfds (Linux 6.15); before, it serves the
requests itself (desktop/sandbox/init.py). The tests marked so run both on a kernel that has the choice."""


def scenario(tmp_path: Path, body: Scenario, timeout: float = 30, preload: tuple[str, ...] = (),
             reaper: bool = True) -> None:
    """Run `body(host, sandbox)` on a fresh event loop with a server's sandbox host (its zygote importing
    `preload`) and one sandbox; with `reaper=False`, one whose init serves its requests, as on a kernel older
    than 6.15."""
    async def main() -> None:
        host = SandboxHost(Isolation.AUTO, tmp_path / "xauthority", preload=preload)
        await host.open()
        try:
            assert host.enabled, host.missing()
            if not reaper and host.hello is not None:
                host.hello = replace(host.hello, pidfd_exit=False)
            sandbox = await Sandbox.create(host, plan(tmp_path, "a"))
            try:
                async with asyncio.timeout(timeout):
                    await body(host, sandbox)
            finally:
                await sandbox.close()
        finally:
            await host.close()
    asyncio.run(main())


async def run(sandbox: Sandbox, script: str, *, env: dict[str, str] | None = None,
              cwd: str | None = None) -> tuple[int, str]:
    """Run `sh -c script` in the sandbox; its exit code and output."""
    read, write = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        process = await sandbox.spawn(["sh", "-c", script], {**ENV, **(env or {})}, cwd, {0: null, 1: write, 2: write})
    finally:
        os.close(write)
        os.close(null)
    async with asyncio.timeout(10):
        await process.exited.wait()
    with os.fdopen(read, "rb") as out:
        text = out.read().decode()
    assert process.returncode is not None
    return process.returncode, text


def test_a_program_runs_as_the_sandboxes_own_user_without_privileges(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        code, out = await run(sandbox, "id -u; id -un; hostname; grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs)' "
                                       "/proc/self/status")
        assert code == 0, out
        lines = out.split()
        assert lines[0] == str(sandbox.user.uid) and lines[0] != "0" and lines[1] == "user"
        assert lines[2] == "desktop-a"
        assert "CapEff: 0000000000000000" in " ".join(lines) and "CapBnd: 0000000000000000" in " ".join(lines)
        assert "NoNewPrivs: 1" in " ".join(lines)
        assert sandbox.report.isolated and Layer.PID in sandbox.report.layers

    scenario(tmp_path, body)


def test_it_sees_only_its_own_processes(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        code, out = await run(sandbox, "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '")
        assert code == 0
        pids = [int(p) for p in out.split()]
        assert max(pids) < 100 and 1 in pids, pids  # the init, the shell and ls: nothing of the machine
        assert os.getpid() not in pids or os.getpid() < 100

    scenario(tmp_path, body)


def test_tmp_run_and_the_servers_state_are_private(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        secret = tmp_path / "state" / "token"
        secret.write_text("the server's token")
        outside = Path("/tmp") / f"outside-{os.getpid()}"
        outside.write_text("the machine's /tmp")
        try:
            _code, out = await run(sandbox, f"cat {secret} || echo no-token; cat {outside} || echo no-tmp; "
                                           f"ls /run | wc -l; echo hi > $HOME/note; echo hi > /tmp/mine; "
                                           f"touch /etc/passwd 2>/dev/null || echo no-etc",
                                           env={"HOME": str(sandbox.plan.home)})
        finally:
            outside.unlink()
        assert "no-token" in out and "the server's token" not in out
        assert "no-tmp" in out and "the machine's /tmp" not in out
        assert "no-etc" in out
        assert (sandbox.plan.home / "note").read_text() == "hi\n"  # its HOME is the desktop's, at the same path
        assert (sandbox.plan.home / "note").stat().st_uid == sandbox.user.uid
        assert not Path("/tmp/mine").exists()

    scenario(tmp_path, body)


def test_two_sandboxes_share_nothing(tmp_path: Path) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        other = await Sandbox.create(host, plan(tmp_path, "b", 92))
        try:
            assert other.user.uid != sandbox.user.uid
            await run(other, "echo b > /tmp/b-was-here; sleep 30 & echo $! > /tmp/pid; wait", env={})  \
                if False else None
            sleeper = await other.spawn(["sleep", "30"], ENV, None, {0: 0, 1: 1, 2: 2})
            _code, out = await run(sandbox, f"cat {other.plan.home}/x 2>&1; ls /proc | grep -c . ; "
                                           f"kill -0 {sleeper.sandbox_pid} 2>&1 || echo cannot-signal")
            assert "No such file" in out or "Permission denied" in out
            # Its sleep is not among this sandbox's processes (pid numbers overlap, but not the processes).
            _code, mine = await run(sandbox, "ps -eo comm | grep -c sleep || true")
            assert mine.strip() == "0"
            sleeper.send_signal(signal.SIGKILL)
        finally:
            await other.close()

    scenario(tmp_path, body)


@INITS
def test_exits_and_failures_come_back_as_a_local_spawn_would(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        assert (await run(sandbox, "exit 7"))[0] == 7
        assert (await run(sandbox, "kill -TERM $$"))[0] == -signal.SIGTERM
        with pytest.raises(FileNotFoundError):
            await sandbox.spawn(["no-such-program-xyz"], ENV, None, {0: 0, 1: 1, 2: 2})
        with pytest.raises(OSError) as failed:
            await sandbox.spawn(["true"], ENV, "/no/such/folder", {0: 0, 1: 1, 2: 2})
        assert "cwd" in str(failed.value)

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_arguments_no_program_can_take_fail_alone_as_a_local_spawn_would(tmp_path: Path, reaper: bool) -> None:
    """A ValueError, as subprocess raises it here, and the init (every program of the desktop) lives on."""
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        for argv, env in ((["true"], {**ENV, "A=B": "x"}), (["true", "a\x00b"], ENV)):
            with pytest.raises(ValueError):
                await sandbox.spawn(argv, env, None, {0: 0, 1: 1, 2: 2})
        assert await run(sandbox, "echo alive") == (0, "alive\n")

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_a_descriptor_arrives_at_the_number_its_arguments_name(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        read, write = os.pipe()
        try:
            process = await sandbox.spawn(["sh", "-c", "echo announced >&9"], ENV, None, {0: 0, 1: 1, 2: 2, 9: write})
        finally:
            os.close(write)
        await asyncio.wait_for(process.exited.wait(), 10)
        with os.fdopen(read, "rb") as pipe:
            assert pipe.read() == b"announced\n"

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_a_tty_program_gets_its_pty_as_controlling_terminal(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        master, slave = pty.openpty()
        try:
            process = await sandbox.spawn(["sh", "-c", "tty; ps -o stat= -p $$"], ENV, None,
                                          {0: slave, 1: slave, 2: slave}, tty=True)
        finally:
            os.close(slave)
        await asyncio.wait_for(process.exited.wait(), 10)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        text = out.decode()
        assert "/dev/pts/" in text and "not a tty" not in text
        assert "s" in text.split()[-1]  # a session leader with its terminal

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_open_is_as_the_sandboxes_user(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        mine = sandbox.plan.home / "mine.txt"
        mine.write_text("readable")
        fd = await sandbox.open(str(mine), os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            assert fh.read() == b"readable"
        with pytest.raises(PermissionError):
            await sandbox.open("/etc/shadow", os.O_RDONLY)

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_closing_ends_every_process_even_a_daemon(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        made = await Sandbox.create(host, plan(tmp_path, "c", 93))
        code, _ = await run(made, "(setsid sh -c 'sleep 60' </dev/null >/dev/null 2>&1 &) ; sleep 0.1")
        assert code == 0
        uid = made.user.uid
        started = time.perf_counter()
        await made.close()
        assert time.perf_counter() - started < 2
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid]
        assert left == []

    scenario(tmp_path, body, reaper=reaper)


@INITS
def test_a_process_killed_from_outside_reports_its_signal(tmp_path: Path, reaper: bool) -> None:
    async def body(host: SandboxHost, sandbox: Sandbox) -> None:
        process: SandboxedProcess = await sandbox.spawn(["sleep", "30"], ENV, None, {0: 0, 1: 1, 2: 2})
        assert process.pid != process.sandbox_pid and process.pid > 0  # the server's number, and the sandbox's
        os.kill(process.pid, signal.SIGKILL)
        await asyncio.wait_for(process.exited.wait(), 10)
        assert process.returncode == -signal.SIGKILL

    scenario(tmp_path, body, reaper=reaper)


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_state_outside_tmp_is_hidden_and_a_home_under_a_closed_folder_is_reachable(tmp_path: Path) -> None:
    """A server's state where root keeps it (under /root, which the sandbox's user may not pass): the token
    beside the HOME is hidden, the HOME itself works, at its own path."""
    root = Path.home() / ".cache" / f"sandbox-test-{os.getpid()}"
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "token").write_text("the server's token")

    async def main() -> None:
        host = SandboxHost(Isolation.AUTO, tmp_path / "xauthority")
        await host.open()
        try:
            made = await Sandbox.create(host, SandboxPlan("d", state / "d" / "sandbox", state / "d" / "home",
                                                          Path(f"/tmp/sandbox-test-{os.getpid()}-d"), 94,
                                                          hidden=(state,)))
            try:
                code, out = await run(made, f"cat {state}/token || echo no-token; ls -A {Path.home()} | wc -l; "
                                            "echo ok > $HOME/x && cat $HOME/x", env={"HOME": str(made.plan.home)})
            finally:
                await made.close()
        finally:
            await host.close()
        assert "no-token" in out and "the server's token" not in out
        assert out.split()[-1] == "ok" and code == 0
        assert out.split()[-2] == "1"  # of root's HOME only the way to the desktop's is there

    try:
        asyncio.run(main())
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
