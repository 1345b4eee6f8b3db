"""Errors a client can act on: typed domain exceptions, free of HTTP.

Every package raises these. An exception says what went wrong in Python terms: its class (a
`DesktopInactive`, a `WindowNotFound`), a human message, its problem code from the wire's one table
(`sandbox_desktop_wire/problems.py`, the vocabulary clients switch on) and the domain facts a client
needs (ids, the offending field, how soon to retry). It carries no HTTP status, title or header:
`api/http/problems.py` maps each exception type to those, in one place (docs/errors.md).

A field is named as the client sent it: the wire name, camelCase and dotted for nested fields
(`clickCount`, `tool.display_width_px`, `actions[3].x`), since that is what `errors[].field` shows
and what the caller can find in their own request.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sandbox_desktop_wire.problems import ProblemCode

# Members of every problem document (RFC 7807 and `code`): no domain fact may take their names.
_RESERVED = frozenset({"type", "title", "status", "detail", "code"})


class DomainError(Exception):
    """Base class: a problem code, a human message and the domain facts (extension members, wire names)."""

    code: ClassVar[ProblemCode] = ProblemCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retry_after: int | None = None,
        **facts: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = ProblemCode(code)  # type: ignore[misc]  # an instance naming a more precise code
        self.retry_after = retry_after
        """Seconds after which the same request may succeed (the desktop is restarting a child)."""
        if _RESERVED & facts.keys():
            raise TypeError(f"{sorted(_RESERVED & facts.keys())} are the problem's own members, not facts")
        self.extensions = {k: v for k, v in facts.items() if v is not None}


class GenericError(DomainError):
    """The reference's generic kinds: `details: {message}` as its clients expect."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("details", {"message": message})
        super().__init__(message, **kwargs)



class InvalidRequest(GenericError):
    code = ProblemCode.INVALID_REQUEST


class UnsupportedMediaType(GenericError):
    code = ProblemCode.UNSUPPORTED_MEDIA_TYPE


class PayloadTooLarge(GenericError):
    code = ProblemCode.PAYLOAD_TOO_LARGE


class Conflict(GenericError):
    code = ProblemCode.CONFLICT


class StreamError(GenericError):
    code = ProblemCode.STREAM_ERROR


class Timeout(GenericError):
    code = ProblemCode.TIMEOUT


class PermissionDenied(GenericError):
    code = ProblemCode.PERMISSION_DENIED


class ApiDisabled(PermissionDenied):
    """A route of an API the server was started without (`--no-process-api`)."""

    code = ProblemCode.API_DISABLED


class NotFound(DomainError):
    """A named resource does not exist: `details: {resource, id}` as in the reference."""

    code = ProblemCode.NOT_FOUND

    def __init__(self, resource: str, ident: str, message: str | None = None) -> None:
        super().__init__(message or f"{resource.replace('_', ' ')} {ident}",
                         details={"resource": resource, "id": ident})


class RangeNotSatisfiable(DomainError):
    """A byte range (of a recording's download) that starts past the end of a file of `size` bytes."""

    code = ProblemCode.RANGE_NOT_SATISFIABLE

    def __init__(self, message: str, *, size: int) -> None:
        self.size = size
        super().__init__(message)


class DesktopAlreadyActive(Conflict):
    """A start asking for another geometry or state directory than the running desktop's."""

    code = ProblemCode.DESKTOP_ALREADY_ACTIVE


class StreamNotActive(Conflict):
    code = ProblemCode.STREAM_NOT_ACTIVE


def field_errors(field: str, message: str, location: str = "body") -> list[dict[str, str]]:
    """The `errors` member naming one request field."""
    return [{"location": location, "field": field, "message": message, "type": "value_error"}]


class DesktopError(DomainError):
    """A desktop problem; its detail is the raw message. Raised as a subclass, which names the code."""


class DesktopUnsupportedPlatform(DesktopError):
    code = ProblemCode.DESKTOP_UNSUPPORTED_PLATFORM


class DependenciesMissing(DesktopError):
    """Carries `missingDependencies` and `installCommand`."""

    code = ProblemCode.DESKTOP_DEPENDENCIES_MISSING


class DesktopInactive(DesktopError):
    code = ProblemCode.DESKTOP_RUNTIME_INACTIVE


class DesktopBusy(DesktopError):
    """Starting or stopping: another start or stop must wait."""

    code = ProblemCode.DESKTOP_RUNTIME_STARTING


class DesktopFailed(DesktopError):
    """The desktop failed, or is restarting a crashed child (then with `retry_after`)."""

    code = ProblemCode.DESKTOP_RUNTIME_FAILED


class DesktopNotReady(DesktopError):
    code = ProblemCode.DESKTOP_NOT_READY


class InvalidAction(DesktopError):
    """A value a desktop route cannot use; `field` is its wire name."""

    code = ProblemCode.DESKTOP_INVALID_ACTION


class ScreenshotFailed(DesktopError):
    code = ProblemCode.DESKTOP_SCREENSHOT_FAILED


class InputFailed(DesktopError):
    code = ProblemCode.DESKTOP_INPUT_FAILED


class WindowNotFound(DesktopError):
    code = ProblemCode.WINDOW_NOT_FOUND


class NoFocusedWindow(DesktopError):
    code = ProblemCode.NO_FOCUSED_WINDOW


class AppNotFound(DesktopError):
    code = ProblemCode.APP_NOT_FOUND


class AppExited(DesktopError):
    code = ProblemCode.APP_EXITED


class AppNotExecutable(DesktopError):
    code = ProblemCode.APP_NOT_EXECUTABLE


class TargetNotFound(DesktopError):
    code = ProblemCode.TARGET_NOT_FOUND


class ClipboardFailed(DesktopError):
    code = ProblemCode.CLIPBOARD_FAILED


class StreamAlreadyActive(DesktopError):
    code = ProblemCode.STREAM_ALREADY_ACTIVE


class DesktopNotFound(DesktopError):
    code = ProblemCode.DESKTOP_NOT_FOUND


class DesktopPaused(DesktopError):
    code = ProblemCode.DESKTOP_PAUSED


class DesktopIsDefault(DesktopError):
    code = ProblemCode.DESKTOP_IS_DEFAULT


class TooManyDesktops(DesktopError):
    code = ProblemCode.TOO_MANY_DESKTOPS


def invalid_action(message: str, field: str, location: str = "body") -> InvalidAction:
    """An `InvalidAction` whose `errors` name the offending request field (its wire name)."""
    return InvalidAction(message, errors=field_errors(field, message, location))


class UnusableValue(DomainError):
    """A well-formed request whose field names something that cannot be used: a command that does not
    exist, a working directory that is a file. The caller's mistake: each kind is a subclass with a code
    of its own, `errors` naming the field and a message naming the field and the value (docs/errors.md,
    "Caller mistakes")."""

    def __init__(self, field: str, message: str, **facts: Any) -> None:
        self.field = field
        super().__init__(message, errors=field_errors(field, message), **facts)


class SpawnError(UnusableValue):
    """A spawn refused because of what the request named; `subject` is the field (`command`, `cwd`, `args`),
    `phrase` says what is wrong with its value (`"was not found on PATH"`), for callers that name it otherwise."""

    def __init__(self, subject: str, value: str, phrase: str, *, message: str | None = None) -> None:
        self.subject, self.value, self.phrase = subject, value, phrase
        super().__init__(subject, message or f"{subject} {value!r} {phrase}")


class CommandNotFound(SpawnError):
    code = ProblemCode.COMMAND_NOT_FOUND


class CommandNotExecutable(SpawnError):
    """A directory, a file without the execute permission, a script whose interpreter is missing."""

    code = ProblemCode.COMMAND_NOT_EXECUTABLE


class CommandBusy(SpawnError):
    """The program is open for writing (ETXTBSY): it can be started once the write is done."""

    code = ProblemCode.COMMAND_BUSY


class WorkingDirectoryNotFound(SpawnError):
    code = ProblemCode.CWD_NOT_FOUND


class WorkingDirectoryNotDirectory(SpawnError):
    code = ProblemCode.CWD_NOT_DIRECTORY


class WorkingDirectoryNotAccessible(SpawnError):
    code = ProblemCode.CWD_NOT_ACCESSIBLE


class ArgumentsTooLong(SpawnError):
    """An argument over the kernel's limit for one string, or all of them over the limit for all."""

    code = ProblemCode.ARGUMENTS_TOO_LONG


class FieldError(DomainError):
    """Request validation failed; `errors` names each bad field. `wrong_shape`: the JSON has the wrong
    shape (a type, a missing field, an enum) rather than a value out of range (docs/errors.md "Bad input")."""

    code = ProblemCode.INVALID_REQUEST

    def __init__(self, errors: list[dict[str, str]], *, wrong_shape: bool = False,
                 code: str = ProblemCode.INVALID_REQUEST) -> None:
        self.wrong_shape = wrong_shape
        fields = ", ".join(e["field"] for e in errors) or "request"
        first = errors[0]["message"] if errors else "invalid request"
        message = f"invalid {fields}: {first}" if len(errors) == 1 else f"invalid fields: {fields}"
        super().__init__(message, code=code, errors=errors)
