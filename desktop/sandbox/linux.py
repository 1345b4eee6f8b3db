"""The Linux calls a sandbox is made of that Python 3.11's `os` lacks: unshare, setns, mount, prctl, capset, and
the id maps and loopback of a user namespace of its own (Landlock: desktop/sandbox/landlock.py).

Thin ctypes wrappers over libc, raising OSError with errno as `os` does. Standard library only: the
in-sandbox init (desktop/sandbox/init.py) imports this module too, and it runs with nothing else.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

# <linux/sched.h>
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# <sys/mount.h>
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
ST_RELATIME = 4096
MNT_DETACH = 2

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# <linux/capability.h>
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
CAP_KILL = 5
CAP_SETGID = 6
CAP_SETUID = 7
CAP_SETPCAP = 8


def _check(result: int, what: str) -> int:
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int = 0) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    def text(value: str | None) -> bytes | None:
        return value.encode() if value is not None else None

    _check(_libc.mount(text(source), target.encode(), text(fstype), ctypes.c_ulong(flags), text(data)),
           f"mount {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    return _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                              ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 40


def drop_bounding_set() -> None:
    """Drop every capability from the bounding set (needs CAP_SETPCAP): nothing exec'd later may gain one."""
    for cap in range(last_capability() + 1):
        prctl(PR_CAPBSET_DROP, cap)


def no_new_privs() -> None:
    """No exec of this process or its children gains privileges (setuid binaries, file capabilities)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def clear_ambient() -> None:
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def keep_only_capabilities(caps: tuple[int, ...]) -> None:
    """Reduce this process's effective, permitted and inheritable sets to `caps` (capset(2))."""
    header = struct.pack("Ii", _LINUX_CAPABILITY_VERSION_3, 0)
    low = high = 0
    for cap in caps:
        if cap < 32:
            low |= 1 << cap
        else:
            high |= 1 << (cap - 32)
    data = struct.pack("IIIIII", low, low, 0, high, high, 0)  # effective, permitted, inheritable per word
    _check(_libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


def pid_alive(pid: int) -> bool:
    """Whether `pid` names a process in this pid namespace (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pidfd_pid(pidfd: int) -> int | None:
    """The pid a pidfd refers to, as this process's pid namespace sees it (None once it was reaped)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as fh:
            for line in fh:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        return None
    return None


# <linux/pidfd.h>: PIDFD_GET_INFO = _IOWR(0xFF, 11, struct pidfd_info), whose first version is 64 bytes.
_PIDFD_INFO_SIZE = 64
PIDFD_GET_INFO = (3 << 30) | (_PIDFD_INFO_SIZE << 16) | (0xFF << 8) | 11
PIDFD_INFO_EXIT = 1 << 3
_PIDFD_INFO_EXIT_CODE = 16 + 11 * 4
"""struct pidfd_info: mask and cgroupid (u64 each), eleven u32 ids, then the exit code (a wait status)."""


def pidfd_exit_status(pidfd: int) -> int | None:
    """How the process ended, as waitpid(2) gives it, whoever reaped it; None while it runs or has not been
    reaped yet. OSError where the kernel has no PIDFD_GET_INFO (before Linux 6.13)."""
    info = bytearray(struct.pack("QQ", PIDFD_INFO_EXIT, 0) + bytes(_PIDFD_INFO_SIZE - 16))
    try:
        fcntl.ioctl(pidfd, PIDFD_GET_INFO, info)
    except ProcessLookupError:  # reaped before the kernel kept exit information (Linux 6.13, 6.14)
        return None
    (mask,) = struct.unpack_from("Q", info, 0)
    if not mask & PIDFD_INFO_EXIT:
        return None
    (status,) = struct.unpack_from("i", info, _PIDFD_INFO_EXIT_CODE)
    return int(status)


def map_self(uid: int, gid: int) -> None:
    """In a user namespace this process just made: its uid and gid map to the same numbers outside, and only
    they (what a process without privilege may write; setgroups(2) is refused from now on, as the kernel
    asks for a gid map written without it)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def link_up(name: str) -> None:
    """Bring a link of this process's network namespace up, as `ip link set NAME up` does (CAP_NET_ADMIN)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", name.encode(), 0)
        flags = struct.unpack_from("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", name.encode(), flags | IFF_UP))


def mount_flags(path: str) -> int:
    """The flags of the mount `path` is on that a remount in a user namespace must keep (the kernel locks
    them: nosuid, nodev, noexec, the atime ones)."""
    flag = os.statvfs(path).f_flag
    kept = flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)  # ST_* and MS_* agree here
    return kept | (MS_RELATIME if flag & ST_RELATIME else 0)
