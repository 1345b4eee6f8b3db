"""A Unix user per desktop, with no line written to the machine's /etc.

Each sandbox runs as a uid of its own, taken from a range no account uses and held with a lock file
while its desktop lives, so that servers running side by side never hand out the same one. Inside
the sandbox, /etc/passwd and /etc/group are the machine's with one more line, bound over the real
files in the sandbox's mount namespace only: `getpwuid` works (dbus-daemon refuses to start without
it), and the user is called `user`, its HOME the desktop's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
from dataclasses import dataclass
from pathlib import Path

FIRST_UID = 3_000_000
UID_COUNT = 1_000_000
"""uids FIRST_UID .. FIRST_UID + UID_COUNT: above the ranges distributions give accounts and subordinate ids."""
USER_NAME = "user"
LOCKS = Path("/run/sandbox-desktop/uids")


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


def allocate() -> SandboxUser:
    """A uid no other live desktop of this machine holds (blocking: a few file operations)."""
    LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = random.randrange(UID_COUNT)
    for offset in range(256):
        uid = FIRST_UID + (start + offset) % UID_COUNT
        fd = os.open(LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if not _owns_files(uid):
            return SandboxUser(uid, uid, fd)
        os.close(fd)
    raise OSError("no free sandbox uid after 256 tries")


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
