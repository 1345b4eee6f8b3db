"""A desktop's sandbox's view of the files (docs/security.md "The boundary"): what the server writes for it on the
host (its /etc files, its X socket directory, its HOME and runtime directory, its X cookie) and the mounts its init
makes of them and of the machine.

The view: a proc of its own pid namespace; empty /tmp, /var/tmp, /run and /dev/shm; the server's state directory
hidden; of it only the desktop's HOME, bound back at its own path, and the desktop's runtime directory (its sockets:
the buses, the sound server), also at its path, so that an address is the same inside and out; the X socket
directory, which the server reaches from outside through a link of the display's usual path
(/tmp/.X11-unix/X<n>); /etc/passwd, /etc/group, /etc/hostname and /etc/hosts of its own. Everything else of the
machine is seen as the sandbox's uid sees it: read-only where it is not that uid's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop.sandbox import protocol, users, xauth

X11_DIR = "/tmp/.X11-unix"
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm")
"""World-writable places every desktop gets empty, so that nothing one leaves there reaches another."""
DBUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- Written by sandbox-desktop: the desktop's session bus, as the machine configures it, which the server (uid {uid})
     may also join: it switches accessibility on there (docs/accessibility.md). -->
<busconfig>
  <include>/usr/share/dbus-1/session.conf</include>
  <policy context="default"><allow user="{uid}"/></policy>
</busconfig>
"""


@dataclass(frozen=True)
class SandboxPlan:
    """Where a desktop's sandbox keeps its files, and what of the machine it sees."""

    desktop_id: str
    state: Path
    """The sandbox's own files (its /etc files, its X socket directory), server-owned."""
    home: Path
    runtime: Path
    """The desktop's XDG_RUNTIME_DIR: its sockets, at the same path inside and out."""
    display: int
    hidden: tuple[Path, ...] = ()
    """The server's state directories: hidden but for the desktop's own HOME."""
    shared: tuple[Path, ...] = ()
    """Host paths the operator shares with every desktop (`--share`), at their own paths."""
    private: tuple[Path, ...] = ()
    """The server's user's own folders (its HOME), hidden from desktops that share its uid (a server without
    root); a share within them still shows."""
    secrets: tuple[Path, ...] = ()
    """Files of the server hidden the same way (its X cookies, where they are outside its state)."""
    home_alias: str | None = None
    """A second place its HOME is seen at (OSWorld's `/home/user`), within an empty /home: others' stay hidden."""

    @property
    def hostname(self) -> str:
        return f"desktop-{self.desktop_id}"[:63]


def prepare(plan: SandboxPlan, user: users.SandboxUser, cookie: bytes, resolv_conf: str) -> list[protocol.Mount]:
    """The sandbox's files on the host, and its mount plan (blocking)."""
    uid = user.uid
    etc = plan.state / "etc"
    x11 = plan.state / "x11"
    for folder in (etc, x11):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    x11.chmod(0o1777)
    files = {
        "passwd": users.passwd(user, str(plan.home)),
        "group": users.group(user),
        "hostname": plan.hostname + "\n",
        "hosts": f"127.0.0.1\tlocalhost {plan.hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        "resolv.conf": resolv_conf,
    }
    for name, text in files.items():
        (etc / name).write_text(text)
    for folder in (plan.home, plan.runtime):
        folder.mkdir(parents=True, exist_ok=True)
        chown_tree(folder, uid)
        folder.chmod(0o700)
    xauth.write_private(plan.runtime / "Xauthority", xauth.entries_for(plan.display, cookie, plan.hostname),
                        owner=uid if uid != os.geteuid() else None)
    (plan.runtime / "dbus-session.conf").write_text(DBUS_CONFIG.format(uid=os.geteuid()))

    mounts: list[protocol.Mount] = [protocol.Mount(protocol.MountKind.PROC, "/proc")]

    def bind(source: Path, target: str, read_only: bool = False) -> None:
        mounts.append(protocol.Mount(protocol.MountKind.BIND, target, source=str(source), read_only=read_only))

    covered: list[str] = [d for d in PRIVATE_DIRS if os.path.isdir(d)]
    for d in covered:
        mounts.append(protocol.Mount(protocol.MountKind.TMPFS, d, mode=0o1777))
    shared = [str(path) for path in plan.shared]

    def empty(targets: Sequence[str]) -> None:
        """An empty folder over each target the sandbox would otherwise see (one a share shows again)."""
        for target in targets:
            if os.path.isdir(target) and (_under(Path(target), shared) or not _under(Path(target), covered)):
                covered.append(target)
                mounts.append(protocol.Mount(protocol.MountKind.TMPFS, target, mode=0o755))

    # Shares first (a folder on the way to one that the sandbox's user could not pass, /root, is emptied so
    # that the share can be reached); then the server's state, even within a share, and the folders on the
    # way to HOME; then HOME and the runtime directory, which nothing mounted later may cover.
    empty([*map(str, plan.private), *(["/home"] if plan.home_alias else []), *_closed_ancestors(plan.shared, uid)])
    for path in plan.shared:
        bind(path, str(path))
    empty([*map(str, plan.hidden), *_closed_ancestors((plan.home, plan.runtime), uid)])
    for path in (plan.home, plan.runtime):
        bind(path, str(path))
    if plan.home_alias is not None:
        bind(plan.home, plan.home_alias)
    bind(x11, X11_DIR)
    for name in files:
        bind(etc / name, f"/etc/{name}", read_only=True)
    if plan.secrets:
        (etc / "empty").write_text("")
    for secret in plan.secrets:
        if secret.is_file() and not _under(secret, covered):
            bind(etc / "empty", str(secret), read_only=True)
    return mounts


def _under(path: Path, roots: Sequence[str]) -> bool:
    return any(path == Path(root) or Path(root) in path.parents for root in roots)


def _closed_ancestors(paths: Sequence[Path], uid: int) -> list[str]:
    """The highest folder on the way to each path that `uid` may not pass (not its own, no x for others)."""
    found: list[str] = []
    for path in paths:
        for ancestor in reversed(path.parents):
            try:
                st = ancestor.stat()
            except OSError:
                break
            if st.st_uid != uid and not st.st_mode & 0o001:
                found.append(str(ancestor))
                break
    return found


def chown_tree(root: Path, uid: int) -> None:
    """Give the tree to the sandbox's user (what the server wrote there, a template's copy); it has it already
    where it is the server's own (a server without root)."""
    if uid == os.geteuid():
        return
    with contextlib.suppress(OSError):
        os.chown(root, uid, uid, follow_symlinks=False)
    for folder, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            with contextlib.suppress(OSError):
                os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
