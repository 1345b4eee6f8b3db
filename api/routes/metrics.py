"""`GET /v1/metrics`: Prometheus metrics in the text exposition format (token required, like all of /v1)."""

from __future__ import annotations

import asyncio

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from api.operations import Operation


async def metrics(request: Request) -> Response:
    # Process figures read /proc: off the loop, so a scrape never stalls input.
    body = await asyncio.to_thread(request.app.state.metrics.exposition)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


OPERATIONS = [
    Operation("GET", "/v1/metrics", metrics, "Prometheus metrics: request latency by route, screenshot timings, "
              "restarts, recordings, viewers", media_type="text/plain", tags=("health",)),
]
