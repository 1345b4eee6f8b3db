"""Start Xvfb on a free display without races, and know when it is ready.

Xvfb takes its display's lock file atomically and exits at once when the display is taken, so
"try N, then N+1" is race-free; `-displayfd` tells us the moment it accepts connections, and a
real X connection confirms it (docs/desktop.md).

The screen is created at the desktop's framebuffer size, the largest it may take at runtime (Xvfb's
RandR allows sizes up to its start size only), and switched to the asked size before anything else
connects (docs/display.md).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path

from desktop.core.errors import DesktopFailed
from desktop.lifecycle.options import framebuffer_size
from desktop.processes import ManagedProcess, ProcessManager
from desktop.processes.child import Launcher
from desktop.x11.randr import apply_display
from desktop.x11.thread import open_display
from sandbox_desktop_wire.enums import ProcessOwner

READY_TIMEOUT_S = 15.0
DISPLAY_ATTEMPTS = 10


def display_in_use(num: int) -> bool:
    """A cheap pre-check: a lock file whose owner is alive, or a socket an X server answers on, means the display
    is taken (the socket too: a lock file can be gone while its server still runs, e.g. after a /tmp clean-up)."""
    lock = Path(f"/tmp/.X{num}-lock")
    try:
        pid = int(lock.read_text().strip())
    except (OSError, ValueError):
        return _socket_answers(num)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return _socket_answers(num)
    except PermissionError:
        return True
    return True


def _socket_answers(num: int) -> bool:
    path = f"/tmp/.X11-unix/X{num}"
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


def xvfb_args(num: int, width: int, height: int, dpi: int, displayfd: int, opengl: bool = False) -> list[str]:
    """Xvfb's command line for a `width`x`height` framebuffer (the largest size RandR may switch to).

    -noreset: keep server state when the last client disconnects (e.g. while openbox restarts); without
    it the RandR modes a client added vanish with that client (docs/display.md).
    -extension GLX unless `opengl`: GLX loads Mesa's software renderer and LLVM into the X server at its start,
    ~11 MB of private memory and ~40 ms of every start, for X clients that draw with OpenGL; Chromium and
    Firefox draw without it (docs/display.md "OpenGL").
    """
    return [f":{num}", "-screen", "0", f"{width}x{height}x24", "-dpi", str(dpi), "-nolisten", "tcp",
            "-noreset", "-displayfd", str(displayfd), *(() if opengl else ("-extension", "GLX"))]


async def switch_to(display: str, width: int, height: int, dpi: int) -> None:
    """Set a freshly started server's screen to `width`x`height` at `dpi` (one short connection of its own)."""
    conn = await asyncio.to_thread(open_display, display)
    try:
        await asyncio.to_thread(apply_display, conn, width, height, dpi)
    finally:
        await asyncio.to_thread(conn.close)


async def await_announcement(read_fd: int, proc: ManagedProcess, timeout: float) -> bytes | None:
    """What a child writes to `read_fd` once it is ready (Xvfb's display, dbus's address); None if it exits first."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bytes] = loop.create_future()
    received = bytearray()

    def on_readable() -> None:
        # Read up to the newline: Xvfb writes the number and "\n" separately, and dies of EPIPE
        # if we close the pipe in between.
        if ready.done():
            return
        try:
            chunk = os.read(read_fd, 256)
        except OSError as exc:
            ready.set_exception(exc)
            return
        received.extend(chunk)
        if not chunk or b"\n" in received:
            ready.set_result(bytes(received))

    loop.add_reader(read_fd, on_readable)
    exited: asyncio.Future[int] = asyncio.ensure_future(proc.wait())
    try:
        waiting: set[asyncio.Future[object]] = {ready, exited}  # type: ignore[arg-type]
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if ready in done and ready.result().strip():
            return ready.result()
        if not done:
            raise DesktopFailed(f"{proc.command} did not become ready within {timeout:.0f} s")
        return None
    finally:
        loop.remove_reader(read_fd)
        exited.cancel()


async def wait_for_x_connection(display: str, timeout: float = 5.0) -> None:
    """Readiness is a successful X connection, not the existence of a socket file."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            conn = await asyncio.to_thread(open_display, display)
            await asyncio.to_thread(conn.close)
            return
        except Exception as exc:
            if asyncio.get_running_loop().time() > deadline:
                raise DesktopFailed(f"cannot connect to X display {display}: {exc}") from exc
            await asyncio.sleep(0.02)


async def launch_xvfb(
    processes: ProcessManager,
    *,
    first_display: int,
    width: int,
    height: int,
    dpi: int,
    env: Mapping[str, str],
    log_path: Path,
    exact: bool = False,
    max_size: tuple[int, int] | None = None,
    launcher: Launcher | None = None,
    extra_args: Sequence[str] = (),
    desktop_id: str | None = None,
    opengl: bool = False,
) -> tuple[ManagedProcess, int]:
    """Start Xvfb on the first free display from `first_display` (only that one if `exact`), with a framebuffer
    of `max_size` (default: the default maximum, or the screen if larger) and a `width`x`height` screen; in a
    sandbox with `launcher` (which holds the display for it: `exact`) and its `extra_args` (its cookie)."""
    framebuffer = max_size or framebuffer_size(width, height)
    candidates = [first_display] if exact else list(range(first_display, first_display + DISPLAY_ATTEMPTS))
    for num in candidates:
        if not exact and display_in_use(num):
            continue
        read_fd, write_fd = os.pipe()
        try:
            proc = await processes.spawn(
                "Xvfb", [*xvfb_args(num, *framebuffer, dpi, write_fd, opengl), *extra_args], env=env,
                owner=ProcessOwner.DESKTOP, log_path=log_path, protected=True, pass_fds=(write_fd,), launcher=launcher,
                desktop_id=desktop_id,
            )
        finally:
            os.close(write_fd)
        try:
            ready = await await_announcement(read_fd, proc, READY_TIMEOUT_S)
        except BaseException:
            await proc.kill(500)
            raise
        finally:
            os.close(read_fd)
        if ready:
            try:
                await wait_for_x_connection(f":{num}")
                await switch_to(f":{num}", width, height, dpi)
            except BaseException:
                await proc.kill(500)
                raise
            return proc, num
    tried = ", ".join(f":{n}" for n in candidates)
    raise DesktopFailed(f"unable to find an available X display (tried {tried})")
