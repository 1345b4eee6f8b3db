"""Wire models of the runtime screen size change, `POST /v1/desktop/display` (docs/display.md)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import WireModel
from sandbox_desktop_wire.limits import MAX_DIMENSION, MAX_DPI, MIN_DIMENSION, MIN_DPI


class DisplayChangeRequest(WireModel):
    """The new screen size; at most the desktop's maximum (`maxWidth`x`maxHeight` of its status)."""

    width: int = Field(ge=MIN_DIMENSION, le=MAX_DIMENSION, description="New screen width in pixels, up to the "
                       "desktop's maxWidth (a larger one is a 400 naming `width`)")
    height: int = Field(ge=MIN_DIMENSION, le=MAX_DIMENSION, description="New screen height in pixels, up to the "
                        "desktop's maxHeight")
    dpi: int | None = Field(default=None, ge=MIN_DPI, le=MAX_DPI, description="New dpi (Xft.dpi and the screen's "
                            "physical size, read by apps started afterwards); default: unchanged")


class DisplayChangeResponse(WireModel):
    """The size the X server applied."""

    width: int
    height: int
    dpi: int
    max_width: int = Field(description="The largest width this desktop may take (its framebuffer, set at start)")
    max_height: int
    elapsed_ms: float = Field(description="From the request to the X server's confirmation, in milliseconds")
