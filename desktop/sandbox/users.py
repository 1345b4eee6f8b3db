"""A Unix user per desktop, with no line written to the machine's /etc.

Each sandbox runs as a uid of its own, taken from a range no account uses and held with a lock file
while its desktop lives, so that servers running side by side never hand out the same one. Inside
the sandbox, /etc/passwd and /etc/group are the machine's with one more line, bound over the real
files in the sandbox's mount namespace only: `getpwuid` works (dbus-daemon refuses to start without
it), and the user is called `user`, its HOME the desktop's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
from dataclasses import dataclass
from pathlib import Path

from desktop.core.parsing import ascii_int

FIRST_UID = 3_000_000
UID_COUNT = 1_000_000
"""uids FIRST_UID .. FIRST_UID + UID_COUNT: above the ranges distributions give accounts and subordinate ids."""
UIDS_ENV = "SANDBOX_DESKTOP_UIDS"
"""The default of `sandbox-desktop server --sandbox-uids FIRST-LAST`: another range, for a server in a user namespace
that maps fewer ids (a Kubernetes pod with `hostUsers: false` maps 0-65535: docs/kubernetes.md "Isolated desktops")."""
USER_NAME = "user"
LOCKS = Path("/run/sandbox-desktop/uids")


@dataclass(frozen=True)
class UidRange:
    """The uids desktops take theirs from: `first` .. `first + count - 1`."""

    first: int = FIRST_UID
    count: int = UID_COUNT

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"

    @classmethod
    def parse(cls, text: str) -> UidRange:
        """`FIRST-LAST` (both included). Refused: uid 0, ranges past 2**32 - 2 (-1 means "unchanged" to
        setuid), and fewer than 2 ids (a desktop and the next one need two)."""
        first, sep, last = text.strip().partition("-")
        low, high = ascii_int(first), ascii_int(last)
        if not sep or low is None or high is None:
            raise ValueError(f"{text!r} is not a range FIRST-LAST of uids, e.g. 10000-65533")
        if not 0 < low < high <= 2**32 - 2:
            raise ValueError(f"{text!r}: the range must start above 0 and end above its start, at most "
                             f"{2**32 - 2}, e.g. 10000-65533")
        return cls(low, high - low + 1)

    @classmethod
    def from_env(cls) -> UidRange:
        """`$SANDBOX_DESKTOP_UIDS`, or the default range."""
        text = os.environ.get(UIDS_ENV, "").strip()
        return cls.parse(text) if text else cls()

    def unmapped(self, id_map: str | None = None) -> str | None:
        """Why some id of the range cannot be a desktop's in this process's user namespace (setuid or setgid to
        an unmapped id fails with EINVAL), or None. `id_map`: the text of a /proc/self/uid_map or gid_map;
        without it, both are read."""
        if id_map is None:
            for kind in ("uid", "gid"):
                try:
                    text = Path(f"/proc/self/{kind}_map").read_text()
                except OSError:
                    continue
                if self.unmapped(text) is not None:
                    return (f"the sandbox uids {self} are not all mapped in the server's user namespace "
                            f"(/proc/self/{kind}_map: {' '.join(text.split())}): start it with --sandbox-uids "
                            f"(${UIDS_ENV}) set to a range it maps (docs/kubernetes.md \"Isolated desktops\")")
            return None
        covered = self.first
        for inside, _outside, length in sorted(tuple(map(int, line.split())) for line in id_map.splitlines()
                                               if len(line.split()) == 3):
            if inside <= covered < inside + length:
                covered = inside + length
        return None if covered > self.last else f"uid {covered} is not mapped"


@dataclass
class SandboxUser:
    uid: int
    gid: int
    _lock: int | None

    def release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.unlink(LOCKS / str(self.uid))
            os.close(self._lock)
            self._lock = None


def allocate(uids: UidRange | None = None) -> SandboxUser:
    """A uid of `uids` (default: the default range) no other live desktop of this machine holds (blocking: a few
    file operations)."""
    uids = uids or UidRange()
    if (reason := uids.unmapped()) is not None:
        raise OSError(errno.EINVAL, reason)
    LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = random.randrange(uids.count)
    for offset in range(min(256, uids.count)):
        uid = uids.first + (start + offset) % uids.count
        fd = os.open(LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if not _owns_files(uid):
            return SandboxUser(uid, uid, fd)
        os.close(fd)
    raise OSError(f"no free sandbox uid in {uids} after {min(256, uids.count)} tries")


def _owns_files(uid: int) -> bool:
    """A uid with a process still running (a desktop of a server that was killed) is not free."""
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        return True
    return False


def passwd(user: SandboxUser, home: str) -> str:
    """The sandbox's /etc/passwd: its user first (so `user` names it), then the machine's accounts."""
    line = f"{USER_NAME}:x:{user.uid}:{user.gid}:sandbox-desktop:{home}:/bin/sh\n"
    return line + _read("/etc/passwd")


def group(user: SandboxUser) -> str:
    return f"{USER_NAME}:x:{user.gid}:\n" + _read("/etc/group")


def _read(path: str) -> str:
    try:
        text = Path(path).read_text()
    except OSError:
        return ""
    return text if text.endswith("\n") or not text else text + "\n"
