"""Waiting for the screen to settle: no drawing for a while, as XDamage reports it through `FrameSource`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from desktop.screen.frames import MAX_FPS, FrameSource

SETTLE_FPS = 30
"""Damage is sampled per capture tick: 33 ms resolution, well below any useful quiet period."""


@dataclass(frozen=True)
class SettleResult:
    settled: bool
    """True when the screen stayed unchanged for the quiet period; False when the timeout came first."""
    elapsed_s: float


async def wait_until_quiet(frames: FrameSource, display: str, quiet_s: float, timeout_s: float,
                           fps: int = SETTLE_FPS) -> SettleResult:
    """Wait until nothing has been drawn for `quiet_s`, counting from now, for at most `timeout_s`.

    Each new frame of the shared capture loop means damage was reported since the previous tick. The
    first frame of a capture loop started here is an unconditional grab, not a change, so it is skipped;
    the loop's periodic safety-net grab (every few seconds) may count as a change and delay the result
    by one quiet period at most.
    """
    start = time.monotonic()
    subscription = frames.subscribe(display, fps)
    skip_first = frames.latest is None  # a fresh loop: its first grab happens whatever the damage
    try:
        last_change = start
        deadline = start + timeout_s
        for _ in range(int(timeout_s * MAX_FPS) + 100):  # at most one frame per tick, plus the quiet waits
            now = time.monotonic()
            if now - last_change >= quiet_s:
                return SettleResult(True, now - start)
            if now >= deadline:
                return SettleResult(False, now - start)
            frame = await subscription.next(timeout=min(last_change + quiet_s, deadline) - now)
            if frame is None:
                continue
            if skip_first:
                skip_first = False
                continue
            if frame.captured_at > start:
                last_change = max(last_change, frame.captured_at)
        return SettleResult(False, time.monotonic() - start)
    finally:
        await subscription.close()
