"""Errors a client can act on.

Every package raises these; `api/problems.py` renders them as RFC 7807 problem+json. The
`kind` is the suffix of the problem `type` urn; `code` is the machine-readable reason clients
switch on (for desktop problems the reference uses the kind itself).
"""

from __future__ import annotations

from typing import Any

TYPE_PREFIX = "urn:sandbox-agent:error:"


class ServiceError(Exception):
    """Base class: an error with an HTTP status, a problem kind and a human message."""

    status: int = 500
    kind: str = "internal_error"
    title: str = "Internal Error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.kind
        self.headers = headers or {}
        self.extensions = {k: v for k, v in extensions.items() if v is not None}

    def detail(self) -> str:
        """The problem `detail`: generic kinds prefix the kind, as the reference does."""
        return self.message


class _GenericError(ServiceError):
    """Generic kinds carry `details: {message}` and a kind-prefixed detail."""

    def detail(self) -> str:
        return f"{self.kind.replace('_', ' ')}: {self.message}"

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("details", {"message": message})
        super().__init__(message, **kwargs)


class InvalidRequest(_GenericError):
    status, kind, title = 400, "invalid_request", "Invalid Request"


class UnsupportedMediaType(_GenericError):
    status, kind, title = 415, "unsupported_media_type", "Unsupported Media Type"


class PayloadTooLarge(_GenericError):
    status, kind, title = 413, "invalid_request", "Payload Too Large"

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("code", "payload_too_large")
        super().__init__(message, **kwargs)


class Conflict(_GenericError):
    status, kind, title = 409, "conflict", "Conflict"


class StreamError(_GenericError):
    status, kind, title = 502, "stream_error", "Stream Error"


class Timeout(_GenericError):
    status, kind, title = 504, "timeout", "Timeout"


class PermissionDenied(_GenericError):
    status, kind, title = 403, "permission_denied", "Permission Denied"


class NotFound(ServiceError):
    """A named resource does not exist: `details: {resource, id}` as in the reference."""

    status, kind, title = 404, "not_found", "Not Found"

    def __init__(self, resource: str, ident: str, message: str | None = None) -> None:
        super().__init__(
            message or f"{resource.replace('_', ' ')} {ident}",
            details={"resource": resource, "id": ident},
        )

    def detail(self) -> str:
        return f"not found: {self.message}"


# Desktop problem codes: (HTTP status, title). The code is also the urn kind.
DESKTOP_CODES: dict[str, tuple[int, str]] = {
    "desktop_unsupported_platform": (501, "Desktop Unsupported"),
    "desktop_dependencies_missing": (503, "Desktop Dependencies Missing"),
    "desktop_runtime_inactive": (409, "Desktop Runtime Inactive"),
    "desktop_runtime_starting": (409, "Desktop Runtime Starting"),
    "desktop_runtime_failed": (503, "Desktop Runtime Failed"),
    "desktop_not_ready": (503, "Desktop Not Ready"),
    "desktop_invalid_action": (400, "Desktop Invalid Action"),
    "desktop_screenshot_failed": (502, "Desktop Screenshot Failed"),
    "desktop_input_failed": (502, "Desktop Input Failed"),
    "window_not_found": (404, "Window Not Found"),
    "no_focused_window": (404, "No Focused Window"),
    "app_not_found": (404, "App Not Found"),
    # An app that fails at once failed on what the caller asked for (its arguments, its target): a 4xx,
    # as are the other apps problems a request can cause (docs/errors.md, "Caller mistakes").
    "app_exited": (422, "App Exited"),
    "app_not_executable": (422, "App Not Executable"),
    "target_not_found": (422, "Target Not Found"),
    "clipboard_failed": (500, "Clipboard Failed"),
    "stream_already_active": (409, "Stream Already Active"),
    "stream_not_active": (409, "Stream Not Active"),
    # Many desktops (docs/desktops.md).
    "desktop_not_found": (404, "Desktop Not Found"),
    "desktop_paused": (409, "Desktop Paused"),
    "desktop_is_default": (409, "Desktop Is Default"),
    "too_many_desktops": (429, "Too Many Desktops"),
}


class DesktopError(ServiceError):
    """A desktop problem: `code` equals the urn kind, detail is the raw message."""

    def __init__(self, code: str, message: str, **kwargs: Any) -> None:
        if code not in DESKTOP_CODES:
            raise ValueError(f"unknown desktop problem code {code!r}")
        self.status, self.title = DESKTOP_CODES[code]
        self.kind = code
        super().__init__(message, code=code, **kwargs)


def field_errors(field: str, message: str, location: str = "body") -> list[dict[str, str]]:
    """The `errors` member naming one request field."""
    return [{"location": location, "field": field, "message": message, "type": "value_error"}]


class UnusableValue(ServiceError):
    """A well-formed request whose field names something that cannot be used: a command that does not
    exist, a working directory that is a file. The caller's mistake, so a 4xx (422 unless said
    otherwise) with a code of its own (also the urn kind), `errors` naming the field and a detail
    naming the field and the value (docs/errors.md, "Caller mistakes").
    """

    def __init__(self, code: str, field: str, message: str, *, status: int = 422, **extensions: Any) -> None:
        self.status, self.kind = status, code
        self.title = code.replace("_", " ").title()
        super().__init__(message, code=code, errors=field_errors(field, message), **extensions)


def invalid_action(message: str, field: str, location: str = "body") -> DesktopError:
    """A 400 `desktop_invalid_action` whose `errors` name the offending request field."""
    return DesktopError("desktop_invalid_action", message, errors=field_errors(field, message, location))


class FieldError(ServiceError):
    """Request validation failed; `errors` names each bad field."""

    status, kind, title = 400, "invalid_request", "Invalid Request"

    def __init__(
        self,
        errors: list[dict[str, str]],
        *,
        status: int = 400,
        code: str = "invalid_request",
        kind: str | None = None,
    ) -> None:
        self.status = status
        if kind:
            self.kind = kind
        if self.kind in DESKTOP_CODES:
            self.title = DESKTOP_CODES[self.kind][1]
        if status == 422:
            self.title = "Unprocessable Entity"
        fields = ", ".join(e["field"] for e in errors) or "request"
        first = errors[0]["message"] if errors else "invalid request"
        message = f"invalid {fields}: {first}" if len(errors) == 1 else f"invalid fields: {fields}"
        super().__init__(message, code=code, errors=errors)
