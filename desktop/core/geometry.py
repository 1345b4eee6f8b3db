"""Rectangles on the screen, in screen pixels: what accessibility reads and what screenshots draw and crop."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """A rectangle in screen pixels: top-left corner and size."""

    x: int
    y: int
    width: int
    height: int

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2
