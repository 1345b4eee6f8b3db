"""`/v1/processes/{id}/terminal/ws`: a tty process's terminal over a WebSocket, against a real server.

No desktop: the processes are shells and `cat` on their own pseudo-terminals.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from api.server.logs import DenialNoiseFilter
from tests.conftest import XAUTHORITY, ServerProcess, assert_problem, poll, run, running_server, wait_for
from tests.support.paths import SDK_DIR

NODE = shutil.which("node")
SHUTDOWN_LIMIT_S = 5.0


# -- helpers -----------------------------------------------------------------------------------

def terminal_url(base: str, process_id: str, token: str | None) -> str:
    """The socket's URL, with the token (if any) as `access_token` as the SDK sends it."""
    url = base.replace("http://", "ws://", 1) + f"/v1/processes/{process_id}/terminal/ws"
    return url + (f"?access_token={quote(token)}" if token else "")


def url_of(server: ServerProcess, process_id: str) -> str:
    return terminal_url(server.url, process_id, server.token)


def spawn(api: httpx.Client, command: str, *args: str, tty: bool = True, **extra: Any) -> str:
    """Start a process through the API; its id."""
    response = api.post("/v1/processes", json={"command": command, "args": list(args), "tty": tty, **extra})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def end(api: httpx.Client, process_id: str) -> None:
    """Kill and forget a process a test started."""
    api.post(f"/v1/processes/{process_id}/kill", params={"waitMs": 2000})
    api.delete(f"/v1/processes/{process_id}")


def children(pid: int) -> list[str]:
    """Names of the live processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                name, rest = (entry / "stat").read_text().rsplit(")", 1)
                if int(rest.split()[1]) == pid and rest.split()[0] != "Z":
                    found.append(name.split("(", 1)[1])
    return found


class Term:
    """The client side of a terminal socket: the output bytes and control frames received so far."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.output = bytearray()
        self.controls: list[dict[str, Any]] = []
        self.frames: list[str] = []  # "bytes" or the control frame's type, in arrival order

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[Term]:
        async with connect(url, open_timeout=10, max_size=None) as ws:
            yield cls(ws)

    async def send(self, **frame: Any) -> None:
        await self.ws.send(json.dumps(frame))

    async def type(self, text: str) -> None:
        await self.send(type="input", data=text)

    async def receive(self) -> bool:
        """One frame into `output` or `controls`; False once the socket has closed."""
        try:
            message = await self.ws.recv()
        except ConnectionClosed:
            return False
        if isinstance(message, bytes):
            self.output += message
            self.frames.append("bytes")
        else:
            self.controls.append(json.loads(message))
            self.frames.append(self.controls[-1]["type"])
        return True

    async def until(self, check: Callable[[], Any], what: str, timeout: float = 10) -> Any:
        """Receive until `check()` is truthy (returned), or fail naming `what`."""
        try:
            async with asyncio.timeout(timeout):
                while not (value := check()):
                    if not await self.receive():
                        raise AssertionError(f"the socket closed ({self.ws.close_code}) before {what}: {self}")
                return value
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}: {self}") from None

    async def sees(self, needle: bytes, timeout: float = 10) -> None:
        await self.until(lambda: needle in self.output, repr(needle), timeout)

    async def control(self, kind: str, count: int = 1) -> dict[str, Any]:
        """The `count`-th control frame of this type."""
        def found() -> dict[str, Any] | None:
            matching = [c for c in self.controls if c["type"] == kind]
            return matching[count - 1] if len(matching) >= count else None
        result: dict[str, Any] = await self.until(found, f"{count} {kind} frame(s)")
        return result

    async def closed(self, timeout: float = 10) -> int | None:
        """Receive until the server closes the socket; its close code."""
        async with asyncio.timeout(timeout):
            while await self.receive():
                pass
        return self.ws.close_code

    def __str__(self) -> str:
        return f"output ...{bytes(self.output[-300:])!r}, controls {self.controls}"


@contextlib.contextmanager
def process(api: httpx.Client, command: str, *args: str, **extra: Any) -> Iterator[str]:
    """A process started through the API (`spawn`): its id; killed and forgotten on leaving, whatever happened."""
    process_id = spawn(api, command, *args, **extra)
    try:
        yield process_id
    finally:
        end(api, process_id)


def in_terminal(server: ServerProcess, process_id: str, scenario: Callable[[Term], Awaitable[None]]) -> None:
    """Run `scenario` on a socket opened to the process's terminal."""
    async def session() -> None:
        async with Term.open(url_of(server, process_id)) as term:
            await scenario(term)
    run(session)


async def handshake_refusal(url: str) -> tuple[int, str, dict[str, Any]]:
    """Status, content type and JSON body of a refused handshake."""
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, open_timeout=10):
            pass
    response = refused.value.response
    return response.status_code, response.headers.get("content-type", ""), json.loads(bytes(response.body or b""))


# -- the session -------------------------------------------------------------------------------

def test_ready_then_the_backlog_then_live_output(srv: ServerProcess, api: httpx.Client) -> None:
    with process(api, "sh", "-c", "echo before-connect; exec cat") as pid:
        wait_for(lambda: api.get(f"/v1/processes/{pid}/logs").json()["entries"], "the early output")

        async def scenario(term: Term) -> None:
            await term.control("ready")
            assert term.controls[0] == {"type": "ready", "processId": pid}
            assert term.frames[0] == "ready", term.frames  # before any output, the backlog included
            await term.sees(b"before-connect\r\n")
            await term.type("live line\n")
            await term.sees(b"live line\r\nlive line\r\n")  # the terminal's echo, then cat's copy
        in_terminal(srv, pid, scenario)


def test_output_arrives_complete_and_in_order_across_the_backlog_boundary(
        srv: ServerProcess, api: httpx.Client) -> None:
    # The socket opens while the first half is being written or right after: part backlog, part live.
    with process(api, "sh", "-c", "seq 1 100000; sleep 0.3; seq 100001 200000") as pid:
        wait_for(lambda: api.get(f"/v1/processes/{pid}/logs").json()["entries"], "the first output")
        expected = b"".join(b"%d\r\n" % i for i in range(1, 200_001))

        async def scenario(term: Term) -> None:
            began = time.monotonic()
            assert await term.closed(30) == 1000
            took = time.monotonic() - began
            assert term.controls[-1] == {"type": "exit", "exitCode": 0}
            assert term.frames[-1] == "exit"  # every byte of output came before it
            assert bytes(term.output) == expected
            print(f"\n{len(expected) / 1e6:.1f} MB in {term.frames.count('bytes')} binary frames, "
                  f"{took * 1000:.0f} ms from connect to the exit frame")
        in_terminal(srv, pid, scenario)


def test_input_in_every_encoding(srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        await term.type("héllo ✓ 日本語 default\n")  # the SDK sends strings without an encoding
        await term.sees("héllo ✓ 日本語 default\r\n".encode() * 2)
        await term.send(type="input", data="explicit utf8\n", encoding="utf8")
        await term.sees(b"explicit utf8\r\n" * 2)
        await term.send(type="input", data="as text\n", encoding="text")
        await term.sees(b"as text\r\n" * 2)
        await term.send(type="input", data=base64.b64encode("bäse64 ✓\n".encode()).decode(), encoding="base64")
        await term.sees("bäse64 ✓\r\n".encode() * 2)
        assert [c["type"] for c in term.controls] == ["ready"]
    with process(api, "cat") as pid:
        in_terminal(srv, pid, scenario)


def test_resize_reaches_the_child(srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        await term.send(type="resize", cols=132, rows=40)
        # A command typed before the shell's prompt is echoed first, so the answer may follow the
        # prompt ("# 19 77") rather than start a line: match the answer, not what precedes it.
        await term.type("stty size\n")
        await term.sees(b"40 132\r\n")
        await term.send(type="resize", cols=77, rows=19)
        await term.type("stty size\n")
        await term.sees(b"19 77\r\n")
        assert [c["type"] for c in term.controls] == ["ready"]
    with process(api, "sh") as pid:
        in_terminal(srv, pid, scenario)


def test_ctrl_c_interrupts_the_foreground_job(srv: ServerProcess, api: httpx.Client) -> None:
    with process(api, "sh") as pid:
        shell_pid = int(api.get(f"/v1/processes/{pid}").json()["pid"])

        async def scenario(term: Term) -> None:
            await term.type("sleep 60\n")
            await asyncio.to_thread(wait_for, lambda: "sleep" in children(shell_pid), "sleep to run")
            began = time.monotonic()
            await term.type("\u0003")
            await term.type("echo status=$?\n")
            await term.sees(b"status=130")
            assert time.monotonic() - began < 30
            assert "sleep" not in children(shell_pid)
            assert api.get(f"/v1/processes/{pid}").json()["status"] == "running"  # only the job was interrupted
        in_terminal(srv, pid, scenario)


# -- the end of a session ------------------------------------------------------------------------

def test_exit_frame_then_a_normal_close(srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        await term.type("echo bye; exit 7\n")
        assert await term.closed() == 1000
        assert term.controls[-1] == {"type": "exit", "exitCode": 7}
        assert term.output.endswith(b"bye\r\n"), term
    with process(api, "sh") as pid:
        in_terminal(srv, pid, scenario)
        assert api.get(f"/v1/processes/{pid}").json()["exitCode"] == 7


def test_a_killed_process_exits_without_a_code(srv: ServerProcess, api: httpx.Client) -> None:
    with process(api, "cat") as pid:
        async def scenario(term: Term) -> None:
            await term.control("ready")
            await asyncio.to_thread(api.post, f"/v1/processes/{pid}/kill")
            assert await term.closed() == 1000
            assert term.controls[-1] == {"type": "exit", "exitCode": None, "exitSignal": 9}
        in_terminal(srv, pid, scenario)


def test_an_exited_process_replays_its_output_and_exit(srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        assert await term.closed() == 1000
        assert term.frames == ["ready", "bytes", "exit"]
        assert bytes(term.output) == b"all done\r\n"
        assert term.controls[-1] == {"type": "exit", "exitCode": 3}
    with process(api, "sh", "-c", "echo all done; exit 3") as pid:
        wait_for(lambda: api.get(f"/v1/processes/{pid}").json()["status"] == "exited", "the exit")
        in_terminal(srv, pid, scenario)


def test_a_close_frame_closes_the_socket_not_the_process(srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        await term.control("ready")
        await term.send(type="close")
        assert await term.closed() == 1000
        assert [c["type"] for c in term.controls] == ["ready"]
    with process(api, "cat") as pid:
        in_terminal(srv, pid, scenario)
        assert api.get(f"/v1/processes/{pid}").json()["status"] == "running"


# -- bad frames, several sockets, refusals -------------------------------------------------------

BAD_FRAMES: list[tuple[str | bytes, str]] = [
    ("not json", "Invalid JSON"),
    ("[1, 2]", "Input should be an object"),
    ("{}", "discriminator 'type'"),
    (json.dumps({"type": "paste", "data": "x"}), "'paste'"),
    (json.dumps({"type": "input"}), "data: Field required"),
    (json.dumps({"type": "input", "data": 5}), "data: Input should be a valid string"),
    (json.dumps({"type": "input", "data": "x", "encoding": "rot13"}), "encoding"),
    (json.dumps({"type": "input", "data": "%%%", "encoding": "base64"}), "base64"),
    (json.dumps({"type": "input", "data": "x" * 65_537}), "maxInputBytesPerRequest (65536)"),
    (json.dumps({"type": "resize", "cols": 0, "rows": 24}), "cols: Input should be greater than or equal to 1"),
    (json.dumps({"type": "resize", "cols": 80, "rows": 65_536}), "rows: Input should be less than or equal to 65535"),
    (json.dumps({"type": "resize", "cols": 80}), "rows: Field required"),
    (b"\x03binary", "binary frames are not accepted"),
]


def test_bad_frames_are_answered_with_error_frames_and_the_session_goes_on(
        srv: ServerProcess, api: httpx.Client) -> None:
    async def scenario(term: Term) -> None:
        for number, (frame, names) in enumerate(BAD_FRAMES, start=1):
            await term.ws.send(frame)
            error = await term.control("error", number)
            assert set(error) == {"type", "message"} and names in error["message"], (frame[:80], error)
        await term.type("still here\n")
        await term.sees(b"still here\r\nstill here\r\n")
        assert len(term.controls) == 1 + len(BAD_FRAMES)
        assert term.output == b"still here\r\nstill here\r\n"  # nothing of the bad frames reached cat
    with process(api, "cat") as pid:
        in_terminal(srv, pid, scenario)


def test_several_sockets_share_one_terminal(srv: ServerProcess, api: httpx.Client) -> None:
    with process(api, "cat") as pid:
        async def scenario() -> None:
            async with Term.open(url_of(srv, pid)) as first, Term.open(url_of(srv, pid)) as second:
                await first.control("ready")
                await second.control("ready")
                await first.type("from the first\n")
                await first.sees(b"from the first\r\n" * 2)
                await second.sees(b"from the first\r\n" * 2)
                await second.type("from the second\n")
                await first.sees(b"from the second\r\n" * 2)
                await first.ws.close()
                await second.type("after one left\n")
                await second.sees(b"after one left\r\n" * 2)
                assert first.output == second.output[:len(first.output)]
        run(scenario)


def test_handshakes_are_refused_with_problems(srv: ServerProcess, api: httpx.Client) -> None:
    with process(api, "cat", tty=False, interactive=True) as plain, process(api, "cat") as pid:
        async def scenario() -> None:
            status, kind, body = await handshake_refusal(url_of(srv, plain))
            assert (status, kind, body["code"]) == (409, "application/problem+json", "conflict"), body
            assert "not running in tty mode" in body["detail"]
            status, kind, body = await handshake_refusal(url_of(srv, "proc_99999"))
            assert (status, kind, body["code"]) == (404, "application/problem+json", "not_found"), body
            assert body["details"] == {"resource": "process", "id": "proc_99999"}
            for token in (None, "wrong", (srv.token or "")[:-1]):
                status, _, body = await handshake_refusal(terminal_url(srv.url, pid, token))
                assert (status, body["code"]) == (401, "token_invalid"), token
            # The header works as well as the query parameter.
            async with connect(terminal_url(srv.url, pid, None), open_timeout=10,
                               additional_headers={"Authorization": f"Bearer {srv.token}"}) as ws:
                assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"type": "ready", "processId": pid}
        run(scenario)
        plain_get = api.get(f"/v1/processes/{pid}/terminal/ws")  # curl, not a WebSocket client
        assert "this endpoint is a WebSocket" in str(assert_problem(plain_get, 426, "upgrade_required")["detail"])
        assert plain_get.headers["upgrade"] == "websocket"
        # A refusal is a complete exchange, not an error: nothing for an operator to chase in the log.
        assert "without completing handshake" not in srv.log() and "Traceback" not in srv.log()


def test_the_socket_is_refused_when_the_process_api_is_off(
        server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory("--no-process-api")

    async def scenario() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url_of(server, "proc_1"), open_timeout=10):
                pass
        assert refused.value.response.status_code == 403
    run(scenario)


def test_keystroke_echo_latency(srv: ServerProcess, api: httpx.Client) -> None:
    """A figure, not a bound: the round trip of one key through the socket, the pty and its echo."""
    async def scenario(term: Term) -> None:
        await term.control("ready")
        took = []
        for keys in range(1, 201):
            began = time.perf_counter()
            await term.type("k")
            await term.until(lambda: len(term.output) >= keys, "the echo")  # noqa: B023 - awaited here
            took.append(time.perf_counter() - began)
        assert bytes(term.output) == b"k" * 200
        print(f"\nkeystroke echo over the socket: median {statistics.median(took) * 1000:.2f} ms, "
              f"p95 {statistics.quantiles(took, n=20)[-1] * 1000:.2f} ms (200 keys)")
    with process(api, "cat") as pid:
        in_terminal(srv, pid, scenario)


# -- shutdown and leaks --------------------------------------------------------------------------

def test_open_terminals_do_not_hold_up_sigterm(tmp_path: Path) -> None:
    with running_server(tmp_path, "--log-level", "info") as server:
        with server.client() as api:
            idle = spawn(api, "cat")  # not an interactive sh: it ignores SIGTERM, adding the 2 s grace
            ticking = spawn(api, "sh", "-c", "while :; do echo tick; sleep 0.02; done")
            flood = spawn(api, "yes")

        async def scenario() -> tuple[float, float, list[int | None]]:
            async with Term.open(url_of(server, idle)) as a, Term.open(url_of(server, idle)) as b, \
                    Term.open(url_of(server, ticking)) as c, Term.open(url_of(server, flood)) as stalled:
                await asyncio.gather(a.control("ready"), b.control("ready"), c.sees(b"tick"), stalled.sees(b"y\r\n"))
                await asyncio.sleep(0.5)  # `stalled` reads no more: the server's sends to it block
                began = time.monotonic()
                server.proc.terminate()
                codes = await asyncio.gather(*(t.closed(SHUTDOWN_LIMIT_S) for t in (a, b, c)))
                closed = time.monotonic() - began
                await asyncio.to_thread(server.proc.wait, SHUTDOWN_LIMIT_S)
                took = time.monotonic() - began
                stalled.ws.transport.abort()  # its unread flood would hold up the client's closing handshake
                return closed, took, codes

        closed, took, codes = run(scenario)
        print(f"\nSIGTERM -> sockets closed in {closed * 1000:.0f} ms ({codes}), server exited in "
              f"{took * 1000:.0f} ms, with 4 terminal sockets open (one not reading a flood)")
        assert took < SHUTDOWN_LIMIT_S
        assert all(code in (1001, 1012) for code in codes), codes  # going away / service restart
        # Every session ended by itself: uvicorn did not have to cancel one after its 4 s grace.
        assert "graceful shutdown exceeded" not in server.log() and "Traceback" not in server.log(), server.log()


def test_no_task_thread_or_fd_outlives_the_sessions(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The app in this process (so its tasks, threads and fds are visible), sessions ended every way."""
    import uvicorn

    from api.app import create_app
    from api.server.config import ServerConfig
    from tests.conftest import free_port

    app = create_app(ServerConfig(token="t0k", state_dir=tmp_path / "state", xauthority=XAUTHORITY))
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    def url(process_id: str) -> str:
        return terminal_url(base, process_id, "t0k")

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def scenario() -> None:
        # log_config=None: records reach caplog, so an exception in a session fails the test.
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
        serving = asyncio.create_task(server.serve())
        try:
            await poll(lambda: server.started, "the in-process server")
            async with httpx.AsyncClient(base_url=base, headers={"Authorization": "Bearer t0k"}, timeout=30) as api:
                async def start(*command: str, tty: bool = True) -> str:
                    response = await api.post("/v1/processes", json={"command": command[0], "args": command[1:],
                                                                     "tty": tty, "interactive": True})
                    return str(response.json()["id"])

                cat, shell, plain = await start("cat"), await start("sh"), await start("cat", tty=False)
                baseline_tasks, threads, baseline_fds = asyncio.all_tasks(), set(threading.enumerate()), fds()
                current = asyncio.current_task()
                for _ in range(3):
                    async with Term.open(url(cat)) as term:  # the client closes
                        await term.type("x\n")
                        await term.sees(b"x\r\nx\r\n")
                    async with Term.open(url(cat)) as term:  # a close frame
                        await term.send(type="close")
                        assert await term.closed() == 1000
                    async with Term.open(url(cat)) as term:  # the connection just drops
                        await term.control("ready")
                        term.ws.transport.abort()
                    assert (await handshake_refusal(url(plain)))[0] == 409
                    assert (await handshake_refusal(url("proc_404")))[0] == 404
                async with Term.open(url(shell)) as one, Term.open(url(shell)) as two:
                    await asyncio.gather(one.control("ready"), two.control("ready"))
                    await one.type("exit 0\n")  # the process ends both sessions
                    assert await asyncio.gather(one.closed(), two.closed()) == [1000, 1000]

                await poll(lambda: not asyncio.all_tasks() - baseline_tasks - {current}, "the sessions' tasks to end")
                await poll(lambda: fds() <= baseline_fds, "the sockets' fds to close")
                # Polled as the tasks and fds are: a short-lived thread of the server's own (the network slot pool's
                # `netns` thread, desktop/sandbox/nethost.py) may still be ending as the check runs.
                await poll(lambda: set(threading.enumerate()) <= threads, "the sessions' threads to end")
        finally:
            server.should_exit = True
            await serving
    run(scenario)
    noise = DenialNoiseFilter()  # the server drops uvicorn's false alarm after a refused handshake too
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and noise.filter(r)]
    assert not errors, errors


# -- the reference SDK -------------------------------------------------------------------------

@pytest.mark.skipif(NODE is None, reason="node is not installed (the SDK compatibility test needs Node 20+)")
@pytest.mark.skipif(not (SDK_DIR / "node_modules" / "sandbox-agent").is_dir(),
                    reason="tests/sdk/node_modules is missing: run `npm ci` in tests/sdk")
def test_the_reference_sdk_terminal_client(srv: ServerProcess) -> None:
    """tests/sdk/terminal.mjs drives `connectProcessTerminal` (sandbox-agent@0.4.2) as <ProcessTerminal> does."""
    assert NODE is not None and srv.token
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True).stdout
    major = int(version.lstrip("v").split(".")[0])
    flags = ["--experimental-websocket"] if major < 22 else []  # a global WebSocket, built in from Node 22
    env = dict(os.environ, SANDBOX_URL=srv.url, SANDBOX_TOKEN=srv.token)
    done = subprocess.run([NODE, *flags, "terminal.mjs"], cwd=SDK_DIR, env=env, capture_output=True, text=True,
                          timeout=120)
    checks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = [f"{c['method']}: {c['detail']}" for c in checks if not c["ok"]]
    assert checks and not failed and done.returncode == 0, (
        f"exit {done.returncode}, failed: {failed}\n{done.stdout}\n{done.stderr}\n"
        f"--- server log ---\n{srv.log()[-3000:]}")
    assert len(checks) >= 10, done.stdout
