"""One child process at the OS level: spawn it in its own session, read its output, notice its exit.

The child's stdout/stderr (or its pty) are pipes we create and read ourselves, so its exit is
reported the moment it happens even when a grandchild keeps the pipes open (the reference's
clipboard hang). Every child leads its own session and process group, so a signal sent to the
group reaches the shell's children too.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import struct
import subprocess
import termios
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from desktop.core.errors import Conflict, InvalidRequest, StreamError, Timeout
from desktop.processes.logs import CHUNK_BYTES, now_ms
from desktop.processes.spawn_errors import DESKTOP_USER, SERVER_USER, spawn_error
from sandbox_desktop_wire.enums import LogStream

logger = logging.getLogger("sandbox_desktop.processes")

OutputSink = Callable[[LogStream, bytes], None]
"""Receives each chunk of output (at most `CHUNK_BYTES`) as it is read."""

DEFAULT_TERMINAL_SIZE = (80, 24)
INPUT_TIMEOUT_S = 5.0
"""How long a write to a child's input may wait for the child to read."""


class InputNotRead(Timeout):
    """Input the process did not read in time. The process's state, not a fault of the server, so a
    409 that keeps the `timeout` code (docs/processes.md, "Input"), as api/http/problems.py renders it."""


class Running(Protocol):
    """A started program as a `Child` watches it: on the server's machine (`_HostProcess`) or in a desktop's
    sandbox (desktop/sandbox/process.py)."""

    pid: int
    """Its pid as the server's pid namespace numbers it (signals, /proc)."""
    exited: asyncio.Event
    callbacks: list[Callable[[], None]]

    @property
    def returncode(self) -> int | None: ...

    @property
    def exited_at_ms(self) -> int | None: ...

    def close(self) -> None: ...


class Launcher(Protocol):
    """Where a program starts other than here: a desktop's sandbox (desktop/sandbox/sandbox.py).

    `fds` maps each descriptor number the program gets to ours; the call raises OSError as a local start
    would (ENOENT for a missing program...)."""

    async def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, fds: Mapping[int, int],
                    tty: bool = False) -> Launched: ...


class Launched(Running, Protocol):
    @property
    def sandbox_pid(self) -> int:
        """Its pid as the programs around it see it (its windows' `_NET_WM_PID`, `ps` in a terminal)."""


class _ExitProtocol(asyncio.SubprocessProtocol):
    """Records the exit; the child's stdio never goes through the transport."""

    def __init__(self) -> None:
        self.exited = asyncio.Event()
        self.exited_at_ms: int | None = None
        self.callbacks: list[Callable[[], None]] = []

    def process_exited(self) -> None:
        self.exited_at_ms = now_ms()
        self.exited.set()
        for callback in self.callbacks:
            try:
                callback()
            except Exception:
                logger.exception("exit callback %r failed", callback)


class _HostProcess:
    """A program started here with asyncio's subprocess machinery, as `Running`."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _ExitProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.pid: int = transport.get_pid()
        self.exited = protocol.exited
        self.callbacks = protocol.callbacks

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode() if self._protocol.exited.is_set() else None

    @property
    def exited_at_ms(self) -> int | None:
        return self._protocol.exited_at_ms

    def close(self) -> None:
        if self._protocol.exited.is_set():
            self._transport.close()  # closing earlier would kill the child


class _Reader(asyncio.Protocol):
    """Feeds one output fd to the sink in chunks of at most `CHUNK_BYTES`."""

    def __init__(self, stream: LogStream, sink: OutputSink) -> None:
        self.stream = stream
        self.sink = sink
        self.eof = asyncio.Event()
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK_BYTES):
            self.sink(self.stream, data[start:start + CHUNK_BYTES])

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        # A pty master reports EIO once the last slave holder is gone: that is its EOF.
        self.eof.set()


class Child:
    """A running (or exited) child: its pid, exit status, output readers and input fd."""

    def __init__(self, process: Running, readers: list[_Reader], input_fd: int | None, pty_fd: int | None,
                 visible_pid: int | None = None) -> None:
        self._process = process
        self._readers = readers
        self._input_fd = input_fd
        self._pty_fd = pty_fd  # the master (a dup of the reader's), for input and resize
        self._write_lock = asyncio.Lock()  # concurrent writes must not interleave
        self._writable: asyncio.Future[None] | None = None  # set while a write waits for room
        self.pid: int = process.pid
        """The server's pid of it: what signals and /proc use."""
        self.visible_pid: int = visible_pid if visible_pid is not None else process.pid
        """Its pid where it runs: in a sandbox, the sandbox's number (what its windows and its neighbours see)."""

    @property
    def returncode(self) -> int | None:
        """Exit status once exited: the exit code, or minus the signal number."""
        return self._process.returncode

    @property
    def exited_at_ms(self) -> int | None:
        return self._process.exited_at_ms

    @property
    def accepts_input(self) -> bool:
        return self._input_fd is not None

    def add_exit_callback(self, callback: Callable[[], None]) -> None:
        """Call `callback` as soon as the exit is known (right now, if it already is)."""
        if self._process.exited.is_set():
            callback()
        else:
            self._process.callbacks.append(callback)

    async def wait(self) -> int:
        """The return code, once the child has exited (cancel-safe)."""
        await self._process.exited.wait()
        code = self._process.returncode
        assert code is not None
        return code

    def signal_group(self, sig: int) -> bool:
        """Signal the child's process group; False if nothing was left to signal.

        After the leader exited, its group may live on (a shell's background jobs): Linux does
        not reuse a pid while a process group still carries it, so signalling it stays safe.
        """
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError as exc:
            raise StreamError(f"cannot signal process group {self.pid}: {exc.strerror}") from exc
        return True

    async def write(self, data: bytes, timeout_s: float = INPUT_TIMEOUT_S) -> int:
        """Write all of `data` to the child's stdin or pty; the bytes written."""
        async with self._write_lock:
            return await self._write(data, timeout_s)

    async def _write(self, data: bytes, timeout_s: float) -> int:
        fd = self._input_fd
        if fd is None:
            raise Conflict("process does not accept input")
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        written = 0
        deadline = loop.time() + timeout_s
        while written < len(data):
            try:
                written += os.write(fd, view[written:])
                continue
            except BlockingIOError:
                pass
            except OSError as exc:
                raise Conflict(f"process closed its input after {written} bytes ({exc.strerror})") from exc
            self._writable = loop.create_future()
            loop.add_writer(fd, _resolve, self._writable)
            try:
                async with asyncio.timeout_at(deadline):
                    await self._writable
            except TimeoutError:
                raise InputNotRead(f"process did not read its input within {timeout_s:.0f} s "
                                   f"({written} of {len(data)} bytes written)") from None
            finally:
                if self._input_fd == fd:  # else close_input() already unregistered it
                    loop.remove_writer(fd)
                self._writable = None
        return written

    def resize(self, cols: int, rows: int) -> None:
        """Set the pty window size; the kernel sends SIGWINCH to the foreground job."""
        if self._pty_fd is None:
            raise Conflict("process is not running in tty mode")
        set_window_size(self._pty_fd, cols, rows)

    def close_input(self) -> None:
        """Close our end of stdin (the child sees EOF) and the pty control fd."""
        if self._writable is not None and self._input_fd is not None:
            # A write is waiting for room: unregister before the fd number can be reused.
            asyncio.get_running_loop().remove_writer(self._input_fd)
            if not self._writable.done():
                self._writable.set_exception(Conflict("process exited before reading all its input"))
        for fd in (self._input_fd, self._pty_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._input_fd = self._pty_fd = None

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every output fd reached EOF; False if some are still open after `timeout_s`."""
        pending = [r.eof.wait() for r in self._readers if not r.eof.is_set()]
        if not pending:
            return True
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*pending)
        except TimeoutError:
            return False
        return True

    async def wait_eof(self) -> None:
        """Wait until every output fd reached EOF or was closed."""
        await asyncio.gather(*(r.eof.wait() for r in self._readers))

    def close(self) -> None:
        """Release every fd and transport we hold (output still in flight is dropped)."""
        self.close_input()
        for reader in self._readers:
            if reader.transport is not None:
                reader.transport.close()
            reader.eof.set()
        self._process.close()


async def start_child(
    command: str,
    args: Sequence[str],
    *,
    sink: OutputSink,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    tty: bool = False,
    stdin: bool = False,
    pass_fds: Sequence[int] = (),
    launcher: Launcher | None = None,
) -> Child:
    """Spawn `command` in a new session (in `launcher`'s sandbox, if given); output goes to `sink` from the
    first byte.

    With `tty`, stdin/stdout/stderr are one pty (stream "pty", input always possible); otherwise
    stdout and stderr are separate pipes and stdin is a pipe only if `stdin` is set.
    """
    loop = asyncio.get_running_loop()
    ours: list[int] = []      # fds we keep: output read ends, input write end, pty master
    theirs: list[int] = []    # the child's ends, closed here once it has them
    try:
        if tty:
            master, slave = os.openpty()
            ours.append(master)
            theirs.append(slave)
            set_window_size(master, *DEFAULT_TERMINAL_SIZE)
            stdio = (slave, slave, slave)
            outputs: list[tuple[LogStream, int]] = [(LogStream.PTY, master)]
        else:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            ours += [out_r, err_r]
            theirs += [out_w, err_w]
            in_fd: int = subprocess.DEVNULL
            if stdin:
                in_r, in_w = os.pipe()
                ours.append(in_w)
                theirs.append(in_r)
                in_fd = in_r
            stdio = (in_fd, out_w, err_w)
            outputs = [(LogStream.STDOUT, out_r), (LogStream.STDERR, err_r)]
        process: Running
        visible_pid: int | None = None
        if launcher is not None:
            if stdio[0] == subprocess.DEVNULL:
                null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                theirs.append(null)
                stdio = (null, stdio[1], stdio[2])
            launched = await launcher.spawn(
                [command, *args], os.environ if env is None else env, cwd,
                {0: stdio[0], 1: stdio[1], 2: stdio[2], **{fd: fd for fd in pass_fds}}, tty=tty)
            process, visible_pid = launched, launched.sandbox_pid
        else:
            transport, protocol = await loop.subprocess_exec(
                _ExitProtocol, command, *args,
                stdin=stdio[0], stdout=stdio[1], stderr=stdio[2],
                cwd=cwd, env=dict(env) if env is not None else None,
                start_new_session=True, pass_fds=tuple(pass_fds),
                preexec_fn=_claim_controlling_tty if tty else None,
            )
            process = _HostProcess(transport, protocol)
    except BaseException as exc:
        for fd in ours:
            os.close(fd)
        if isinstance(exc, OSError):
            raise spawn_error(command, cwd, env, exc, DESKTOP_USER if launcher is not None else SERVER_USER) from exc
        if isinstance(exc, ValueError):  # e.g. an embedded NUL in an argument
            raise InvalidRequest(f"cannot start {command!r}: {exc}") from exc
        raise
    finally:
        for fd in theirs:
            os.close(fd)

    pty_fd = os.dup(outputs[0][1]) if tty else None  # the reader owns the master; input and resize use a dup
    input_fd = pty_fd if tty else (ours[-1] if stdin else None)
    if input_fd is not None:
        os.set_blocking(input_fd, False)
    readers: list[_Reader] = []
    try:
        for stream, fd in outputs:
            readers.append(await _read(loop, fd, _Reader(stream, sink)))
    except BaseException:
        # Cancelled half-way: nobody will own this child, so it must not outlive the call.
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.close()
        for reader in readers:
            if reader.transport is not None:
                reader.transport.close()
        for fd in [fd for _, fd in outputs[len(readers) + 1:]] + [f for f in (input_fd,) if f is not None]:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return Child(process, readers, input_fd, pty_fd, visible_pid)


async def _read(loop: asyncio.AbstractEventLoop, fd: int, reader: _Reader) -> _Reader:
    """Attach `reader` to `fd`; the transport owns the fd from now on."""
    await loop.connect_read_pipe(lambda: reader, os.fdopen(fd, "rb", buffering=0))
    return reader


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def set_window_size(fd: int, cols: int, rows: int) -> None:
    """TIOCSWINSZ on a pty."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _claim_controlling_tty() -> None:
    # Runs in the child after setsid(): make the pty (now fd 0) the session's terminal, so
    # job control, Ctrl-C and SIGWINCH work as in a real terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)

