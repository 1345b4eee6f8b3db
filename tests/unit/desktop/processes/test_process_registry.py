"""The process registry with real child processes: exits, signals, groups, logs, runs, ptys."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from api.http.problems import status_of
from desktop.core.errors import Conflict, InvalidRequest, NotFound
from desktop.processes import LogBuffer, ManagedProcess, ProcessConfig, ProcessManager, SpawnError

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 20) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def manager(**config: Any) -> AsyncIterator[ProcessManager]:
    m = ProcessManager(ProcessConfig(**config))
    try:
        yield m
    finally:
        await m.shutdown(grace_s=0.5)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def wait_gone(pid: int, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return not alive(pid)


async def output_until(process: ManagedProcess, needle: bytes, timeout: float = 5.0) -> bytes:
    """All output so far, once it contains `needle`."""
    data = b""
    async with asyncio.timeout(timeout):
        async for entry in process.logs.follow(heartbeat_s=0.05):
            if entry is not None:
                data += entry.data
            if needle in data:
                return data
    raise AssertionError(f"{needle!r} never appeared; output was {data!r}")


def sh(script: str) -> tuple[str, list[str]]:
    return "sh", ["-c", script]


# -- exits and signals -------------------------------------------------------------------------


def test_exit_code_and_info() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("sleep 0.2; echo out; echo err >&2; exit 3"), cwd="/tmp")
            assert p.id == "proc_1" and p.running and p.info()["pid"] == p.pid
            assert await p.wait() == 3
            info = p.info()
            assert info["status"] == "exited" and info["exitCode"] == 3 and info["cwd"] == "/tmp"
            assert "pid" not in info and "exitSignal" not in info
            assert info["exitedAtMs"] >= info["createdAtMs"]
            assert await p.wait() == 3  # immediate once exited
    run(body())


def test_kill_and_stop_report_the_signal() -> None:
    async def body() -> None:
        async with manager() as m:
            killed = await m.spawn("sleep", ["30"])
            await killed.kill(2000)
            assert not killed.running and killed.exit_signal == 9 and killed.exit_code is None
            assert "exitCode" not in killed.info() and killed.info()["exitSignal"] == 9
            stopped = await m.spawn("sleep", ["30"])
            started = time.monotonic()
            await stopped.stop(2000)
            assert stopped.exit_signal == 15 and time.monotonic() - started < 1.0
    run(body())


def test_stop_signals_the_whole_group() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("sleep 30 & echo $!; wait"))
            grandchild = int((await output_until(p, b"\n")).split()[0])
            assert alive(grandchild)
            await p.stop(2000)
            assert not p.running
            assert await wait_gone(grandchild)
    run(body())


def test_exit_is_noticed_while_a_grandchild_holds_the_pipes() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("sleep 30 & echo $!; exit 0"))
            started = time.monotonic()
            assert await p.wait() == 0
            assert time.monotonic() - started < 1.0
            grandchild = int((await output_until(p, b"\n")).split()[0])
            # Followers are released after the drain grace although the pipe is still open.
            async with asyncio.timeout(3):
                entries = [e async for e in p.logs.follow() if e is not None]
            assert entries and alive(grandchild)
            # The group outlives its leader: stop still reaches it.
            await p.stop(0)
            assert await wait_gone(grandchild)
    run(body())


def test_spawn_failures_name_the_command_and_keep_ids() -> None:
    async def body() -> None:
        async with manager() as m:
            assert (await m.spawn("true")).id == "proc_1"
            with pytest.raises(SpawnError, match="command 'no-such-command-xyz' was not found on PATH") as missing:
                await m.spawn("no-such-command-xyz")
            assert (status_of(missing.value), missing.value.code) == (422, "command_not_found")
            with pytest.raises(SpawnError, match="cwd '/no/such/dir' does not exist") as no_dir:
                await m.spawn("true", cwd="/no/such/dir")
            assert (status_of(no_dir.value), no_dir.value.code) == (422, "cwd_not_found")
            with pytest.raises(InvalidRequest, match="command must not be empty"):
                await m.spawn("  ")
            assert (await m.spawn("true")).id == "proc_2"
            with pytest.raises(NotFound) as missing:
                m.get("proc_9")
            assert missing.value.extensions["details"] == {"resource": "process", "id": "proc_9"}
    run(body())


def test_list_is_in_numeric_order_and_filters_by_owner() -> None:
    async def body() -> None:
        async with manager() as m:
            for i in range(11):
                await m.spawn("true", owner="desktop" if i == 4 else "user")
            ids = [p.id for p in m.list()]
            assert ids == [f"proc_{n}" for n in range(1, 12)]
            assert [p.id for p in m.list("desktop")] == ["proc_5"]
            assert len(m.list("user")) == 10 and m.list("system") == []
    run(body())


def test_exited_processes_are_pruned_oldest_first() -> None:
    async def body() -> None:
        async with manager(max_exited_processes=3) as m:
            sleeper = await m.spawn("sleep", ["30"])
            for _ in range(5):
                await (await m.spawn("true")).wait()
            assert [p.id for p in m.list()] == ["proc_1", "proc_4", "proc_5", "proc_6"]
            assert sleeper.running
            with pytest.raises(NotFound):
                m.get("proc_2")
            m.configure(ProcessConfig(max_exited_processes=1))
            assert [p.id for p in m.list()] == ["proc_1", "proc_6"]
    run(body())


def test_delete_refuses_running_processes() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn("sleep", ["30"])
            with pytest.raises(Conflict, match="still running; stop or kill it"):
                m.delete(p.id)
            await p.kill(1000)
            m.delete(p.id)
            with pytest.raises(NotFound):
                m.get(p.id)
    run(body())


def test_concurrency_limit_counts_running_user_processes_only() -> None:
    async def body() -> None:
        async with manager(max_concurrent_processes=2) as m:
            await m.spawn("true")
            first = await m.spawn("sleep", ["30"])
            await asyncio.sleep(0.2)  # `true` has exited and no longer counts
            await m.spawn("sleep", ["30"])
            with pytest.raises(Conflict, match=r"limit reached \(2\).*maxConcurrentProcesses"):
                await m.spawn("sleep", ["30"])
            await m.spawn("sleep", ["30"], owner="desktop")
            await first.kill(1000)
            await m.spawn("sleep", ["30"])
    run(body())


def test_protected_processes_refuse_api_actions() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn("sleep", ["30"], owner="desktop", protected=True)
            for action in ("stop", "kill", "delete"):
                with pytest.raises(Conflict, match="desktop supervisor; use POST /v1/desktop/stop"):
                    p.refuse_if_protected(action)
            await p.stop(2000)  # the supervisor itself still can
            assert not p.running
            (await m.spawn("true")).refuse_if_protected("stop")
    run(body())


def test_environment_is_exactly_the_one_given() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn("env", env={"ONLY_THIS": "1"})
            await p.wait()
            assert (await output_until(p, b"\n")).decode().strip() == "ONLY_THIS=1"
    run(body())


# -- logs --------------------------------------------------------------------------------------


def test_logs_sequences_streams_since_and_tail() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c"))
            await p.wait()
            await p.finished()
            entries = p.logs.entries()
            assert [(e.sequence, e.stream, e.data) for e in entries] == [
                (1, "stdout", b"a\n"), (2, "stderr", b"b\n"), (3, "stdout", b"c\n")]
            assert [e.sequence for e in p.logs.entries(streams={"stdout"})] == [1, 3]
            assert [e.sequence for e in p.logs.entries(since=1)] == [2, 3]
            assert [e.sequence for e in p.logs.entries(tail=1)] == [3]
            assert [e.sequence for e in p.logs.entries(streams={"stdout"}, since=1, tail=5)] == [3]
            assert p.logs.entries(tail=0) == []
            wire = entries[1].to_wire()
            assert wire == {"sequence": 2, "stream": "stderr", "timestampMs": wire["timestampMs"],
                            "data": "Ygo=", "encoding": "base64"}
            assert p.output_tail(3) == "\nc\n"
    run(body())


def test_output_is_chunked_and_the_buffer_is_capped(tmp_path: Path) -> None:
    async def body() -> None:
        async with manager(max_log_bytes_per_process=20_000) as m:
            log = tmp_path / "logs" / "big.log"
            p = await m.spawn("head", ["-c", "100000", "/dev/urandom"], log_path=log)
            await p.wait()
            await p.finished()
            entries = p.logs.entries()
            assert all(len(e.data) <= 8192 for e in entries)
            assert 20_000 - 8192 < p.logs.size_bytes <= 20_000
            seqs = [e.sequence for e in entries]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[0] > 1
            assert seqs[-1] == p.logs.last_sequence
            file_bytes = log.read_bytes()
            assert len(file_bytes) == 100_000  # the file keeps everything
            assert file_bytes.endswith(b"".join(e.data for e in entries))
    run(body())


def test_followers_are_woken_by_output_and_released_at_the_end() -> None:
    async def body() -> None:
        logs = LogBuffer(1000)
        logs.append("stdout", b"old")
        received: list[Any] = []

        async def follow() -> None:
            async for entry in logs.follow(since=1, heartbeat_s=0.2):
                received.append(entry.data if entry else None)

        task = asyncio.create_task(follow())
        await asyncio.sleep(0.05)
        assert received == []
        started = time.monotonic()
        logs.append("stderr", b"new")
        await asyncio.sleep(0.01)
        assert received == [b"new"] and time.monotonic() - started < 0.1
        await asyncio.sleep(0.3)
        assert None in received  # a heartbeat after 0.2 s of silence
        logs.finish()
        await asyncio.wait_for(task, 1)
        logs.append("stdout", b"late")
        assert [e and e.data async for e in logs.follow(since=2)] == [b"late"]  # finished: no waiting
    run(body())


def test_follow_streams_a_live_process_until_it_exits() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("for i in 1 2 3; do echo $i; sleep 0.1; done"))
            stamps = []
            async for entry in p.logs.follow():
                assert entry is not None
                stamps.append((entry.sequence, entry.data, time.monotonic()))
            assert [(s, d) for s, d, _ in stamps] == [(1, b"1\n"), (2, b"2\n"), (3, b"3\n")]
            assert stamps[2][2] - stamps[0][2] > 0.15  # live, not all at the end
            assert not p.running
    run(body())


def test_log_buffer_drops_the_oldest_entries() -> None:
    logs = LogBuffer(10)
    for i in range(6):
        logs.append("stdout", f"{i}{i}{i}".encode())
    assert [e.data for e in logs.entries()] == [b"333", b"444", b"555"]
    assert logs.entries(since=4)[0].sequence == 5
    logs.append("stdout", b"x" * 25)  # larger than the whole cap: its newest bytes are kept
    assert [e.data for e in logs.entries()] == [b"x" * 10]


# -- input and terminals -----------------------------------------------------------------------


def test_interactive_stdin() -> None:
    async def body() -> None:
        async with manager() as m:
            cat = await m.spawn("cat", interactive=True)
            assert await cat.write_input(b"hello\n") == 6
            await output_until(cat, b"hello\n")
            quiet = await m.spawn("cat")
            await quiet.wait()  # stdin is /dev/null: cat ends at once
            with pytest.raises(Conflict):
                await quiet.write_input(b"x")
            await cat.stop(2000)
            with pytest.raises(Conflict, match="not running"):
                await cat.write_input(b"x")
    run(body())


def test_a_blocked_write_fails_when_the_process_exits() -> None:
    async def body() -> None:
        async with manager() as m:
            deaf = await m.spawn("sleep", ["0.3"], interactive=True)  # never reads its stdin
            started = time.monotonic()
            with pytest.raises(Conflict, match=r"closed its input|exited before reading"):
                await deaf.write_input(b"x" * 1_000_000)  # far more than a pipe holds
            assert time.monotonic() - started < 2.0
            assert await deaf.wait() == 0
            # A background job keeps the pipe open (and full): the exit itself ends the write.
            held = await m.spawn(*sh("exec 3<&0; sleep 30 <&3 & sleep 0.3"), interactive=True)
            started = time.monotonic()
            with pytest.raises(Conflict, match="exited before reading"):
                await held.write_input(b"x" * 1_000_000)
            assert time.monotonic() - started < 2.0
    run(body())


def test_pty_output_input_and_resize() -> None:
    async def body() -> None:
        async with manager() as m:
            p = await m.spawn(*sh("stty size; tty; read x; stty size; echo got $x"), tty=True,
                              env={"PATH": os.environ["PATH"]})
            first = await output_until(p, b"/dev/pts/")
            assert first.startswith(b"24 80\r\n")
            p.resize(132, 50)
            await p.write_input(b"ping\n")
            out = await output_until(p, b"got ping")
            assert b"50 132\r\n" in out
            assert {e.stream for e in p.logs.entries()} == {"pty"}
            assert await p.wait() == 0
            plain = await m.spawn("sleep", ["30"])
            with pytest.raises(Conflict, match="tty mode"):
                plain.resize(80, 24)
    run(body())


def test_pty_gets_a_term_and_ctrl_c_interrupts() -> None:
    async def body() -> None:
        async with manager() as m:
            env = {"PATH": os.environ["PATH"]}
            term = await m.spawn(*sh("echo TERM=$TERM"), tty=True, env=env)
            await output_until(term, b"TERM=xterm-256color")
            # The pty is the controlling terminal: ^C is SIGINT to the foreground job.
            sleeper = await m.spawn("sleep", ["30"], tty=True, env=env)
            await sleeper.write_input(b"\x03")
            async with asyncio.timeout(3):
                assert await sleeper.wait() == -2


# -- one-shot runs -----------------------------------------------------------------------------


def test_run_captures_output_and_exit_code() -> None:
    async def body() -> None:
        async with manager() as m:
            result = await m.run(*sh("echo out; echo err >&2; exit 7"))
            assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
            assert not result.timed_out and not result.stdout_truncated
            assert 0 <= result.duration_ms < 2000
    run(body())


def test_run_timeout_kills_the_group() -> None:
    async def body() -> None:
        async with manager() as m:
            marker = f"/tmp/run-timeout-{os.getpid()}"
            started = time.monotonic()
            result = await m.run(*sh(f"sleep 30 & echo $! > {marker}; wait"), timeout_ms=300)
            assert result.timed_out and result.exit_code is None and result.exit_signal == 9
            assert 250 <= result.duration_ms < 2000 and time.monotonic() - started < 2.0
            grandchild = int(Path(marker).read_text())
            os.unlink(marker)
            assert await wait_gone(grandchild)
    run(body())


def test_run_truncates_and_clamps_to_the_config() -> None:
    async def body() -> None:
        async with manager(max_output_bytes=3000, max_run_timeout_ms=300) as m:
            result = await m.run(*sh("head -c 10000 /dev/zero; echo small >&2"), max_output_bytes=1000)
            assert len(result.stdout) == 1000 and result.stdout_truncated
            assert result.stderr == b"small\n" and not result.stderr_truncated
            capped = await m.run("head", ["-c", "10000", "/dev/zero"], max_output_bytes=10**9)
            assert len(capped.stdout) == 3000 and capped.stdout_truncated
            clamped = await m.run("sleep", ["5"], timeout_ms=60_000)
            assert clamped.timed_out and clamped.duration_ms < 1500
            assert m.config.default_run_timeout_ms == 300  # the default is clamped to the max
    run(body())


def test_run_returns_when_a_grandchild_keeps_the_pipe() -> None:
    async def body() -> None:
        async with manager() as m:
            started = time.monotonic()
            result = await m.run(*sh("sleep 3 & echo done"))
            assert result.stdout == b"done\n" and not result.timed_out
            assert time.monotonic() - started < 1.5
    run(body())


# -- shutdown ----------------------------------------------------------------------------------


def test_shutdown_terminates_then_kills() -> None:
    async def body() -> None:
        m = ProcessManager()
        polite = await m.spawn("sleep", ["30"])
        stubborn = await m.spawn(*sh("trap '' TERM; echo ready; while :; do sleep 0.05; done"))
        await output_until(stubborn, b"ready")
        started = time.monotonic()
        await m.shutdown(grace_s=0.3)
        elapsed = time.monotonic() - started
        assert polite.exit_signal == 15 and stubborn.exit_signal == 9
        assert 0.25 <= elapsed < 2.5
        assert not alive(polite.pid) and not alive(stubborn.pid)
    run(body())


def test_shutdown_reaches_jobs_left_by_exited_processes() -> None:
    async def body() -> None:
        m = ProcessManager()
        p = await m.spawn(*sh("sleep 30 & echo $!"))
        await p.wait()
        grandchild = int((await output_until(p, b"\n")).split()[0])
        assert alive(grandchild)
        await m.shutdown(grace_s=0.3)
        assert await wait_gone(grandchild)
    run(body())
