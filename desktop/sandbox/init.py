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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import traceback

from desktop.sandbox import landlock, linux, protocol

MOUNT_FLAGS = linux.MS_NOSUID | linux.MS_NODEV
KEPT_CAPABILITIES = (linux.CAP_KILL, linux.CAP_SETGID, linux.CAP_SETUID, linux.CAP_DAC_OVERRIDE,
                     linux.CAP_DAC_READ_SEARCH)
"""What starting programs needs: a program's folder is entered before its uid changes (CPython's fork-exec
changes directory first), and may be the sandbox user's own 0700 HOME."""
SETSID = shutil.which("setsid") or "/usr/bin/setsid"
OWN_FDS_FROM = 1000
"""The init moves its own descriptors up here, so that a program's may take any lower number."""
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run(channel: socket.socket, request: protocol.Create, fds: list[int]) -> None:
    """The init's whole life; never returns."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        try:
            set_up(request)
            # What every program of the sandbox inherits from the init: no way to gain a privilege by exec.
            if not request.user_namespace and request.namespaces:
                os.setgroups([])  # refused in a user namespace without root, where the map has the one group
            if request.namespaces:  # else it has no capability to drop: a server without root, no namespaces
                linux.drop_bounding_set()
                linux.clear_ambient()
            linux.no_new_privs()
            if request.landlock is not None:
                landlock.restrict_self(request.landlock)
            if request.namespaces:
                linux.keep_only_capabilities(KEPT_CAPABILITIES)
        except OSError as exc:
            protocol.send(channel, protocol.Failed(-1, exc.errno or 0, "setup", str(exc)))
            return
        finally:
            for fd in fds[1:]:
                os.close(fd)
        channel = _move_up(channel)
        protocol.send(channel, protocol.Ready())
        status = Init(channel, request).serve()
    finally:
        os._exit(status)


def set_up(request: protocol.Create) -> None:
    """The sandbox's file system and hostname, in its new mount and UTS namespaces, and its loopback; nothing
    where it has no namespace of its own (a server without root that may not make any)."""
    if request.loopback:
        linux.link_up("lo")
    if request.firewall is not None:
        _firewall(request.firewall)
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


def _firewall(script: str) -> None:
    from desktop.sandbox import libnft  # loaded by the inits that need it only

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


def _move_up(channel: socket.socket) -> socket.socket:
    return socket.socket(fileno=_high(channel.detach()))


def _high(fd: int) -> int:
    """`fd` moved to OWN_FDS_FROM or above."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, OWN_FDS_FROM)
    os.close(fd)
    return new


class Init:
    """The request loop of one sandbox."""

    def __init__(self, channel: socket.socket, request: protocol.Create) -> None:
        self.channel = channel
        self.uid = request.uid
        self.gid = request.gid
        self.switches = request.uid != os.geteuid()
        """Its programs change uid (a root server's); else they run as the init does (the server's uid)."""
        self.own_pid_namespace = bool(request.namespaces & linux.CLONE_NEWPID)
        self.home_cgroups: tuple[str, ...] = request.cgroup_files
        self.children: dict[int, subprocess.Popen[bytes]] = {}

    def serve(self) -> int:
        wake_r, wake_w = (_high(fd) for fd in os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC))
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
                    self.open(message)
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
        """Start the program with CPython's own fork-exec (C code between fork and exec: a Python child of a
        10 MB process would copy most of its pages on write, 8-18 ms a spawn instead of ~1)."""
        argv = list(request.argv)
        if request.tty:  # the pty (fd 0) becomes the new session's controlling terminal
            argv = [SETSID, "--ctty", "--", *argv]
        extra = [(t, fd) for t, fd in zip(request.targets, fds, strict=True) if t > 2]
        stdio = dict(zip(request.targets, fds, strict=True))
        for target, fd in extra:
            os.dup2(fd, target)  # at the number its arguments name (the init's own descriptors are high)
        try:
            self._join(request.cgroup_files)
            try:
                child = subprocess.Popen(
                    argv, env=request.env, cwd=request.cwd, stdin=stdio.get(0), stdout=stdio.get(1),
                    stderr=stdio.get(2), pass_fds=[t for t, _ in extra], close_fds=True, restore_signals=True,
                    start_new_session=not request.tty, user=self.uid if self.switches else None,
                    group=self.gid if self.switches else None, extra_groups=[] if self.switches else None)
            finally:
                if request.cgroup_files:
                    self._join(self.home_cgroups)
        except OSError as exc:
            stage = "cwd" if request.cwd is not None and exc.filename == request.cwd else "exec"
            protocol.send(self.channel, protocol.Failed(request.id, exc.errno or 0, stage, os.strerror(exc.errno or 0)))
            return
        except (ValueError, TypeError, UnicodeError) as exc:  # an embedded NUL, a '=' in a variable's name...
            protocol.send(self.channel, protocol.Failed(request.id, errno.EINVAL, protocol.ARGUMENTS_STAGE, str(exc)))
            return
        finally:
            for target, _ in extra:
                os.close(target)
        self.children[child.pid] = child
        pidfd = os.pidfd_open(child.pid)
        try:
            protocol.send(self.channel, protocol.Spawned(request.id, child.pid), [pidfd])
        finally:
            os.close(pidfd)

    @staticmethod
    def _join(files: tuple[str, ...] | list[str]) -> None:
        """Move the init into these cgroups: what it forks now starts in them."""
        for path in files:
            with open(path, "w") as procs:
                procs.write("0")

    def open(self, request: protocol.Open) -> None:
        """Open as the sandbox's user: its uid's permissions, through the sandbox's mounts."""
        try:
            if self.switches:
                os.setegid(self.gid)
                os.seteuid(self.uid)
            try:
                fd = os.open(request.path, request.flags | os.O_CLOEXEC | os.O_NOCTTY, request.mode)
            finally:
                if self.switches:
                    os.seteuid(0)
                    os.setegid(0)
        except OSError as exc:
            protocol.send(self.channel, protocol.Failed(request.id, exc.errno or 0, "open", str(exc)))
            return
        try:
            protocol.send(self.channel, protocol.Opened(request.id), [fd])
        finally:
            os.close(fd)

    def call(self, request: protocol.Call, fds: list[int]) -> None:
        """Fork the call's child (its exit is reaped as an orphan's: nothing waits for it here)."""
        try:
            pid = os.fork()
        except OSError as exc:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fds[0])) as answer:
                protocol.send(answer, protocol.Failed(-1, exc.errno or 0, "fork", str(exc)))
            return
        if pid == 0:
            self._called(request, fds)

    def _called(self, request: protocol.Call, fds: list[int]) -> None:
        """The call's child: as the sandbox's user for good, with nothing of the init but the call's descriptors."""
        status = 1
        answer = socket.socket(fileno=fds[0])
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.closerange(OWN_FDS_FROM, os.sysconf("SC_OPEN_MAX"))  # the init's socket to the server above all
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):  # not the server's log, which the init inherited
                os.dup2(null, target)
            os.close(null)
            self._join(request.cgroup_files)
            os.setresgid(self.gid, self.gid, self.gid)
            os.setresuid(self.uid, self.uid, self.uid)  # every capability goes with root
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
        """The server is gone: nothing of the sandbox may outlive it."""
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
