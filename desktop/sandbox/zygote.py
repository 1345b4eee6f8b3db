"""The zygote: one small process per server that forks every sandbox's init (docs/security.md "How it is built").

Why a zygote: each sandbox needs a process of its own as PID 1 of its pid namespace, and a Python
interpreter started for each would cost ~4.5 MB of private memory per desktop. A fork of this process,
which has everything imported and its objects frozen out of the garbage collector's way (`gc.freeze`),
shares its pages until it writes them: ~0.75 MB each, and no interpreter start on a desktop's creation.

For each `Create` the zygote forks an outer child, which enters the network namespace it was given,
unshares the rest (mount, UTS, IPC, pid...) and forks the init: the first process of the new pid
namespace. The outer child hands the server a pidfd of the init over the sandbox's own socket and
exits; the zygote is the subreaper that reaps it, and each init once it ends. Where the init is a reaper only
(`Create.reaper`), an `Enter` asks for a serving process inside the sandbox's namespaces, a grandchild of the
zygote that serves its requests while they come (desktop/sandbox/entry.py): a Python process while a desktop is
being driven, instead of one for each desktop's whole life.

Run as `python -I -S desktop/sandbox/zygote.py FD [MODULE...]` (standard library only; FD is its socket to
the server). It imports each MODULE before it forks anything: what a `Call` runs in a sandbox
(desktop/sandbox/init.py) comes from those, never imported inside one. It ends when the server closes that
socket; the sandboxes notice on their own sockets.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace

if __package__ in (None, ""):  # run as a script by path: the repository root is two folders up
    _ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # The wire's package (preloaded modules use its enums) is beside ours once installed, in client/ in a checkout.
    sys.path[:0] = [_ROOT, *[p for p in (os.path.join(_ROOT, "client"),) if os.path.isdir(p)]]

from desktop.sandbox import entry, init, landlock, linux, protocol

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    server = socket.socket(fileno=int(argv[1]))
    linux.prctl(PR_SET_CHILD_SUBREAPER, 1)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for name in argv[2:]:
        importlib.import_module(name)
    protocol.send(server, _trial())
    gc.freeze()  # what is imported by now is shared with every init: keep the collector from touching it
    # poll, not select: the socket keeps the number it had in the server, which may be past select's 1023.
    poller = select.poll()
    poller.register(server.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        readable = {fd for fd, _ in poller.poll()}
        if wake_r in readable:
            _drain(wake_r)
            _reap()
        if server.fileno() in readable:
            received = protocol.receive(server)
            if received is None:
                return 0
            message, fds = received
            match message:
                case protocol.Create():
                    _create(message, fds, (server.fileno(), wake_r, wake_w))
                case protocol.Enter():
                    entry.enter(message, fds, (server.fileno(), wake_r, wake_w))
                case protocol.Firewall():
                    _firewall(message, fds, (server.fileno(), wake_r, wake_w))
            for fd in fds:
                os.close(fd)


def _firewall(request: protocol.Firewall, fds: list[int], ours: tuple[int, ...]) -> None:
    """Fork a child that enters the user and network namespaces of a sandbox's init (`fds`: [its pidfd, the
    answer's socket]) and applies the rules there; the zygote goes on at once and closes `fds`."""
    if os.fork() != 0:
        return
    status = 1
    answer = socket.socket(fileno=os.dup(fds[1]))
    try:
        signal.set_wakeup_fd(-1)
        for fd in ours:
            os.close(fd)
        linux.setns(fds[0], linux.CLONE_NEWUSER | linux.CLONE_NEWNET)
        init.apply_firewall(request.script)
        protocol.send(answer, protocol.Result({}))
        status = 0
    except BaseException as exc:  # the server learns why; nothing else may run in this forked copy
        errno = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        with contextlib.suppress(OSError):
            protocol.send(answer, protocol.Failed(-1, errno, "firewall", f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(status)


def _create(request: protocol.Create, fds: list[int], ours: tuple[int, ...]) -> None:
    channel_fd = fds[0]
    if os.fork() != 0:
        return
    # The outer child: enter the namespaces, then fork the init inside the new pid namespace.
    channel = socket.socket(fileno=channel_fd)
    try:
        signal.set_wakeup_fd(-1)
        for fd in ours:
            os.close(fd)
        if request.join_netns is not None:
            linux.setns(fds[request.join_netns], linux.CLONE_NEWNET)
        if request.user_namespace:  # the other namespaces are then its own: the init holds capabilities there
            linux.unshare(linux.CLONE_NEWUSER | request.namespaces)
            linux.map_self(request.uid, request.gid)
        elif request.namespaces:
            linux.unshare(request.namespaces)
        pid = os.fork()
        if pid == 0:
            init.run(channel, request, fds)  # never returns
        pidfd = os.pidfd_open(pid)
        protocol.send(channel, protocol.Started(), [pidfd])
        os._exit(0)
    except BaseException as exc:  # the server learns why; nothing else may run in this forked copy
        errno = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        try:
            protocol.send(channel, protocol.Failed(-1, errno, "namespaces", str(exc)))
        finally:
            os._exit(1)


NAMESPACES = (linux.CLONE_NEWNS | linux.CLONE_NEWUTS | linux.CLONE_NEWIPC | linux.CLONE_NEWPID
              | linux.CLONE_NEWNET)
"""What every sandbox unshares (the network namespace is joined instead where the server made one)."""


def _trial() -> protocol.Hello:
    """Can this process make sandboxes? A child tries the unshare and a uid change, and exits with the errno;
    where it is not root, another tries the same inside a user namespace of its own (`_trial_user_namespace`)."""
    root = os.geteuid() == 0
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            linux.unshare(NAMESPACES)
            if root:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
        except OSError as exc:
            code = exc.errno or 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    errno = os.waitstatus_to_exitcode(status)
    hello = protocol.Hello(root=root, namespaces=NAMESPACES if errno == 0 else 0, errno=max(errno, 0),
                           landlock_abi=landlock.abi(), pidfd_exit=_pidfd_keeps_exits())
    if root:
        return hello
    stage, errno, tun = _trial_user_namespace()
    return replace(hello, user_namespace=NAMESPACES if not stage else 0, user_namespace_errno=errno,
                   user_namespace_stage=stage, tun_errno=tun)


def _pidfd_keeps_exits() -> bool:
    """Does a pidfd tell how its process exited once reaped (Linux 6.15), and is there the reaper's program?"""
    if not os.path.exists(init.REAPER):
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    pidfd = os.pidfd_open(pid)  # a zombie until the wait below
    try:
        os.waitpid(pid, 0)
        try:
            status = linux.pidfd_exit_status(pidfd)
        except OSError:  # no PIDFD_GET_INFO
            return False
        return status is not None and os.waitstatus_to_exitcode(status) == 3
    finally:
        os.close(pidfd)


def _trial_user_namespace() -> tuple[str, int, int]:
    """What a sandbox of a server without root goes through: a user namespace with the others, the server's uid
    mapped, a proc and a tmpfs mounted by the first process of the new pid namespace; then /dev/net/tun opened
    there (slirp4netns needs it). The step that failed (or ""), its errno, and the tun's errno (0: opened)."""
    read, write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(read)
        stage, code, tun = "unshare", 0, -1
        uid, gid = os.getuid(), os.getgid()  # before the unshare: unmapped, they read as the overflow ids
        try:
            linux.unshare(linux.CLONE_NEWUSER | NAMESPACES)
            stage = "map"
            linux.map_self(uid, gid)
            stage = "mount"
            inner = os.fork()
            if inner == 0:
                os._exit(_trial_mounts())
            code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1])
            if code == 0:
                stage, tun = "", _errno_of(lambda: os.close(os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)))
        except OSError as exc:
            code = exc.errno or 1
        os.write(write, f"{stage or '-'} {code} {tun}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        words = answer.read().decode().split()
    os.waitpid(pid, 0)
    if len(words) != 3:
        return "unshare", 0, -1
    return ("" if words[0] == "-" else words[0]), int(words[1]), int(words[2])


def _trial_mounts() -> int:
    try:
        linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
        linux.mount("proc", "/proc", "proc", init.MOUNT_FLAGS | linux.MS_NOEXEC)
        linux.mount("tmpfs", "/tmp", "tmpfs", init.MOUNT_FLAGS, "mode=1777")
    except OSError as exc:
        return exc.errno or 1
    return 0


def _errno_of(action: Callable[[], object]) -> int:
    try:
        action()
    except OSError as exc:
        return exc.errno or 1
    return 0


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    sys.exit(main(sys.argv))
