"""A process's output log: a byte-capped ring of numbered chunks that followers can wait on.

Entries are the raw chunks read from the child (at most `CHUNK_BYTES` each), numbered from 1 per
process. The oldest entries are dropped once the buffer holds more than its byte cap, so sequence
numbers stay contiguous and a reader resumes with "everything after sequence N".
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import time
from collections import deque
from collections.abc import AsyncGenerator, Collection
from dataclasses import dataclass
from typing import Any

from sandbox_desktop_wire.enums import LogStream, LogStreamFilter

CHUNK_BYTES = 8192
"""Largest entry: output is split into chunks of at most this many bytes."""

STREAM_FILTERS: dict[LogStreamFilter, frozenset[LogStream]] = {
    LogStreamFilter.STDOUT: frozenset({LogStream.STDOUT}),
    LogStreamFilter.STDERR: frozenset({LogStream.STDERR}),
    LogStreamFilter.COMBINED: frozenset({LogStream.STDOUT, LogStream.STDERR}),
    LogStreamFilter.PTY: frozenset({LogStream.PTY}),
}

# Tiny writes would otherwise let millions of entries fit under the byte cap; bound the count too.
MIN_ENTRY_COST = 64
MIN_MAX_ENTRIES = 4096


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds, as the wire reports it."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One chunk of output."""

    sequence: int
    stream: LogStream
    timestamp_ms: int
    data: bytes

    def to_wire(self) -> dict[str, Any]:
        """The wire shape: `{sequence, stream, timestampMs, data (base64), encoding}`."""
        return {
            "sequence": self.sequence,
            "stream": self.stream,
            "timestampMs": self.timestamp_ms,
            "data": base64.b64encode(self.data).decode("ascii"),
            "encoding": "base64",
        }


class LogBuffer:
    """Numbered output chunks capped at `max_bytes`, with followers woken on every append.

    `finish()` marks the end of the live stream (the process exited and its output drained):
    followers stop once they have read everything. Entries may still be appended afterwards
    (a grandchild holding the pipe) and show up in later reads.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be greater than 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._max_entries = max(MIN_MAX_ENTRIES, max_bytes // MIN_ENTRY_COST)
        self._entries: deque[LogEntry] = deque()
        self._size = 0
        self._last_sequence = 0
        self._finished = False
        self._changed = asyncio.Event()

    @property
    def last_sequence(self) -> int:
        """Sequence of the newest entry ever appended (0 if none)."""
        return self._last_sequence

    @property
    def size_bytes(self) -> int:
        """Bytes of output currently held."""
        return self._size

    @property
    def finished(self) -> bool:
        return self._finished

    def append(self, stream: LogStream, data: bytes) -> LogEntry:
        """Store one chunk (callers split output into chunks of at most `CHUNK_BYTES`)."""
        if len(data) > self.max_bytes:
            data = data[-self.max_bytes:]  # only the newest bytes fit
        self._last_sequence += 1
        entry = LogEntry(self._last_sequence, stream, now_ms(), data)
        self._entries.append(entry)
        self._size += len(data)
        while self._size > self.max_bytes or len(self._entries) > self._max_entries:
            self._size -= len(self._entries.popleft().data)
        self._wake()
        return entry

    def finish(self) -> None:
        """End the live stream: followers return once they have caught up."""
        if not self._finished:
            self._finished = True
            self._wake()

    def entries(
        self,
        *,
        streams: Collection[LogStream] | None = None,
        since: int = 0,
        tail: int | None = None,
    ) -> list[LogEntry]:
        """Entries with a sequence greater than `since`, of the given streams, the last `tail` of them."""
        if self._entries:
            # Sequences are contiguous, so the first wanted entry is found by arithmetic.
            skip = max(0, since + 1 - self._entries[0].sequence)
            selected = [e for e in itertools.islice(self._entries, skip, None)
                        if streams is None or e.stream in streams]
        else:
            selected = []
        if tail is not None:
            selected = selected[len(selected) - tail:] if tail < len(selected) else selected
        return selected

    def tail_bytes(self, max_bytes: int) -> bytes:
        """The newest `max_bytes` of output, all streams together."""
        chunks: list[bytes] = []
        size = 0
        for entry in reversed(self._entries):
            if size >= max_bytes:
                break
            chunks.append(entry.data)
            size += len(entry.data)
        return b"".join(reversed(chunks))[-max_bytes:] if max_bytes > 0 else b""

    async def wait_beyond(self, sequence: int, timeout: float | None = None) -> bool:
        """Wait until an entry newer than `sequence` exists or the stream finished; False on timeout."""
        if self._last_sequence > sequence or self._finished:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        except TimeoutError:
            return False
        return True

    async def follow(
        self,
        *,
        streams: Collection[LogStream] | None = None,
        since: int = 0,
        tail: int | None = None,
        heartbeat_s: float | None = None,
    ) -> AsyncGenerator[LogEntry | None, None]:
        """The backlog (as `entries`), then live entries until the stream finishes.

        Yields None after `heartbeat_s` without output, so a caller can send a keep-alive.
        """
        batch = self.entries(streams=streams, since=since, tail=tail)
        last = max(since, self._last_sequence)
        while True:
            for entry in batch:
                yield entry
            if self._finished and last >= self._last_sequence:
                return
            if not await self.wait_beyond(last, heartbeat_s):
                yield None
            batch = self.entries(streams=streams, since=last)
            last = max(last, self._last_sequence)

    def _wake(self) -> None:
        # Waiters hold the old event; swapping in a fresh one re-arms without a lock.
        self._changed.set()
        self._changed = asyncio.Event()
