"""Frame-rate control: lower the rate when pictures cost too much of their period, raise it back slowly.

Latest-frame-wins capture already keeps latency from accumulating; this keeps a saturated
machine from spending every cycle on the stream (docs/streaming.md: 30 → 20 → 15 → ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

HIGH_LOAD = 0.6
"""Lower the rate when a picture takes more than this share of its frame period..."""
LOW_LOAD = 0.45
"""...and raise it when it would take less than this share at the next rate up."""
LOWER_AFTER_S = 1.0
RAISE_AFTER_S = 3.0
MIN_FPS = 5
SMOOTHING = 0.2
MIN_SAMPLES = 10
"""Pictures that must agree before the rate changes (a static screen sends too few to judge)."""


@dataclass
class FrameRate:
    """The current frame-rate cap of a stream, between MIN_FPS and `target`."""

    target: int
    current: int = 0
    cost: float = 0.0
    """Smoothed seconds per picture (capture to encoded packet)."""
    _since: float | None = field(default=None, repr=False)
    _direction: int = field(default=0, repr=False)
    _samples: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.target <= 60:
            raise ValueError(f"target fps must be between 1 and 60, got {self.target}")
        self.current = self.current or self.target

    @property
    def period(self) -> float:
        return 1.0 / self.current

    def observe(self, seconds: float, now: float) -> bool:
        """Record one picture's cost; True when the rate changed."""
        self.cost = seconds if self.cost == 0.0 else self.cost + SMOOTHING * (seconds - self.cost)
        lower = max(min(MIN_FPS, self.target), self.current * 2 // 3)
        higher = min(self.target, max(self.current + 1, self.current * 3 // 2))
        if self.current > lower and self.cost > HIGH_LOAD / self.current:
            direction, hold, proposed = -1, LOWER_AFTER_S, lower
        elif self.current < higher and self.cost < LOW_LOAD / higher:
            direction, hold, proposed = 1, RAISE_AFTER_S, higher
        else:
            self._since, self._direction, self._samples = None, 0, 0
            return False
        if self._direction != direction or self._since is None:
            self._since, self._direction, self._samples = now, direction, 0
        self._samples += 1
        if now - self._since < hold or self._samples < MIN_SAMPLES:
            return False
        self.current = proposed
        self._since, self._direction, self._samples = None, 0, 0
        return True
