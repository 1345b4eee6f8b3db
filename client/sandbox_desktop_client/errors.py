"""`ApiError`: a non-2xx answer, carrying the server's problem+json document."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """The server answered with an error status; `.problem` is its problem+json document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.code: str | None = problem.get("code")
        self.detail: str = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
        super().__init__(f"{status} {self.code or 'error'}: {self.detail}")


class ClientError(ApiError):
    """A 4xx: the request was wrong for the current state; fix it rather than retry."""


class NotFoundError(ClientError):
    """A 404: the window, recording or process does not exist."""


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
