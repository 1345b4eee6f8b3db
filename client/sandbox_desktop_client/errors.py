"""`ApiError` and its subclasses by status: a non-2xx answer, carrying the server's problem+json document
(docs/errors.md). The tree is in the package's docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the errors are raised and caught where httpx is not loaded yet (the server's MCP tools)
    import httpx


class ApiError(Exception):
    """The server answered with an error status (any not caught by a subclass, e.g. a 3xx).

    `.status` is the HTTP status, `.code` the problem's code (`window_not_found`, ...; None when the
    answer was not a problem document), `.detail` its human-readable detail, `.problem` the whole
    document (a validation error's `errors` list included)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        code = problem.get("code")
        self.code: str | None = code if isinstance(code, str) else None
        self.detail: str = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
        super().__init__(f"{status} {self.code or 'error'}: {self.detail}")


class ClientError(ApiError):
    """A 4xx: the request was wrong for the current state; fix it rather than retry."""


class NotFoundError(ClientError):
    """A 404: the window, recording, process or desktop does not exist (or the route)."""


class ConflictError(ClientError):
    """A 409: the desktop (or recording) is not in a state that allows this, e.g. not started."""


class ServerError(ApiError):
    """A 5xx: the desktop or the server failed; the detail says what to check."""


def error_for(response: httpx.Response) -> ApiError:
    """The `ApiError` subclass for an error response (its body must already be read)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    problem: dict[str, Any] = body if isinstance(body, dict) else {
        "status": response.status_code, "title": response.reason_phrase, "detail": response.text[:1000]}
    status = response.status_code
    cls: type[ApiError]
    if status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    elif 400 <= status < 500:
        cls = ClientError
    elif status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(status, problem)
