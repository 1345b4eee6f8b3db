"""A serving process for a sandbox whose init is a reaper only (docs/security.md "How it is built").

The init of such a sandbox is `cat` reading its socket (desktop/sandbox/init.py `become_reaper`): it costs a few
hundred KiB for the desktop's whole life, where a Python init costs ~2.7 MiB. Requests (start a program, open a
path, run a call) are served while they come by a process the zygote starts on the server's `Enter`, and which
ends when the server closes its socket, a few seconds after the last request (desktop/sandbox/sandbox.py).

For each `Enter` the zygote forks a child that enters the init's namespaces at once (setns(2) on a pidfd of the
init), and that child forks the serving process: the first of the two inside the sandbox's pid namespace, so that
what it starts has the sandbox's pids and, once the serving process is gone, the init as its parent. The child
exits at once; the zygote, a subreaper, reaps it and, in the end, the serving process. That process puts on the
restrictions the init would have (`in_sandbox.harden`), joins the session's cgroups, says `Ready` and runs the
init's request loop (`init.Init`, entered), which reports no exit: the server reads each program's off its pidfd.

Standard library only: the zygote imports this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from typing import NoReturn

from desktop.sandbox import linux, protocol
from desktop.sandbox.in_sandbox import SandboxUser, harden, high, join
from desktop.sandbox.init import Init


def enter(message: protocol.Enter, fds: list[int], zygotes: tuple[int, ...]) -> None:
    """In the zygote: fork the child that enters the sandbox (`fds`: [the init's pidfd, the serving process's
    socket]); the zygote goes on at once and closes `fds` as for any message."""
    if os.fork() != 0:
        return
    status, channel = 1, fds[1]
    try:
        signal.set_wakeup_fd(-1)
        for fd in zygotes:
            os.close(fd)
        channel = high(channel)
        try:
            linux.setns(fds[0], message.namespaces)
        except PermissionError as exc:  # a container's bounding set without one of the two: say which to add
            raise PermissionError(exc.errno, "entering the sandbox's namespaces (setns) was refused: the server "
                                  "needs CAP_SYS_ADMIN and CAP_SYS_CHROOT (docs/kubernetes.md)") from None
        finally:
            os.close(fds[0])
        if os.fork() == 0:
            _serve(message, channel)  # never returns
        status = 0
    except BaseException as exc:
        _failed(channel, exc)
    finally:
        os._exit(status)


def _serve(message: protocol.Enter, channel_fd: int) -> NoReturn:
    status = 1
    try:
        harden(message.namespaces & ~linux.CLONE_NEWUSER, bool(message.namespaces & linux.CLONE_NEWUSER),
               message.landlock)
        join(message.cgroup_files)
        channel = socket.socket(fileno=channel_fd)
        protocol.send(channel, protocol.Ready())
        status = Init(channel, SandboxUser(message.uid, message.gid), message.cgroup_files, True,
                      entered=True).serve()
    except OSError as exc:
        _failed(channel_fd, exc)
    finally:
        os._exit(status)  # what it started is the init's now


def _failed(channel_fd: int, exc: BaseException) -> None:
    code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(channel_fd)) as channel:
        protocol.send(channel, protocol.Failed(-1, code, "enter", f"{type(exc).__name__}: {exc}"))
