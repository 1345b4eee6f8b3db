"""An X server of a test module's own, for tests of the X layer that need no desktop."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator


@contextlib.contextmanager
def free_display() -> Iterator[str]:
    """An Xvfb on whatever display is free (`-displayfd`): a fixed number may belong to a desktop another test
    worker's server just started, and would then answer for this one. Its name (":N")."""
    with free_xvfb() as (name, _):
        yield name


@contextlib.contextmanager
def free_xvfb(screen: str = "640x480x24") -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`free_display`, with the Xvfb's process (a test may stop and continue it); `screen` is WxHxDEPTH."""
    read, write = os.pipe()
    # -noreset: without it the server regenerates when a test's last connection closes, and drops a
    # connection that comes in meanwhile (the next test's).
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", screen, "-nolisten", "tcp",
                             "-noreset"], pass_fds=(write,), stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        with os.fdopen(read) as announced:
            number = announced.readline().strip()
        assert number, "Xvfb did not start"
        yield f":{number}", proc
    finally:
        proc.kill()
        proc.wait()
