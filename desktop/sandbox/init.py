"""A sandbox's init: PID 1 of its pid namespace, which sets the sandbox up and starts every program in it.

Forked by the zygote (desktop/sandbox/zygote.py) inside the sandbox's new namespaces, as root of the
host (or of the sandbox's user namespace). It mounts the sandbox's view of the file system (a private
/proc, /tmp, /run and /dev/shm, the server's state hidden, the desktop's own directories bound back at
their paths, its /etc/passwd), sets the hostname, then keeps only the capabilities starting programs
needs (setuid, setgid, kill, and reading folders as it enters them) and serves the server's requests on its socket:

- `Spawn`: fork; the child starts a session, joins its cgroups, takes its descriptors, drops to the
  sandbox's uid with no capabilities, no bounding set and `no_new_privs`, changes directory and execs.
  A failure before exec comes back as `Failed` with its errno and stage; success as `Spawned` with a
  pidfd, through which the server knows the program's pid as it sees it and signals it.
- `Open`: a path opened as the sandbox's user would open it (its permissions, its mounts), the
  descriptor sent back.
- `Call`: a function of a module the zygote preloaded (a desktop's file operations, desktop/files/calls.py)
  run in a forked child that drops to the sandbox's uid for good, so that a long one (a recursive delete,
  an archive's extraction) never holds up the init; the child answers on the call's own socket.

Every exit of a spawned program is reported (`Exited`); orphans are reaped. When the server's end of
the socket closes (the sandbox is deleted, or the server died), the init kills every process of the
namespace and exits, which ends the namespace.

Where the sandbox has a pid namespace of its own and the kernel keeps a process's exit for its pidfd
(`Create.reaper`), the init serves nothing: once set up it becomes a reaper only (`become_reaper`: `cat`
reading its socket until the server closes it, SIGCHLD ignored so that the kernel reaps every orphan), a few
hundred KiB where a forked Python costs ~2.7 MiB of private memory for as long as the desktop lives. Its
requests are served instead by a process the zygote starts in the sandbox while they come (desktop/sandbox/entry.py),
with this module's request loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import signal
import socket
import subprocess
import traceback
from typing import NoReturn

from desktop.sandbox import linux, protocol
from desktop.sandbox.in_sandbox import SandboxUser, harden, high, join, open_as, run_call, start_in

MOUNT_FLAGS = linux.MS_NOSUID | linux.MS_NODEV
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REAPER = shutil.which("cat") or "/bin/cat"
"""What a reaper-only init runs: it reads its socket to the server until that closes, and nothing else."""


def run(channel: socket.socket, request: protocol.Create, fds: list[int]) -> None:
    """The init's whole life; never returns."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        try:
            set_up(request)
            harden(request.namespaces, request.user_namespace, request.landlock)
        except OSError as exc:
            protocol.send(channel, protocol.Failed(-1, exc.errno or 0, "setup", str(exc)))
            return
        finally:
            for fd in fds[1:]:
                os.close(fd)
        channel = socket.socket(fileno=high(channel.detach()))
        protocol.send(channel, protocol.Ready())
        if request.reaper:
            become_reaper(channel)
        status = Init.of(channel, request).serve()
    finally:
        os._exit(status)


def become_reaper(channel: socket.socket) -> NoReturn:
    """Exec `cat` with the server's socket as its input and nothing as its output: it ends when the server closes
    its end (the sandbox is deleted, or the server died), and the kernel then kills the rest of the pid namespace.
    SIGCHLD ignored is kept across exec: every orphan the init inherits is reaped by the kernel at its exit (its
    exit stays readable on the pidfd the server holds: PIDFD_INFO_EXIT)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    os.dup2(channel.fileno(), 0)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(REAPER, [REAPER])


def set_up(request: protocol.Create) -> None:
    """The sandbox's file system and hostname, in its new mount and UTS namespaces, and its loopback; nothing
    where it has no namespace of its own (a server without root that may not make any)."""
    if request.loopback:
        linux.link_up("lo")
    if request.firewall is not None:
        apply_firewall(request.firewall)
    if not request.namespaces & linux.CLONE_NEWNS:
        return
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    # Sources are opened in this mount namespace (a descriptor of another cannot be bound) and before any
    # mount: the plan may cover a source's folder with an empty one (the server's state holds the HOME).
    sources = {m.source: os.open(m.source, os.O_PATH | os.O_CLOEXEC)
               for m in request.mounts if m.kind is protocol.MountKind.BIND and m.source is not None}
    try:
        _mount_all(request, sources)
    finally:
        for fd in sources.values():
            os.close(fd)
    socket.sethostname(request.hostname)


def apply_firewall(script: str) -> None:
    """Run an nftables script in this process's network namespace (the init's at its start; a zygote child's that
    entered it, desktop/sandbox/zygote.py `Firewall`)."""
    from desktop.sandbox import libnft  # loaded by the processes that need it only

    nft = libnft.shared()
    if nft is None:
        raise OSError(2, "libnftables cannot be loaded")
    try:
        nft.run(script)
    except libnft.NftError as exc:
        raise OSError(1, f"nftables: {exc}") from exc


def _mount_all(request: protocol.Create, sources: dict[str, int]) -> None:
    for mount in request.mounts:
        match mount.kind:
            case protocol.MountKind.PROC:
                linux.mount("proc", mount.target, "proc", MOUNT_FLAGS | linux.MS_NOEXEC)
            case protocol.MountKind.TMPFS:
                os.makedirs(mount.target, exist_ok=True)
                linux.mount("tmpfs", mount.target, "tmpfs", MOUNT_FLAGS, f"mode={mount.mode or 0o755:o}")
                if mount.owner is not None:
                    os.chown(mount.target, mount.owner, mount.owner)
            case protocol.MountKind.BIND:
                assert mount.source is not None
                source = f"/proc/self/fd/{sources[mount.source]}"
                if os.path.isdir(source):
                    os.makedirs(mount.target, exist_ok=True)
                elif not os.path.exists(mount.target):
                    os.makedirs(os.path.dirname(mount.target), exist_ok=True)
                    with open(mount.target, "a"):
                        pass
                linux.mount(source, mount.target, None, linux.MS_BIND | linux.MS_REC)
                if mount.read_only:  # keeping the flags a user namespace locks (the same as root's otherwise)
                    linux.mount(None, mount.target, None, linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY
                                | MOUNT_FLAGS | linux.mount_flags(mount.target))


class Init:
    """The request loop of one sandbox: its init's, or that of a serving process the zygote started in a sandbox
    whose init is a reaper only (`entered`: there an `Exited` only tells the server to read the exit off the
    program's pidfd, since the programs it leaves behind are reaped by the init, which says nothing; and it ends
    alone when the server closes its socket)."""

    def __init__(self, channel: socket.socket, user: SandboxUser, home_cgroups: tuple[str, ...],
                 own_pid_namespace: bool, entered: bool = False) -> None:
        self.channel = channel
        self.user = user
        self.own_pid_namespace = own_pid_namespace
        self.home_cgroups = home_cgroups
        self.entered = entered
        self.children: dict[int, subprocess.Popen[bytes]] = {}

    @classmethod
    def of(cls, channel: socket.socket, request: protocol.Create) -> Init:
        return cls(channel, SandboxUser(request.uid, request.gid), request.cgroup_files,
                   bool(request.namespaces & linux.CLONE_NEWPID))

    def serve(self) -> int:
        wake_r, wake_w = (high(fd) for fd in os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC))
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # poll, not select: its descriptors sit at OWN_FDS_FROM and up, a few from select's limit of 1023.
        poller = select.poll()
        poller.register(self.channel.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        try:
            while True:
                readable = {fd for fd, _ in poller.poll()}
                if wake_r in readable:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                    self.reap()
                if self.channel.fileno() in readable:
                    received = protocol.receive(self.channel)
                    if received is None:
                        return self.end()
                    self.handle(*received)
        except (BrokenPipeError, ConnectionResetError):
            return self.end()

    def handle(self, message: protocol.Message, fds: list[int]) -> None:
        """Serve one request. Whatever a request holds, it fails alone: an exception here would end the init, and
        with it every program of the desktop."""
        try:
            match message:
                case protocol.Spawn():
                    self.spawn(message, fds)
                case protocol.Open():
                    opened = open_as(message, self.user)
                    if isinstance(opened, protocol.Failed):
                        protocol.send(self.channel, opened)
                    else:
                        try:
                            protocol.send(self.channel, protocol.Opened(message.id), [opened])
                        finally:
                            os.close(opened)
                case protocol.Call():
                    self.call(message, fds)
        except Exception as exc:  # the desktop outlives any one request
            traceback.print_exc()  # to the server's log, which the init writes to
            request_id = getattr(message, "id", None)
            if isinstance(request_id, int) and not isinstance(message, protocol.Call):
                with contextlib.suppress(OSError):
                    protocol.send(self.channel, protocol.Failed(request_id, errno.EINVAL, "init", repr(exc)))
        finally:
            for fd in fds:
                os.close(fd)

    def spawn(self, request: protocol.Spawn, fds: list[int]) -> None:
        try:
            started = start_in(request, fds, self.user)
        finally:
            if request.cgroup_files:
                join(self.home_cgroups)
        if isinstance(started, protocol.Failed):
            protocol.send(self.channel, started)
            return
        self.children[started.pid] = started
        pidfd = os.pidfd_open(started.pid)
        try:
            protocol.send(self.channel, protocol.Spawned(request.id, started.pid), [pidfd])
        finally:
            os.close(pidfd)

    def call(self, request: protocol.Call, fds: list[int]) -> None:
        """Fork the call's child (its exit is reaped as an orphan's: nothing waits for it here)."""
        try:
            pid = os.fork()
        except OSError as exc:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fds[0])) as answer:
                protocol.send(answer, protocol.Failed(-1, exc.errno or 0, "fork", str(exc)))
            return
        if pid == 0:
            run_call(request, fds, self.user)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
                protocol.send(self.channel, protocol.Exited(pid, status))

    def end(self) -> int:
        """The server is gone: nothing of the sandbox may outlive it (a serving process's programs are the init's,
        which ends them when it ends)."""
        if self.entered:
            return 0
        if self.own_pid_namespace:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)  # every process of this pid namespace but the init
            return 0
        # In the server's pid namespace -1 would be every process of the server's uid: each program's group
        # instead (each started one of its own); what left it is the server's to find (its marker).
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        return 0
