"""Wire models of the keyboard endpoints (docs/keyboard.md); every endpoint answers `{"ok": true}` (and the
`effect` when asked)."""

from __future__ import annotations

from pydantic import Field

from sandbox_desktop_wire.base import OkResponse, WireModel
from sandbox_desktop_wire.effects import Effect, ReportEffect
from sandbox_desktop_wire.limits import MAX_TYPE_CHARS, MAX_TYPE_DELAY_MS


class KeyboardTypeRequest(ReportEffect):
    # No max_length: longer text is a 413 from the server, not a 400 (docs/keyboard.md).
    text: str = Field(description=f"Any Unicode text, 1-{MAX_TYPE_CHARS} characters; \\n (or \\r\\n) is Return, "
                      "\\t is Tab")
    delay_ms: int | None = Field(default=None, ge=0, le=MAX_TYPE_DELAY_MS, description="Pause between characters in ms "
                                 "(default 10; 0 types as fast as possible)")


class KeyboardModifiers(WireModel):
    """Modifiers added before the key, in the order ctrl, shift, alt, super (for cmd)."""

    ctrl: bool | None = None
    shift: bool | None = None
    alt: bool | None = None
    cmd: bool | None = None


class KeyboardPressRequest(ReportEffect):
    key: str = Field(description="xdotool key syntax: `Return`, `ctrl+l`, `ctrl+shift+t`, `F5`, `KP_0`, `é`; "
                     "space-separated chords are pressed in turn (`ctrl+a BackSpace`)")
    modifiers: KeyboardModifiers | None = None


class KeyboardKeyRequest(ReportEffect):
    key: str = Field(description="A key or chord to hold (`down`) or release (`up`), same syntax as press")


class KeyboardResponse(OkResponse):
    effect: Effect | None = Field(default=None, description="What the keys changed, with `reportEffect`")
