"""A sandboxed desktop's display number, held on the machine, and the path its X socket is reached by.

A sandboxed X server makes its lock file and its socket in the sandbox's own /tmp, where no other X server
of the machine sees them; so the server takes the display for it the way X servers do, with
`/tmp/.X<n>-lock` holding the server's pid (every X server, and `display_in_use`, sees the number as taken
while the server lives), and puts at `/tmp/.X11-unix/X<n>` a link to the socket in the sandbox's X socket
folder: the path every X client (libX11, xcb, python-xlib) tries, so the server's own clients reach the
display unchanged. Only with the display's cookie: the X server admits no other client
(desktop/sandbox/xauth.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from desktop.sandbox import linux

X11_DIR = Path("/tmp/.X11-unix")
ATTEMPTS = 64


@dataclass
class Display:
    number: int
    _linked: bool = False

    @property
    def lock(self) -> Path:
        return Path(f"/tmp/.X{self.number}-lock")

    @property
    def socket(self) -> Path:
        return X11_DIR / f"X{self.number}"

    def link(self, socket_folder: Path) -> None:
        """Make `/tmp/.X11-unix/X<n>` lead to the sandbox's socket (blocking)."""
        target = socket_folder / f"X{self.number}"
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()  # a dead server's, or a stale link: the lock says the number is ours
        self.socket.symlink_to(target)
        self._linked = True

    def hand_over(self) -> None:
        """Give the number's lock up to the X server about to start for it, which takes the lock itself (a
        sandbox in the machine's /tmp, desktop/sandbox/rootless.py); blocking."""
        with contextlib.suppress(FileNotFoundError):
            if _owner(self.lock) == os.getpid():
                self.lock.unlink()

    def release(self) -> None:
        if self._linked:
            with contextlib.suppress(FileNotFoundError):
                self.socket.unlink()
            self._linked = False
        self.hand_over()


def reserve(first: int, exact: bool) -> Display:
    """The first display from `first` (only `first` if `exact`) no X server or other server holds (blocking)."""
    X11_DIR.mkdir(mode=0o1777, exist_ok=True)
    candidates = [first] if exact else range(first, first + ATTEMPTS)
    for number in candidates:
        display = Display(number)
        if _take(display.lock):
            if not _answers(display.socket):
                return display
            display.lock.unlink()  # an X server without a lock file (a /tmp clean-up removed it) still runs
    tried = f":{first}" if exact else f":{first} to :{first + ATTEMPTS - 1}"
    raise OSError(f"no free X display ({tried})")


def _take(lock: Path) -> bool:
    """Make the lock file ours, or take over one whose owner is gone; False if a live process holds it.

    The pid is written to a file of our own first and linked into place, as X servers make theirs: a lock that
    exists always names its owner. (Created empty and written after, another server reading it in between took
    it for a dead one's and took the number too: two desktops on one display.) A dead owner's lock is moved aside
    before it is removed, and put back if it turns out to be a live one's that replaced it meanwhile."""
    mine = lock.with_name(f"{lock.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o444)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid():10d}\n")  # the X servers' own format
        for _ in range(2):
            try:
                os.link(mine, lock)
                return True
            except FileExistsError:
                if not _remove_if_dead(lock, mine):
                    return False
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            mine.unlink()


def _remove_if_dead(lock: Path, mine: Path) -> bool:
    """Remove `lock` if no live process holds it; False (left as it is) if one does."""
    owner = _owner(lock)
    if owner is not None and linux.pid_alive(owner):
        return False
    aside = mine.with_name(mine.name + ".dead")
    try:
        os.rename(lock, aside)
    except FileNotFoundError:
        return True  # another server removed it first: try to link again
    moved = _owner(aside)
    if moved is not None and moved != owner and linux.pid_alive(moved):  # a live lock that replaced the dead one
        with contextlib.suppress(FileExistsError):
            os.link(aside, lock)
        aside.unlink()
        return False
    aside.unlink()
    return True


def _owner(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip())
    except (OSError, ValueError):
        return None


def _answers(path: Path) -> bool:
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
