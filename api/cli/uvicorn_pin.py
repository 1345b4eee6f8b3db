"""The uvicorn whose internals the server's patches were written against: one pin for all of them.

api/cli/response_writes.py (a response in one write), api/cli/ws_reading.py (WebSocket reading bounded by a queue)
and api/cli/parser_refusals.py (unparseable requests answered with a problem document) each read or replace parts
of uvicorn that are not its API. On any other version none of them is installed and uvicorn runs as it comes: a
new uvicorn is taken up by checking the three against it and moving this pin.
"""

from __future__ import annotations

import uvicorn

PINNED_UVICORN = "0.55."


def pinned() -> bool:
    """Whether the uvicorn installed is the one the patches were written against."""
    return uvicorn.__version__.startswith(PINNED_UVICORN)
