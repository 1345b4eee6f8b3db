"""Why a command could not be started, as an error the client can act on.

A command that does not exist or cannot be executed, a working directory that is missing or not a
directory, an argument list over the kernel's limit: each is a mistake in the request, so a 4xx
with a code of its own that names the field and the value (docs/processes.md, "Errors"). Only the
machine's own failures (no memory, no free process slot) remain a 5xx, and retrying them can help.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping

from desktop.core.errors import (
    ArgumentsTooLong,
    CommandBusy,
    CommandNotExecutable,
    CommandNotFound,
    DomainError,
    SpawnError,
    StreamError,
    WorkingDirectoryNotAccessible,
    WorkingDirectoryNotDirectory,
    WorkingDirectoryNotFound,
)

__all__ = ["DESKTOP_USER", "MAX_ARG_BYTES", "SERVER_USER", "SpawnError", "locate", "spawn_error"]

# Errors of looking the command up: it is not there.
_MISSING = (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP)
# Errors of executing what was found: it is there, but is no program this user can run.
_NOT_EXECUTABLE = (errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.EISDIR)
# The kernel's limit on one argument or environment string (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_BYTES = 128 * 1024


SERVER_USER = "the server's user"
DESKTOP_USER = "the desktop's user"
"""Who could not run it: a command of a sandboxed desktop runs as its user, in its view of the files."""


def spawn_error(command: str, cwd: str | None, env: Mapping[str, str] | None, exc: OSError,
                who: str = SERVER_USER) -> DomainError:
    """The error for a failed spawn of `command` in `cwd` with `env` (None: the server's environment) by `who`."""
    code = exc.errno
    reason = exc.strerror or str(exc)
    # subprocess names the directory when the child's chdir failed (the command, when its exec did).
    if cwd is not None and exc.filename == cwd and not (command == cwd and os.path.isdir(cwd)):
        return _cwd_error(cwd, code, reason, who)
    if code == errno.E2BIG:
        phrase = (f" is over the kernel's limit for starting a process ({reason}): at most "
                  f"{MAX_ARG_BYTES // 1024} KiB per argument, and {os.sysconf('SC_ARG_MAX') // 1024} KiB "
                  "for all arguments and the environment together")
        return ArgumentsTooLong("args", command, phrase, message=f"args of {command!r}{phrase}")
    if code == errno.ETXTBSY:
        return CommandBusy("command", command,
                           "is open for writing (text file busy): start it once the write is done")
    if code not in _MISSING + _NOT_EXECUTABLE:
        return StreamError(f"failed to start {command!r}: {reason}")
    found = locate(command, cwd, env)
    if found is None:
        where = "does not exist" if "/" in command else "was not found on PATH"
        return CommandNotFound("command", command, where + ("" if code == errno.ENOENT else f" ({reason})"))
    return CommandNotExecutable("command", command, _not_executable(found, code, reason, who))


def _cwd_error(cwd: str, code: int | None, reason: str, who: str) -> DomainError:
    if code in (errno.ENOENT, errno.ELOOP, errno.ENAMETOOLONG):
        return WorkingDirectoryNotFound("cwd", cwd, "does not exist" + ("" if code == errno.ENOENT else f" ({reason})"))
    if code == errno.ENOTDIR:
        return WorkingDirectoryNotDirectory("cwd", cwd, "is not a directory (it, or one of its parents, is a file)")
    if code in (errno.EACCES, errno.EPERM):
        return WorkingDirectoryNotAccessible("cwd", cwd, f"cannot be entered by {who} ({reason})")
    return StreamError(f"cannot start a process in the working directory {cwd!r}: {reason}")


def locate(command: str, cwd: str | None, env: Mapping[str, str] | None) -> str | None:
    """Where the kernel was asked to execute `command` from: a path with a slash is taken from `cwd`,
    a bare name from each directory of the environment's PATH, as subprocess searches it."""
    if "/" in command:
        path = os.path.join(cwd or os.getcwd(), command)
        return path if os.path.exists(path) else None
    for directory in os.get_exec_path(dict(env) if env is not None else None):
        path = os.path.join(directory, command)
        if os.path.exists(path):
            return path
    return None


def _not_executable(path: str, code: int | None, reason: str, who: str) -> str:
    if os.path.isdir(path):
        return "is a directory"
    if code == errno.ENOEXEC:
        return "is not a program this machine can run (neither a binary for it nor a script with a #! line)"
    if code in (errno.EACCES, errno.EPERM):
        return (f"is not executable by {who} ({reason}): it lacks the execute permission, or a folder on the way to "
                "it may not be entered")
    interpreter = _interpreter(path)
    if interpreter is not None and not os.path.exists(interpreter):
        return f"cannot be started: its interpreter {interpreter!r} (the #! line) does not exist"
    return f"exists but cannot be started ({reason}): its interpreter or dynamic loader is missing"


def _interpreter(path: str) -> str | None:
    """The program named on a script's `#!` line, if it has one."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block us
        try:
            head = os.read(fd, 256)
        finally:
            os.close(fd)
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].split()
            return os.fsdecode(words[0]) if words else None
    return None
