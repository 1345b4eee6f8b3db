"""One server for all the xdist workers of a run (`--desktop-server=shared`, and `auto` up to four workers),
each worker still with desktops of its own: it saves a server start (about a second of CPU) and a server's
memory per worker, at the price of running every desktop's capture, encoding and HTTP in one Python
process (options.ServerMode).

The controller makes a private directory and hands it to every worker (`workerinput`), and starts the
server there as the workers start (`start_early`): a server start (about a second) overlaps the workers'
own, instead of coming after it. It leaves the server's address there for the workers under a lock, which
a worker asking meanwhile waits for; if the controller's start failed, the first worker to ask starts one
itself (and fails its test with the server's log if that fails too). The controller stops it: SIGTERM
once the last worker has finished (`begin_stop`), and waits for it at the end of the run (`stop_shared`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

from .server import STOP_TIMEOUT, DesktopServer, ServerStartError, start_server

RECORD = "server.json"
MAX_DESKTOPS = "256"
"""The shared server's `--max-desktops`: every worker holds one desktop (two for a moment with `fresh`)."""


def start_early(directory: Path) -> threading.Thread:
    """Controller: start the run's server in the background, holding the lock until it answers (or failed:
    then the record stays absent and a worker tries). Join the thread before `stop_shared`."""
    lock = open(directory / "lock", "w")  # noqa: SIM115 -- held by the thread, closed when it is done
    fcntl.flock(lock, fcntl.LOCK_EX)  # taken here, before any worker can ask

    def start() -> None:
        with lock, contextlib.suppress(ServerStartError):
            _start_and_record(directory)

    thread = threading.Thread(target=start, name="sandbox-desktop-shared-server", daemon=True)
    thread.start()
    return thread


def server_for_worker(directory: Path) -> DesktopServer:
    """The run's shared server: started by the controller (or by the first worker to ask when that failed),
    found by the others. A worker does not own it (`process` is None): the controller stops it (`stop_shared`)."""
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        if not (directory / RECORD).exists():
            _start_and_record(directory)
        known = _read_record(directory)
        return DesktopServer(known["url"], known["token"], Path(known["stateDir"]), Path(known["log"]),
                             started_by_plugin=True)


def _start_and_record(directory: Path) -> None:
    """Start the server and leave where it is in the record (the caller holds the lock)."""
    started = start_server(directory / "server", extra_args=("--max-desktops", MAX_DESKTOPS))
    assert started.process is not None
    _write_record(directory, {"url": started.url, "token": started.token, "pid": started.process.pid,
                              "stateDir": str(started.state_dir), "log": str(started.log_path)})


def _read_record(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / RECORD).read_text()))


def _write_record(directory: Path, record: dict[str, Any]) -> None:
    """Replace the record whole (written aside, then renamed: a reader never sees half of it)."""
    aside = directory / f"{RECORD}.new"
    aside.write_text(json.dumps(record))
    aside.replace(directory / RECORD)


def begin_stop(directory: Path) -> None:
    """Controller, once every worker has finished its session: SIGTERM the shared server now, so that it
    shuts down while xdist ends its workers (`stop_shared` then waits for it)."""
    if (directory / RECORD).exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(_read_record(directory)["pid"]), signal.SIGTERM)


def stop_shared(directory: Path) -> None:
    """At the end of the run (controller): SIGTERM the shared server if one was started, SIGKILL it after
    `STOP_TIMEOUT`, and remove the directory (its desktops' state and recordings were copied out already)."""
    if (directory / RECORD).exists():
        pid = int(_read_record(directory)["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while time.monotonic() < deadline and _running(pid):
                time.sleep(0.01)
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)


def _running(pid: int) -> bool:
    """Alive and not a zombie. The controller started it (the usual case): reaped here once it has ended;
    a worker that started it may be gone or not waiting."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
