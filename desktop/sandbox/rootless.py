"""What a server without root can put around its desktops, found at its start (docs/security.md "Without root").

The zygote's trial (desktop/sandbox/zygote.py, `Hello`) says whether a user namespace of its own works here,
with pid, mount, IPC, UTS and network namespaces inside it and proc and tmpfs mounted there, whether
/dev/net/tun opens in it, and which Landlock ABI the kernel offers. This module adds what the server sees
itself (slirp4netns, libnftables, a uid range: newuidmap and /etc/subuid) and decides, strongest first:

- `USER_NAMESPACE`: every desktop in a user namespace that maps only the server's uid, with its own pid, mount,
  IPC, UTS and network namespaces and the same view of the files as a root server's sandbox, plus Landlock
  where the kernel has it (writes only to its own HOME, runtime directory and private folders; no abstract
  socket or signal out of it). Its network: slirp4netns, with nftables inside keeping the host's own
  addresses out of reach, where both work; else only its loopback.
- `LANDLOCK`: namespaces are refused (Docker's default seccomp profile refuses user namespaces): Landlock
  alone, in the server's namespaces, as its uid.
- `NONE`: neither; desktops run as the server's user, as before sandboxes existed.

`RootlessPlan` also says, per layer, what is missing and why: the start log and every desktop's answer.
"""

from __future__ import annotations

import ctypes.util
import os
import pwd
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from desktop.sandbox import landlock, protocol
from desktop.sandbox.layers import Layer

SLIRP_MTU = 65520


class Mode(StrEnum):
    USER_NAMESPACE = "user_namespace"
    LANDLOCK = "landlock"
    NONE = "none"


@dataclass(frozen=True)
class RootlessPlan:
    """What desktops of this server get, and what they lack, where the server is not root."""

    mode: Mode
    landlock_abi: int
    slirp4netns: str | None
    """The slirp4netns to give desktops their network with, or None (`network_missing` says why)."""
    network_missing: str | None
    cgroups_missing: str
    uid_range: str
    """What a uid range would take here (`newuidmap` and /etc/subuid), said in `user`'s reason."""
    namespaces_missing: str | None
    """Why no user namespace works, where none does."""

    @classmethod
    def decide(cls, hello: protocol.Hello, cgroups_missing: str = "") -> RootlessPlan:
        abi = hello.landlock_abi
        if hello.user_namespace:
            mode, why = Mode.USER_NAMESPACE, None
        else:
            why = (f"this machine refuses a user namespace of the server's own at its step "
                   f"{hello.user_namespace_stage or 'unshare'} ({os.strerror(hello.user_namespace_errno or 1)}; "
                   "Docker's default seccomp profile does, Kubernetes' `hostUsers: false` gives one)")
            mode = Mode.LANDLOCK if abi >= 1 else Mode.NONE
        slirp, network_missing = _slirp(hello) if mode is Mode.USER_NAMESPACE else (None, None)
        return cls(mode, abi, slirp, network_missing,
                   cgroups_missing or "the server's user may not make cgroups here (no delegated cgroup v2 subtree)",
                   _uid_range(), why)

    def layers(self) -> frozenset[Layer]:
        """What every desktop of this server has (its cgroup adds its layer where a delegated subtree had room)."""
        landlock_layer = {Layer.LANDLOCK} if self.landlock_abi >= 1 else set()
        if self.mode is Mode.USER_NAMESPACE:
            return frozenset({Layer.USER_NAMESPACE, Layer.PID, Layer.MOUNT, Layer.IPC, Layer.UTS, Layer.NETWORK,
                              Layer.NO_NEW_PRIVS, Layer.NO_CAPABILITIES, Layer.X_COOKIE, *landlock_layer})
        if self.mode is Mode.LANDLOCK:
            return frozenset({Layer.LANDLOCK, Layer.NO_NEW_PRIVS, Layer.X_COOKIE})
        return frozenset()

    def missing(self) -> dict[Layer, str]:
        """Each layer not in force, and why."""
        uid = os.getuid()
        same_uid = (f"every desktop runs as the server's uid ({uid}) on the host: without root a user namespace "
                    f"maps only that uid ({self.uid_range})")
        missing = {Layer.USER: same_uid, Layer.CGROUP: self.cgroups_missing}
        if self.mode is Mode.USER_NAMESPACE:
            if self.landlock_abi < 1:
                missing[Layer.LANDLOCK] = ("this kernel has no Landlock (5.13 or later, enabled at boot): nothing "
                                           "keeps a desktop from writing what the server's uid may write outside "
                                           "its view's private folders")
            if self.network_missing is not None:
                missing[Layer.NETWORK] = self.network_missing
            return missing
        assert self.namespaces_missing is not None
        for layer in (Layer.USER_NAMESPACE, Layer.PID, Layer.MOUNT, Layer.IPC, Layer.UTS, Layer.NETWORK,
                      Layer.NO_CAPABILITIES):
            missing[layer] = self.namespaces_missing
        if self.mode is Mode.LANDLOCK:
            missing[Layer.MOUNT] = (f"{self.namespaces_missing}: /tmp is the machine's, where every desktop's "
                                    "runtime directory is (its display's cookie, its buses, its sound server): "
                                    "another desktop's display and buses are reachable")
            missing[Layer.NETWORK] = (f"{self.namespaces_missing}: Landlock refuses every TCP bind and connect "
                                      "(it tells ports apart, not addresses); UDP is not covered"
                                      if self.landlock_abi >= landlock.NET_ABI else
                                      f"{self.namespaces_missing}, and Landlock ABI {self.landlock_abi} cannot "
                                      "restrict TCP (Linux 6.7): the host's loopback and the server's port are "
                                      "reachable")
        else:
            missing[Layer.LANDLOCK] = "this kernel has no Landlock (5.13 or later, enabled at boot)"
            missing[Layer.NO_NEW_PRIVS] = missing[Layer.X_COOKIE] = self.namespaces_missing
        return missing

    def log_lines(self) -> list[str]:
        """The start log: which layers desktops get, and which boundary is missing and why."""
        features = ", ".join(landlock.describe(self.landlock_abi)) or "none"
        lines = [f"the server is not root: desktops get {self.mode.value} sandboxes: "
                 f"{', '.join(sorted(self.layers())) or 'no layer'} (Landlock ABI {self.landlock_abi}: {features})"]
        lines += [f"desktops lack {layer.value}: {why}" for layer, why in sorted(self.missing().items())]
        return lines


def _slirp(hello: protocol.Hello) -> tuple[str | None, str | None]:
    """The slirp4netns to use, or why desktops get only their loopback."""
    only = "its namespace has only a loopback: it reaches nothing, the internet neither"
    binary = shutil.which("slirp4netns")
    if binary is None:
        return None, f"{only} (slirp4netns is not installed)"
    if hello.tun_errno != 0:
        reason = os.strerror(hello.tun_errno) if hello.tun_errno > 0 else "not tried"
        return None, f"{only} (slirp4netns cannot open /dev/net/tun in a user namespace: {reason})"
    if ctypes.util.find_library("nftables") is None:
        return None, (f"{only} (libnftables is not installed: nothing would keep the host's own addresses out of "
                      "reach through slirp4netns)")
    return binary, None


def _uid_range() -> str:
    """Whether a range of uids (one per desktop) could be had: `newuidmap` and a line of /etc/subuid."""
    newuidmap = shutil.which("newuidmap")
    try:
        name = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        name = str(os.getuid())
    try:
        lines = Path("/etc/subuid").read_text().splitlines()
    except OSError:
        lines = []
    ranges = [line for line in lines if line.split(":")[0] in (name, str(os.getuid()))]
    if newuidmap is None:
        return "no uid range: newuidmap (Debian: uidmap) is not installed"
    if not ranges:
        return f"no uid range: /etc/subuid has none for {name}"
    return f"a uid range is configured ({ranges[0]}), which desktops do not use yet"


def server_home() -> Path | None:
    """The server's user's HOME, which desktops of its uid must not see (None where it has none worth hiding)."""
    try:
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None
    return home if home.is_dir() and home != Path("/") else None


def exposed(mode: Mode, paths: tuple[Path, ...]) -> tuple[str, ...]:
    """Which of the server's `paths` (its state, its cookies) Landlock alone cannot hide from its desktops: those
    within /tmp, which every desktop's X server must write where there is no mount namespace to give it its own."""
    if mode is not Mode.LANDLOCK:
        return ()
    return landlock.Confinement(write=("/tmp",), hidden=tuple(map(str, paths))).exposed()


def confinement(mode: Mode, abi: int, own: tuple[Path, ...], private: tuple[str, ...], shared: tuple[Path, ...],
                hidden: tuple[Path, ...]) -> landlock.Confinement | None:
    """A desktop's Landlock rules: it reads everything else its uid may, and writes only `own` (its HOME and
    runtime directory), its `private` folders (/tmp..., empty in a mount namespace of its own), /dev, /proc and
    the shares; `hidden` (the server's state, HOME and cookies) it may not read either where no mount namespace
    hides them. None where the kernel has no Landlock."""
    if abi < 1 or mode is Mode.NONE:
        return None
    write = (*map(str, own), *private, "/dev", "/proc", *map(str, shared))
    if mode is Mode.USER_NAMESPACE:
        return landlock.Confinement(read=("/",), write=write)
    return landlock.Confinement(read=("/",), write=write, hidden=tuple(map(str, hidden)),
                                tcp=abi >= landlock.NET_ABI)
