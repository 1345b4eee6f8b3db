"""python-xlib's connections waited on with poll(), so they work at any descriptor number.

python-xlib 0.33 waits on its socket in one place, `send_and_recv` (every reply, flush and
`pending_events`), with `select.select`, which refuses a descriptor >= FD_SETSIZE (1024): "filedescriptor out
of range in select()". A server holding a few dozen desktops has opened that many (docs/operations.md,
"Descriptors"), and every X connection it makes after that fails. `install()` gives that module, in place of
the `select` module it imported, an object whose `select()` is a poll() of the same descriptors with the
same answers (readable on data, hang-up or error; writable when writing would not block or would fail).

It reads that version's internals (the module's `select` global, and that `select` and `error` are all it
uses of it): with another python-xlib than PINNED_XLIB it refuses to install and says so, and connections
keep the 1024 ceiling. The other waits on X connections need nothing: desktop/x11/raw.py and the event
threads (desktop/events/xwatch.py, desktop/clipboard/owner.py) poll or use `selectors` (epoll), and libxcb
(under mss and libX11) polls.
"""

from __future__ import annotations

import errno
import logging
import math
import select
from collections.abc import Sequence
from typing import Any

import Xlib
import Xlib.protocol.display as xlib_display

PINNED_XLIB = (0, 33)

log = logging.getLogger(__name__)

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


def _fileno(obj: Any) -> int:
    return obj if isinstance(obj, int) else int(obj.fileno())


def poll_select(readable: Sequence[Any], writable: Sequence[Any], exceptional: Sequence[Any],
                timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """`select.select`'s answer, found with poll(): no limit on descriptor numbers. `exceptional` is not
    watched (python-xlib passes none)."""
    masks: dict[int, int] = {}
    for obj in readable:
        masks[_fileno(obj)] = masks.get(_fileno(obj), 0) | select.POLLIN | select.POLLPRI
    for obj in writable:
        masks[_fileno(obj)] = masks.get(_fileno(obj), 0) | select.POLLOUT
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    # select's timeout is in seconds, poll's in milliseconds: round up, so a short wait never becomes no wait.
    ready = dict(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))
    if any(events & select.POLLNVAL for events in ready.values()):
        raise OSError(errno.EBADF, "Bad file descriptor")  # what select says of a closed descriptor
    return ([obj for obj in readable if ready.get(_fileno(obj), 0) & _READABLE],
            [obj for obj in writable if ready.get(_fileno(obj), 0) & _WRITABLE], [])


class _PolledSelect:
    """What python-xlib 0.33's protocol/display.py uses of the `select` module: `select()`, and `error`,
    which it catches around it (an alias of OSError since Python 3.3)."""

    error = OSError
    select = staticmethod(poll_select)


def installed() -> bool:
    return isinstance(xlib_display.select, _PolledSelect)


def install() -> bool:
    """Make python-xlib wait with poll(); False (and a warning) if this python-xlib is not the pinned one."""
    if installed():
        return True
    if tuple(Xlib.__version__) != PINNED_XLIB or xlib_display.select is not select:
        log.warning("python-xlib %s is not %s, whose internals desktop/x11/xlib_poll.py patches: its X "
                    "connections keep select() and fail at descriptors >= 1024 (about 30 desktops)",
                    ".".join(map(str, Xlib.__version__)), ".".join(map(str, PINNED_XLIB)))
        return False
    xlib_display.select = _PolledSelect()
    return True
