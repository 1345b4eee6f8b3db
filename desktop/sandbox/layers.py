"""The layers a sandbox is made of, and what a desktop reports about them (`sandbox: {isolated, layers}`).

A desktop is `isolated` only when every layer of `REQUIRED` is in force (a root server's), or every layer of
`ROOTLESS_REQUIRED` (a server without root's): then the server's token and state, other desktops' files,
processes and displays, the server's processes and port, and the host's loopback are all out of its reach
(docs/security.md "The boundary", "Without root"). With fewer layers a desktop says
which it has and which are missing, and why; it never claims more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Layer(StrEnum):
    USER = "user"
    """Its own Unix uid: other users' files, signals and /proc entries are out of reach."""
    PID = "pid"
    """Its own pid namespace: it sees only its own processes."""
    MOUNT = "mount"
    """Its own mount namespace: a private /tmp, /run and /dev/shm; of the server's state only its HOME."""
    IPC = "ipc"
    """Its own System V IPC and POSIX message queues."""
    UTS = "uts"
    """Its own hostname."""
    NETWORK = "network"
    """Its own network namespace: no loopback but its own, only the network its rules allow."""
    CGROUP = "cgroup"
    """Its own cgroup: limits, usage, freeze and kill of every process it runs."""
    NO_NEW_PRIVS = "no_new_privs"
    """No program it runs gains privileges (setuid binaries, file capabilities)."""
    NO_CAPABILITIES = "no_capabilities"
    """Its programs hold no capability, and none can be regained (empty bounding set)."""
    X_COOKIE = "x_cookie"
    """Its X server admits only clients with its cookie, on a socket path only (no TCP, no abstract socket)."""
    USER_NAMESPACE = "user_namespace"
    """A user namespace of its own, mapping only the server's uid (where the server is not root): it holds the
    desktop's other namespaces, in which its init alone had capabilities."""
    LANDLOCK = "landlock"
    """Landlock rules (where the server is not root): it writes only its own HOME, runtime directory and
    private folders, and reaches no abstract socket, signal or ptrace out of its sandbox."""


REQUIRED = frozenset({Layer.USER, Layer.PID, Layer.MOUNT, Layer.IPC, Layer.NETWORK, Layer.NO_NEW_PRIVS,
                      Layer.NO_CAPABILITIES, Layer.X_COOKIE})
"""What `isolated: true` takes: each closes a way to the token, another desktop or the server."""

ROOTLESS_REQUIRED = REQUIRED - {Layer.USER} | {Layer.USER_NAMESPACE, Layer.LANDLOCK}
"""The same for a server without root, whose desktops share its uid: the user namespace holds the rest (the view
of the files hides its token, state and HOME), and Landlock keeps them from writing what that uid may write
elsewhere."""


SANDBOX_LAYERS = frozenset({Layer.USER, Layer.PID, Layer.MOUNT, Layer.IPC, Layer.UTS, Layer.NETWORK,
                            Layer.NO_NEW_PRIVS, Layer.NO_CAPABILITIES, Layer.X_COOKIE})
"""What every sandbox of a root server puts in force; a cgroup adds its layer. Without the server's network
hub the sandbox still has a network namespace of its own: one with only its loopback, which reaches nothing."""


@dataclass(frozen=True)
class SandboxReport:
    """What a desktop's answer says of its sandbox."""

    layers: frozenset[Layer] = frozenset()
    missing: dict[Layer, str] = field(default_factory=dict)
    """Each layer not in force, and why (the machine lacks it, or the server was told not to)."""

    @property
    def isolated(self) -> bool:
        return self.layers >= REQUIRED or self.layers >= ROOTLESS_REQUIRED

    def ordered(self) -> list[Layer]:
        return [layer for layer in Layer if layer in self.layers]
