"""`GET /` and `GET /v1/health`: open without a token so probes and SDK clients can check liveness;
`GET /v1/health/ready` (token required) checks end to end that the desktop can work."""

from __future__ import annotations

from starlette.requests import Request

from api.http.desktop_paths import MANY_PREFIX
from api.http.operations import Operation
from api.server.services import desktop_of, server_of
from desktop.core.errors import DesktopNotReady
from desktop.lifecycle.readiness import check_readiness
from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.health import ReadinessCheck, ReadinessResponse


class HealthResponse(WireModel):
    status: str


class RootResponse(WireModel):
    name: str
    docs: str
    version: str


async def health(request: Request) -> HealthResponse:
    return HealthResponse(status="ok")


async def ready(request: Request) -> ReadinessResponse:
    readiness = await check_readiness(desktop_of(request))
    checks = [ReadinessCheck(name=c.name, ok=c.ok, ms=c.ms, detail=c.detail or None) for c in readiness.checks]
    if not readiness.ready:
        raise DesktopNotReady(f"desktop not ready: {readiness.failure()}",
                              checks=[c.model_dump(by_alias=True, exclude_none=True) for c in checks],
                              retry_after=1)
    return ReadinessResponse(status="ready", checks=checks)


async def root(request: Request) -> RootResponse:
    return RootResponse(name="Sandbox Agent", docs="/v1/openapi.json", version=server_of(request).version)


OPERATIONS = [
    Operation("GET", "/", root, "Server name and where the API document is", response=RootResponse,
              tags=("health",)),
    Operation("GET", "/v1/health", health, "Liveness (no token needed)", response=HealthResponse,
              tags=("health",)),
    Operation("GET", "/v1/health/ready", ready,
              "Readiness: X answers, the window manager runs and a screenshot encodes (503 otherwise)",
              response=ReadinessResponse, errors=(401, 503), tags=("health",)),
    Operation("GET", MANY_PREFIX + "/health/ready", ready,
              "Readiness of this desktop (as /v1/health/ready; 503 otherwise)", response=ReadinessResponse,
              errors=(404, 503), tags=("desktops",), operation_id="ready_of_desktop"),
]
