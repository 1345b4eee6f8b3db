"""`GET /v1/metrics`: Prometheus metrics in the text exposition format (token required, like all of /v1)."""

from __future__ import annotations

import asyncio

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from api.http.operations import Operation
from api.server.services import server_of


async def metrics(request: Request) -> Response:
    metrics = server_of(request).metrics
    # Desktop figures are read on the loop, where desktops are created and deleted (docs/architecture.md);
    # process figures read /proc: off the loop, so a scrape never stalls input.
    state = metrics.read_state()
    body = await asyncio.to_thread(metrics.exposition, state)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


OPERATIONS = [
    Operation("GET", "/v1/metrics", metrics, "Prometheus metrics: request latency by route, screenshot timings, "
              "and each desktop's state, restarts, recordings, viewers", media_type="text/plain", tags=("health",)),
]
