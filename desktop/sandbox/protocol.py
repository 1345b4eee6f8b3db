"""What the server, the zygote and each sandbox's init say to each other (docs/security.md "How it is built").

One message is one datagram of a SOCK_SEQPACKET socket pair: a JSON object, and the file descriptors it
carries as SCM_RIGHTS. Each message is a frozen dataclass of this module; `encode`/`decode` are the only
places they meet JSON. Standard library only: the zygote and the init import this module.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar

from desktop.sandbox.landlock import Confinement

MAX_MESSAGE_BYTES = 1 << 20
"""An environment of a few thousand variables fits; the socket's send buffer is raised to match."""
MAX_FDS = 64


class MountKind(StrEnum):
    TMPFS = "tmpfs"
    """An empty tmpfs at `target` (mode 0755 unless `mode`)."""
    BIND = "bind"
    """The directory or file at `source` (as the machine shows it) at `target`."""
    PROC = "proc"
    """A proc file system of the sandbox's own pid namespace at /proc."""


@dataclass(frozen=True)
class Mount:
    kind: MountKind
    target: str
    source: str | None = None
    """BIND: opened before any mount of the plan, so a path the plan hides can still be bound elsewhere."""
    read_only: bool = False
    mode: int | None = None
    owner: int | None = None
    """uid (and gid) to give a TMPFS's root."""


@dataclass(frozen=True)
class Message:
    """Base of every message; `kind` names the concrete class on the wire."""

    kind: ClassVar[str]


# -- zygote -> server ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hello(Message):
    """What the zygote found it can do, before any sandbox is asked of it."""

    kind: ClassVar[str] = "hello"
    root: bool
    """It runs with the capabilities a sandbox's setup needs (mounts, uids, namespaces)."""
    namespaces: int
    """The CLONE_NEW* flags a trial unshare took."""
    errno: int = 0
    """Why the trial failed, if it did."""
    landlock_abi: int = 0
    user_namespace: int = 0
    """Not root: the CLONE_NEW* flags a trial unshare took together with a user namespace of its own (mapping
    only the server's uid), once proc and tmpfs mounted in it; 0 where refused."""
    user_namespace_errno: int = 0
    user_namespace_stage: str = ""
    """Which step of that trial failed (`unshare`, `map`, `mount`), if one did."""
    tun_errno: int = -1
    """Opening /dev/net/tun inside that user namespace (what slirp4netns does): 0 where it worked, -1 untried."""
    pidfd_exit: bool = False
    """A pidfd tells how its process exited after another process reaped it (PIDFD_INFO_EXIT, Linux 6.15): what
    lets a sandbox's init be a reaper only (`Create.reaper`)."""


# -- server -> zygote --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Create(Message):
    """Make a sandbox. Descriptors: [the init's end of its own socket pair, a network namespace?]."""

    kind: ClassVar[str] = "create"
    namespaces: int
    """CLONE_NEW* flags to unshare (the pid namespace included)."""
    hostname: str
    mounts: tuple[Mount, ...]
    join_netns: int | None = None
    """Index of a network namespace descriptor to enter before unsharing the rest."""
    uid: int = 0
    gid: int = 0
    """Who every process of the sandbox runs as (the init itself keeps only what spawning needs)."""
    cgroup_files: tuple[str, ...] = ()
    """The init's own cgroups (`cgroup.procs` files), where it returns after starting a program in others."""
    user_namespace: bool = False
    """Unshare a user namespace with the rest, mapping only the server's uid and gid (`uid`, `gid`: the same)."""
    landlock: Confinement | None = None
    """Landlock rules the init puts in force on itself, and so on all it starts, once set up."""
    loopback: bool = False
    """Bring the new network namespace's loopback up (the root server's hub does it otherwise)."""
    firewall: str | None = None
    """nftables rules the init applies in its network namespace (desktop/sandbox/slirp.py)."""
    reaper: bool = False
    """Once set up, the init becomes a reaper only (desktop/sandbox/init.py `become_reaper`): requests then go to a
    serving process the zygote starts in the sandbox on demand (`Enter`), and every exit is read off the
    program's pidfd."""


# -- server -> init ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spawn(Message):
    """Start a program. Descriptors: the child's, placed at `targets[i]` (0, 1, 2 and any extra)."""

    kind: ClassVar[str] = "spawn"
    id: int
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None
    targets: tuple[int, ...]
    tty: bool = False
    """fd 0 is a pty: make it the new session's controlling terminal."""
    cgroup_files: tuple[str, ...] = ()
    """The cgroups (`cgroup.procs` files) the program starts in."""


@dataclass(frozen=True)
class Open(Message):
    """Open a path inside the sandbox as its user; the reply carries the descriptor."""

    kind: ClassVar[str] = "open"
    id: int
    path: str
    flags: int
    mode: int = 0o644


@dataclass(frozen=True)
class Call(Message):
    """Run `function` ("module:name" of a module the zygote preloaded) in a child of the init, as the sandbox's
    user: `function(args, fds)` answers a JSON object and descriptors. Descriptors: [the socket the child answers
    on (with `Result`, or `Failed` with id -1), then the function's own]."""

    kind: ClassVar[str] = "call"
    id: int
    function: str
    args: dict[str, Any]
    cgroup_files: tuple[str, ...] = ()
    """The cgroups (`cgroup.procs` files) the child runs in, as a program would."""


# -- server -> zygote, for a sandbox whose init is a reaper only ------------------------------------------------

@dataclass(frozen=True)
class Enter(Message):
    """Start a serving process in a sandbox whose init is a reaper only: a child of the zygote enters the init's
    namespaces, and its own child (in the sandbox's pid namespace) puts on the sandbox's restrictions and serves
    `Spawn`, `Open` and `Call` on the socket it was given as the init would (desktop/sandbox/entry.py), until the
    server closes it. Descriptors: [a pidfd of the sandbox's init, the serving process's end of its socket]."""
    kind: ClassVar[str] = "enter"
    namespaces: int
    """The CLONE_NEW* flags of the init's namespaces to enter (the user namespace's included where it has one)."""
    uid: int
    gid: int
    landlock: Confinement | None = None
    cgroup_files: tuple[str, ...] = ()
    """The session's cgroups (`cgroup.procs` files), where the serving process stays, as the init would."""


@dataclass(frozen=True)
class Firewall(Message):
    """Apply `script` (nftables, one transaction) in the network namespace of a sandbox whose server is not root:
    a child of the zygote enters the init's user and network namespaces, where it holds CAP_NET_ADMIN as the init
    did when it applied the first rules (`Create.firewall`), applies it and answers `Result` or `Failed` on a
    socket of its own. Descriptors: [a pidfd of the sandbox's init, the socket the child answers on]."""

    kind: ClassVar[str] = "firewall"
    script: str


# -- init -> server ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Started(Message):
    """The sandbox's init runs; descriptors: [a pidfd of the init]."""

    kind: ClassVar[str] = "started"


@dataclass(frozen=True)
class Ready(Message):
    """The init set the sandbox up (mounts, hostname) and takes requests."""

    kind: ClassVar[str] = "ready"


ARGUMENTS_STAGE = "arguments"
"""A `Failed` stage: the request's own arguments cannot be used (an embedded NUL, a '=' in a variable's name);
the caller's mistake, where every other stage is the machine's answer."""


@dataclass(frozen=True)
class Failed(Message):
    """A request (or the setup, id -1) failed with `errno` at `stage`."""

    kind: ClassVar[str] = "failed"
    id: int
    errno: int
    stage: str
    message: str = ""


@dataclass(frozen=True)
class Spawned(Message):
    """The program of request `id` runs as `pid` (inside the sandbox); descriptors: [its pidfd]."""

    kind: ClassVar[str] = "spawned"
    id: int
    pid: int


@dataclass(frozen=True)
class Opened(Message):
    """Descriptors: [the file opened for request `id`]."""

    kind: ClassVar[str] = "opened"
    id: int


@dataclass(frozen=True)
class Exited(Message):
    """A spawned program ended; `status` as waitpid(2) gives it."""

    kind: ClassVar[str] = "exited"
    pid: int
    status: int


@dataclass(frozen=True)
class Result(Message):
    """What a `Call`'s function answered, on the call's own socket (a process of the sandbox's uid wrote it:
    data only). Descriptors: the function's; first, when `spilled`, a memfd holding `value` as JSON, for an
    answer larger than a message."""

    kind: ClassVar[str] = "result"
    value: dict[str, Any] | None
    spilled: bool = False


KINDS: dict[str, type[Message]] = {cls.kind: cls for cls in (Hello, Create, Spawn, Open, Call, Enter, Firewall, Started,
                                                             Ready, Failed, Spawned, Opened, Exited, Result)}


def encode(message: Message) -> bytes:
    body = asdict(message)
    body["kind"] = message.kind
    return json.dumps(body, separators=(",", ":")).encode()


def decode(data: bytes) -> Message:
    body: dict[str, Any] = json.loads(data)
    cls = KINDS[body.pop("kind")]
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in body:
            continue
        value = body[f.name]
        if f.name == "mounts":
            value = tuple(Mount(**{**m, "kind": MountKind(m["kind"])}) for m in value)
        elif f.name == "landlock" and value is not None:
            value = Confinement(read=tuple(value["read"]), write=tuple(value["write"]), hidden=tuple(value["hidden"]),
                                tcp=value["tcp"], scoped=value["scoped"])
        elif isinstance(value, list):
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """The two ends of one channel, both close-on-exec, with room for the largest message."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for end in (ours, theirs):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE_BYTES)
    return ours, theirs


def send(sock: socket.socket, message: Message, fds: tuple[int, ...] | list[int] = ()) -> None:
    """Blocking send (the zygote and the init; the server's side is desktop/sandbox/channel.py)."""
    socket.send_fds(sock, [encode(message)], list(fds))


def receive(sock: socket.socket) -> tuple[Message, list[int]] | None:
    """The next message and its descriptors; None once the other end closed."""
    data, fds, _flags, _address = socket.recv_fds(sock, MAX_MESSAGE_BYTES, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return decode(data), fds
