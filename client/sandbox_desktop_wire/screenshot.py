"""Query models of the screenshot endpoints (docs/screenshots.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_desktop_wire.base import QueryModel
from sandbox_desktop_wire.enums import ScreenshotFormat
from sandbox_desktop_wire.limits import MAX_QUALITY, MAX_SCALE, MIN_QUALITY, MIN_SCALE

ImageFormat = Literal["png", "jpeg", "webp"]
"""`ScreenshotFormat`'s values, for type hints that take plain strings (sandbox_desktop_wire/enums.py)."""


class ScreenshotQuery(QueryModel):
    """Options of both screenshot endpoints; `show_cursor` is accepted as well as `showCursor`."""

    format: ScreenshotFormat = Field(default=ScreenshotFormat.PNG, description="png (lossless), jpeg or webp")
    quality: int = Field(default=85, ge=MIN_QUALITY, le=MAX_QUALITY, description="jpeg and webp only")
    # NaN fails both bounds, so it is refused like any other out-of-range scale.
    scale: float = Field(default=1.0, ge=MIN_SCALE, le=MAX_SCALE, description="The image is the capture shrunk by "
                         "this factor")
    show_cursor: bool = Field(default=False, description="Draw the cursor and a red ring at the pointer "
                              "(`show_cursor` is accepted too)")
    som: bool = Field(default=False, description="Set-of-marks: number the interactive elements in boxes; "
                      "GET /v1/desktop/accessibility/marks lists them, and `act` takes the numbers")


class RegionScreenshotQuery(ScreenshotQuery):
    """A rectangle of the screen in screen pixels; it must lie entirely on the screen."""

    x: int = Field(ge=0, description="Left edge")
    y: int = Field(ge=0, description="Top edge")
    width: int = Field(ge=1, description="x + width must not exceed the screen width")
    height: int = Field(ge=1, description="y + height must not exceed the screen height")
