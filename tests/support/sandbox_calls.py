"""Functions a test's sandbox runs with `Sandbox.call` (tests/unit/desktop/sandbox/test_calls.py): its zygote
preloads this module, so it imports the standard library only, and all of it at the top."""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

PR_GET_DUMPABLE = 3
Answer = tuple[dict[str, Any], list[int]]


def whoami(args: dict[str, Any], fds: list[int]) -> Answer:
    """Who the call's child is, and what it holds."""
    with open("/proc/self/status") as status:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
            "cap_eff": fields["CapEff"].strip(), "cap_prm": fields["CapPrm"].strip(),
            "no_new_privs": fields["NoNewPrivs"].strip(), "dumpable": ctypes.CDLL(None).prctl(PR_GET_DUMPABLE),
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")), "cwd": os.getcwd(),
            "got": [os.read(fd, 100).decode() for fd in fds]}, []


def sleep(args: dict[str, Any], fds: list[int]) -> Answer:
    time.sleep(args["seconds"])
    return {"slept": args["seconds"]}, []


def echo(args: dict[str, Any], fds: list[int]) -> Answer:
    """`args` back, and a descriptor of the path `args["open"]` when it names one."""
    return args, [os.open(args["open"], os.O_RDONLY)] if "open" in args else []


def big(args: dict[str, Any], fds: list[int]) -> Answer:
    """An answer of `args["size"]` characters: larger than a message, when asked."""
    return {"text": "x" * args["size"]}, []


def boom(args: dict[str, Any], fds: list[int]) -> Answer:
    raise ValueError("boom")
