"""Key chords as people write them (`ctrl+shift+t`), turned into the keyboard calls' key and modifier flags.

The command line's `key` and the MCP server's `key` tool take chords; `Client.press` takes the key and
the flags: `key, flags = parse_chord("ctrl+shift+t"); client.press(key, **flags)`.
"""

from __future__ import annotations

MODIFIERS = {"ctrl": "ctrl", "control": "ctrl", "shift": "shift", "alt": "alt",
             "cmd": "cmd", "super": "cmd", "meta": "cmd", "win": "cmd"}
"""Modifier spellings and the `press` flag each one sets."""


class ChordError(ValueError):
    """A chord with no key or with a modifier `press` has no flag for."""


def parse_chord(chord: str) -> tuple[str, dict[str, bool]]:
    """`ctrl+shift+t` -> ("t", {"ctrl": True, "shift": True}); a trailing `+` is the plus key."""
    mods, _, key = chord.rpartition("+")
    if not key and chord:
        mods, key = mods[:-1], "+"
    flags: dict[str, bool] = {}
    for name in filter(None, mods.split("+")):
        if name.lower() not in MODIFIERS:
            raise ChordError(f"unknown modifier {name!r} in {chord!r}: use ctrl, shift, alt or cmd")
        flags[MODIFIERS[name.lower()]] = True
    if not key:
        raise ChordError("empty key: give a key name such as Return, a or ctrl+c")
    return key, flags
