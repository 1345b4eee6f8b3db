"""`GET /` and `GET /v1/health`: open without a token so probes and SDK clients can check liveness."""

from __future__ import annotations

from starlette.requests import Request

from api.models.base import WireModel
from api.operations import Operation


class HealthResponse(WireModel):
    status: str


class RootResponse(WireModel):
    name: str
    docs: str
    version: str


async def health(request: Request) -> HealthResponse:
    return HealthResponse(status="ok")


async def root(request: Request) -> RootResponse:
    return RootResponse(name="Sandbox Agent", docs="/v1/openapi.json", version=request.app.state.version)


OPERATIONS = [
    Operation("GET", "/", root, "Server name and where the API document is", response=RootResponse,
              tags=("health",)),
    Operation("GET", "/v1/health", health, "Liveness (no token needed)", response=HealthResponse,
              tags=("health",)),
]
