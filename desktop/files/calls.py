"""One file call, asked for and answered in plain data: the seam between `Files` and where the files are.

`Files` (filesystem.py) asks for the blocking part of an operation as `{"call": name, "args": [...]}`, with
descriptors when it hands one over (an upload's spooled archive). `serve` runs it (operations.py,
tar_upload.py) and answers a dict of JSON values, and the descriptors it opened (a staged write's file):

- for the server's own files (`/v1/fs`), in a worker thread of the server;
- for a desktop's (`/v1/desktops/{id}/fs`), in a child of the desktop's sandbox's init that runs as the
  desktop's user in the desktop's view of the files (`Sandbox.call`, desktop/sandbox/init.py): the zygote
  imports this module before it forks any init (`SandboxHost(preload=...)`), so nothing is imported there.

A failure is answered as `{"error": {...}}` (the DomainError's class, message and facts) and raised again by
`answer` on the server's side. An answer from a sandbox passed through a process of the desktop's uid: it
is read as data, every field checked, never unpickled or run.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from desktop.core import errors
from desktop.core.errors import DomainError, NotFound, StreamError
from desktop.files import operations
from desktop.files.errors import map_os_error
from desktop.files.operations import Entry, Staged
from desktop.files.tar_upload import UploadResult, extract
from sandbox_desktop_wire.enums import FsEntryType

ENTRY = f"{__name__}:serve"
"""What a sandbox's init calls (`Sandbox.call`)."""

Answer = tuple[dict[str, Any], list[int]]
T = TypeVar("T")


def _entries(args: list[Any], fds: list[int]) -> Answer:
    return {"entries": [asdict(e) for e in operations.list_directory(Path(args[0]))]}, []


def _stat(args: list[Any], fds: list[int]) -> Answer:
    return {"entry": asdict(operations.stat_path(Path(args[0])))}, []


def _kind(args: list[Any], fds: list[int]) -> Answer:
    """What a path is, following links: a directory, a file, or nothing (missing, or a dangling link)."""
    try:
        mode = os.stat(args[0]).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return {"kind": None}, []
    return {"kind": FsEntryType.DIRECTORY if stat.S_ISDIR(mode) else FsEntryType.FILE}, []


def _stage(args: list[Any], fds: list[int]) -> Answer:
    staged = operations.stage(Path(args[0]))
    return {"final": str(staged.final), "temp": str(staged.temp)}, [staged.fd]


def _extract(args: list[Any], fds: list[int]) -> Answer:
    with os.fdopen(os.dup(fds[0]), "rb") as archive:
        return asdict(extract(archive, Path(args[0]))), []


def _done(function: Callable[..., None], *kinds: Callable[[Any], Any]) -> Callable[[list[Any], list[int]], Answer]:
    """A call of `function` that answers nothing, its arguments made from JSON by `kinds`."""
    def call(args: list[Any], fds: list[int]) -> Answer:
        function(*(kind(arg) for kind, arg in zip(kinds, args, strict=True)))
        return {}, []
    return call


CALLS: dict[str, Callable[[list[Any], list[int]], Answer]] = {
    "entries": _entries,
    "stat": _stat,
    "kind": _kind,
    "mkdir": _done(operations.make_directory, Path),
    "delete": _done(operations.delete_path, Path, bool),
    "move": _done(operations.move_path, Path, Path, bool),
    "stage": _stage,
    "commit": _done(operations.commit, Path, Path),
    "discard": _done(operations.discard, Path),
    "extract": _extract,
}

ERRORS: dict[str, type[DomainError]] = {cls.__name__: cls for cls in (
    errors.InvalidRequest, NotFound, errors.Conflict, errors.PermissionDenied, errors.PayloadTooLarge, StreamError)}
"""What a file call may fail with (operations.py, errors.py `map_os_error`): what an answer may name."""


def request(name: str, *args: Any) -> dict[str, Any]:
    assert name in CALLS, name
    return {"call": name, "args": [str(a) if isinstance(a, Path) else a for a in args]}


def serve(asked: dict[str, Any], fds: list[int]) -> Answer:
    """Run one call; a DomainError (or an OSError none of them mapped) is answered, not raised."""
    try:
        return CALLS[asked["call"]](list(asked["args"]), fds)
    except DomainError as exc:
        return {"error": _error_json(exc)}, []
    except OSError as exc:
        return {"error": _error_json(map_os_error(exc, os.fsdecode(exc.filename or "")))}, []


def _error_json(exc: DomainError) -> dict[str, Any]:
    name = next((cls.__name__ for cls in type(exc).__mro__ if cls.__name__ in ERRORS), StreamError.__name__)
    return {"type": name, "message": exc.message, "facts": exc.extensions}


# -- reading an answer (the server's side) ------------------------------------------------------------


def answer(value: dict[str, Any]) -> dict[str, Any]:
    """The answer's values; its error raised as the DomainError it was."""
    if "error" in value:
        raise _error_of(value["error"])
    return value


def _error_of(error: object) -> DomainError:
    try:
        found = _of(error, dict)
        cls, message = ERRORS[_of(found["type"], str)], _of(found["message"], str)
        facts = {k: v for k, v in _of(found.get("facts", {}), dict).items() if k not in ("code", "retry_after")}
        if cls is NotFound:
            details = _of(facts.get("details"), dict)
            return NotFound(_of(details["resource"], str), _of(details["id"], str), message)
        return cls(message, **facts)
    except (KeyError, TypeError, ValueError) as exc:
        return _nonsense(exc)


def entry_of(value: object) -> Entry:
    try:
        e = _of(value, dict)
        modified = e.get("modified")
        return Entry(name=_of(e["name"], str), path=_of(e["path"], str), entry_type=FsEntryType(e["entry_type"]),
                     size=_of(e["size"], int), modified=None if modified is None else _of(modified, str),
                     is_symlink=_of(e.get("is_symlink", False), bool))
    except (KeyError, TypeError, ValueError) as exc:
        raise _nonsense(exc) from exc


def kind_of(value: dict[str, Any]) -> FsEntryType | None:
    try:
        kind = value.get("kind")
        return None if kind is None else FsEntryType(kind)
    except ValueError as exc:
        raise _nonsense(exc) from exc


def entries_of(value: dict[str, Any]) -> list[Entry]:
    return [entry_of(e) for e in _of(value.get("entries"), list)]


def staged_of(value: dict[str, Any], fds: list[int]) -> Staged:
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise _nonsense(ValueError(f"{len(fds)} descriptors for a staged write"))
    return Staged(Path(_of(value.get("final"), str)), Path(_of(value.get("temp"), str)), fds[0])


def upload_of(value: dict[str, Any]) -> UploadResult:
    paths = _of(value.get("paths"), list)
    return UploadResult([_of(p, str) for p in paths], _of(value.get("truncated"), bool))


def _of(value: object, kind: type[T]) -> T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _nonsense(TypeError(f"expected {kind.__name__}, got {type(value).__name__}"))
    return value


def _nonsense(exc: Exception) -> StreamError:
    return StreamError(f"the file call answered something unreadable ({exc})")
