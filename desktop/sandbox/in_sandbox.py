"""What a sandbox's requests do inside it, whoever serves them: its init (desktop/sandbox/init.py), or, where the
init is a reaper only, a serving process the zygote started in its namespaces (desktop/sandbox/entry.py).

Both put on the same restrictions first (`harden`), then start a program, open a path or run a call the same way
(the request loop of init.py `Init`):
as the sandbox's user, through the sandbox's mounts, with nothing of the server's descriptors. Standard library
only: the zygote imports this module, and the init runs with nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from desktop.sandbox import landlock, linux, protocol

KEPT_CAPABILITIES = (linux.CAP_KILL, linux.CAP_SETGID, linux.CAP_SETUID, linux.CAP_DAC_OVERRIDE,
                     linux.CAP_DAC_READ_SEARCH)
"""What starting programs needs: a program's folder is entered before its uid changes (CPython's fork-exec
changes directory first), and may be the sandbox user's own 0700 HOME."""
SETSID = shutil.which("setsid") or "/usr/bin/setsid"
OWN_FDS_FROM = 1000
"""The server's side moves its own descriptors up here, so that a program's may take any lower number."""


@dataclass(frozen=True)
class SandboxUser:
    """Who a sandbox's programs run as."""

    uid: int
    gid: int
    switches: bool = field(init=False)
    """Its programs change uid (a root server's); else they run as the one serving does (the server's uid, mapped
    to itself in a user namespace). Fixed when made: `open_as` changes the effective uid for a moment."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "switches", self.uid != os.geteuid())


def harden(namespaces: int, user_namespace: bool, confinement: landlock.Confinement | None) -> None:
    """What every program of the sandbox inherits from the one that starts it: no way to gain a privilege by exec,
    its Landlock rules, and of the capabilities only those starting programs needs."""
    if not user_namespace and namespaces:
        os.setgroups([])  # refused in a user namespace without root, where the map has the one group
    if namespaces:  # else it has no capability to drop: a server without root, no namespaces
        linux.drop_bounding_set()
        linux.clear_ambient()
    linux.no_new_privs()
    if confinement is not None:
        landlock.restrict_self(confinement)
    if namespaces:
        linux.keep_only_capabilities(KEPT_CAPABILITIES)


def high(fd: int) -> int:
    """`fd` moved to OWN_FDS_FROM or above."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, OWN_FDS_FROM)
    os.close(fd)
    return new


def join(files: Sequence[str]) -> None:
    """Move this process into these cgroups (`cgroup.procs` files): what it forks now starts in them."""
    for path in files:
        with open(path, "w") as procs:
            procs.write("0")


def start_in(request: protocol.Spawn, fds: Sequence[int], user: SandboxUser
             ) -> subprocess.Popen[bytes] | protocol.Failed:
    """Join the program's cgroups, then start it (`start_program`): it begins where its limits are."""
    try:
        join(request.cgroup_files)
    except OSError as exc:
        return protocol.Failed(request.id, exc.errno or 0, "cgroup", str(exc))
    return start_program(request, fds, user)


def start_program(request: protocol.Spawn, fds: Sequence[int], user: SandboxUser
                  ) -> subprocess.Popen[bytes] | protocol.Failed:
    """Start the program with CPython's own fork-exec (C code between fork and exec: a Python child of a
    10 MB process would copy most of its pages on write, 8-18 ms a spawn instead of ~1). `fds` are the program's
    descriptors, in the order of `request.targets`; those of this process must sit at OWN_FDS_FROM and up."""
    argv = list(request.argv)
    if request.tty:  # the pty (fd 0) becomes the new session's controlling terminal
        argv = [SETSID, "--ctty", "--", *argv]
    extra = [(t, fd) for t, fd in zip(request.targets, fds, strict=True) if t > 2]
    stdio = dict(zip(request.targets, fds, strict=True))
    for target, fd in extra:
        os.dup2(fd, target)  # at the number its arguments name
    try:
        return subprocess.Popen(
            argv, env=request.env, cwd=request.cwd, stdin=stdio.get(0), stdout=stdio.get(1),
            stderr=stdio.get(2), pass_fds=[t for t, _ in extra], close_fds=True, restore_signals=True,
            start_new_session=not request.tty, user=user.uid if user.switches else None,
            group=user.gid if user.switches else None, extra_groups=[] if user.switches else None)
    except OSError as exc:
        stage = "cwd" if request.cwd is not None and exc.filename == request.cwd else "exec"
        return protocol.Failed(request.id, exc.errno or 0, stage, os.strerror(exc.errno or 0))
    except (ValueError, TypeError, UnicodeError) as exc:  # an embedded NUL, a '=' in a variable's name...
        return protocol.Failed(request.id, errno.EINVAL, protocol.ARGUMENTS_STAGE, str(exc))
    finally:
        for target, _ in extra:
            os.close(target)


def open_as(request: protocol.Open, user: SandboxUser) -> int | protocol.Failed:
    """Open as the sandbox's user: its uid's permissions, through the sandbox's mounts."""
    try:
        if user.switches:
            os.setegid(user.gid)
            os.seteuid(user.uid)
        try:
            return os.open(request.path, request.flags | os.O_CLOEXEC | os.O_NOCTTY, request.mode)
        finally:
            if user.switches:
                os.seteuid(0)
                os.setegid(0)
    except OSError as exc:
        return protocol.Failed(request.id, exc.errno or 0, "open", str(exc))


def run_call(request: protocol.Call, fds: list[int], user: SandboxUser) -> NoReturn:
    """A call's process: as the sandbox's user for good, with nothing but the call's descriptors (`fds`: the
    socket it answers on, then the function's); it answers, then exits."""
    status = 1
    answer = socket.socket(fileno=fds[0])
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.closerange(OWN_FDS_FROM, os.sysconf("SC_OPEN_MAX"))  # the server's sockets above all
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):  # not the server's log, which the init inherited
            os.dup2(null, target)
        os.close(null)
        join(request.cgroup_files)
        os.setresgid(user.gid, user.gid, user.gid)
        os.setresuid(user.uid, user.uid, user.uid)  # every capability goes with root
        # The uid's other processes may not trace it or read its memory (the kernel does this on the uid
        # change too; said here so that it holds whatever suid_dumpable is).
        linux.prctl(linux.PR_SET_DUMPABLE, 0)
        os.chdir("/")
        module, _, name = request.function.partition(":")
        function = getattr(sys.modules[module], name)  # preloaded: nothing is imported inside a sandbox
        value, out = function(request.args, fds[1:])
        _answer(answer, value, out)
        status = 0
    except BaseException as exc:
        code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        with contextlib.suppress(OSError):
            protocol.send(answer, protocol.Failed(-1, code, "call", f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(status)


def _answer(answer: socket.socket, value: dict[str, object], fds: list[int]) -> None:
    """Send a call's answer; one too large for a message goes in a memfd."""
    message = protocol.encode(protocol.Result(value))
    if len(message) < protocol.MAX_MESSAGE_BYTES // 2:
        socket.send_fds(answer, [message], fds)
        return
    spill = os.memfd_create("answer", os.MFD_CLOEXEC)
    with open(spill, "wb", closefd=False) as out:
        out.write(json.dumps(value, separators=(",", ":")).encode())
    protocol.send(answer, protocol.Result(None, spilled=True), [spill, *fds])
