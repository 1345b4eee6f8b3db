"""Readiness: the result of the end-to-end checks of `GET /v1/health/ready`."""

from __future__ import annotations

from sandbox_desktop_wire.base import WireModel


class ReadinessCheck(WireModel):
    """One check: `desktop`, `x_server`, `window_manager` or `screenshot`."""

    name: str
    ok: bool
    ms: float
    detail: str | None = None


class ReadinessResponse(WireModel):
    """`status` is `ready`; a desktop that is not ready answers a 503 problem carrying the same `checks`."""

    status: str
    checks: list[ReadinessCheck]
