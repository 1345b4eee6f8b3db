"""`--desktop-server=shared`: one server for all the xdist workers of a run (each still with desktops of
its own), which saves a server start (about 2 s of CPU) and a server's memory per worker, at the price of
running every desktop's capture, encoding and HTTP in one Python process (options.ServerMode).

The controller makes a private directory and hands it to every worker (`workerinput`); the first worker
that needs a server starts it under a lock in that directory and leaves its address there for the
others; the controller stops it when the run ends. A run whose tests ask for no desktop starts nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from pathlib import Path

from .server import STOP_TIMEOUT, DesktopServer, start_server

RECORD = "server.json"
MAX_DESKTOPS = "256"
"""The shared server's `--max-desktops`: every worker holds one desktop (two for a moment with `fresh`)."""


def server_for_worker(directory: Path) -> DesktopServer:
    """The run's shared server: started by the first worker to ask, found by the others. The worker that
    started it does not own it (`process` is None): the controller stops it (`stop_shared`)."""
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        record = directory / RECORD
        if record.exists():
            known = json.loads(record.read_text())
            return DesktopServer(known["url"], known["token"], Path(known["stateDir"]))
        started = start_server(directory / "server", extra_args=("--max-desktops", MAX_DESKTOPS))
        assert started.process is not None
        record.write_text(json.dumps({"url": started.url, "token": started.token, "pid": started.process.pid,
                                      "stateDir": str(started.state_dir)}))
        return DesktopServer(started.url, started.token, started.state_dir, started.log_path)


def stop_shared(directory: Path) -> None:
    """At the end of the run (controller): SIGTERM the shared server if one was started, SIGKILL it after
    `STOP_TIMEOUT`, and remove the directory (its desktops' state and recordings were copied out already)."""
    record = directory / RECORD
    if record.exists():
        pid = int(json.loads(record.read_text())["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while time.monotonic() < deadline and _running(pid):
                time.sleep(0.05)
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)


def _running(pid: int) -> bool:
    """Alive and not a zombie (the worker that started it may be its parent, and gone or not waiting)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
