"""During shutdown, connections the server has closed but whose peer reads nothing are aborted, not waited for.

uvicorn's graceful shutdown closes every connection and waits, up to its timeout (4 s here), until each is gone.
A transport that is closed with bytes still unsent stays until they are sent, so a peer that stopped reading (a
terminal socket's client not reading a flood of output, a live view's frozen tab) held the server's exit for the
whole 4 s and ended it with "timeout graceful shutdown exceeded" (tests/api/processes/test_terminal.py). Such a
connection gets nothing more across in the grace anyway; one still reading (a download's slow end) goes on.

It reads uvicorn's `server_state.connections` (each protocol's `transport`): installed only on the pinned uvicorn
(api/cli/uvicorn_pin.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

STALL_S = 0.5
"""How long a closed connection's unsent bytes may stay the same before it is aborted (checked at this period)."""


async def abort_stalled(connections: Collection[Any], period: float = STALL_S) -> None:
    """Until cancelled: abort each connection whose transport is closing with unsent bytes that did not go down
    over a whole `period`."""
    unsent: dict[int, int] = {}
    while True:
        await asyncio.sleep(period)
        seen: dict[int, int] = {}
        for connection in list(connections):
            transport = getattr(connection, "transport", None)
            if transport is None or not transport.is_closing():
                continue
            size = transport.get_write_buffer_size()
            if size and unsent.get(id(connection)) == size:
                transport.abort()  # connection_lost follows: uvicorn forgets it
            else:
                seen[id(connection)] = size
        unsent = seen
