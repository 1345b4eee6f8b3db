"""Query models of the screenshot endpoints (docs/screenshots.md)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from sandbox_desktop_wire.base import QueryModel

ImageFormat = Literal["png", "jpeg", "webp"]


def _out_of_range(message: str) -> PydanticCustomError:
    return PydanticCustomError("out_of_range", message)


class ScreenshotQuery(QueryModel):
    """Options of both screenshot endpoints; `show_cursor` is accepted as well as `showCursor`."""

    format: ImageFormat = Field("png", description="png (lossless), jpeg or webp")
    quality: int = Field(85, description="1-100; jpeg and webp only", json_schema_extra={"minimum": 1, "maximum": 100})
    scale: float = Field(1.0, description="0.1-1.0; the image is the capture shrunk by this factor",
                         json_schema_extra={"minimum": 0.1, "maximum": 1.0})
    show_cursor: bool = Field(False, description="Draw the cursor and a red ring at the pointer "
                              "(`show_cursor` is accepted too)")

    @field_validator("quality")
    @classmethod
    def _quality(cls, value: int) -> int:
        if not 1 <= value <= 100:
            raise _out_of_range("quality must be between 1 and 100")
        return value

    @field_validator("scale")
    @classmethod
    def _scale(cls, value: float) -> float:
        if not (math.isfinite(value) and 0.1 <= value <= 1.0):
            raise _out_of_range("scale must be between 0.1 and 1.0")
        return value


class RegionScreenshotQuery(ScreenshotQuery):
    """A rectangle of the screen in screen pixels; it must lie entirely on the screen."""

    x: int = Field(description="Left edge, >= 0", json_schema_extra={"minimum": 0})
    y: int = Field(description="Top edge, >= 0", json_schema_extra={"minimum": 0})
    width: int = Field(description="> 0; x + width must not exceed the screen width",
                       json_schema_extra={"minimum": 1})
    height: int = Field(description="> 0; y + height must not exceed the screen height",
                        json_schema_extra={"minimum": 1})

    @field_validator("x", "y")
    @classmethod
    def _origin(cls, value: int) -> int:
        if value < 0:
            raise _out_of_range("region coordinates must be non-negative")
        return value

    @field_validator("width", "height")
    @classmethod
    def _size(cls, value: int) -> int:
        if value <= 0:
            raise _out_of_range("region width and height must be greater than 0")
        return value
