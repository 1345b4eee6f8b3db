"""Key names to X keysyms: xdotool key syntax, the spellings agents send, and text to keysyms.

Pure functions, no X connection: `parse_chord("ctrl+shift+t")` gives the keysyms of one chord,
`parse_keys("ctrl+a BackSpace")` a sequence of chords, `text_keysyms("héllo")` what `type` sends.
"""

from __future__ import annotations

import functools
import importlib
import re

from Xlib import keysymdef

from desktop.core.errors import DesktopError, PayloadTooLarge, invalid_action
from sandbox_desktop_wire.limits import MAX_TYPE_CHARS

UNICODE_KEYSYM_BASE = 0x01000000
"""Keysym of code point c outside Latin-1: 0x01000000 + c (X11 keysym encoding, appendix A)."""
MAX_TEXT_CHARS = MAX_TYPE_CHARS
"""The longest text one `type` request accepts, in code points."""

# Modifiers the `modifiers` object adds, in the order the reference prepends them.
MODIFIER_KEYSYMS = {"ctrl": 0xFFE3, "shift": 0xFFE1, "alt": 0xFFE9, "cmd": 0xFFEB}

# Characters typed as a key rather than as themselves.
_CONTROL_CHARS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08, "\x1b": 0xFF1B, "\x7f": 0xFFFF}

# Spellings agents send (lower-cased) -> X keysym names. Browser `KeyboardEvent.key` values are
# here too, so a key captured in a browser can be replayed as is.
_ALIASES = {
    "ctrl": "Control_L", "control": "Control_L", "ctl": "Control_L", "controlleft": "Control_L",
    "controlright": "Control_R", "shift": "Shift_L", "shiftleft": "Shift_L", "shiftright": "Shift_R",
    "alt": "Alt_L", "option": "Alt_L", "opt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R",
    "altgr": "ISO_Level3_Shift", "altgraph": "ISO_Level3_Shift",
    "super": "Super_L", "cmd": "Super_L", "command": "Super_L", "meta": "Super_L", "win": "Super_L",
    "windows": "Super_L", "os": "Super_L", "metaleft": "Super_L", "metaright": "Super_R",
    "osleft": "Super_L", "osright": "Super_R", "hyper": "Hyper_L",
    "enter": "Return", "return": "Return", "esc": "Escape", "escape": "Escape",
    "backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert", "ins": "Insert",
    "space": "space", "spacebar": "space", "tab": "Tab", "home": "Home", "end": "End",
    "pageup": "Prior", "page_up": "Prior", "pgup": "Prior", "prior": "Prior",
    "pagedown": "Next", "page_down": "Next", "pgdn": "Next", "next": "Next",
    "left": "Left", "arrowleft": "Left", "right": "Right", "arrowright": "Right",
    "up": "Up", "arrowup": "Up", "down": "Down", "arrowdown": "Down",
    "printscreen": "Print", "print": "Print", "prtsc": "Print", "prtscr": "Print", "sysrq": "Sys_Req",
    "menu": "Menu", "contextmenu": "Menu", "apps": "Menu",
    "capslock": "Caps_Lock", "numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
    "pause": "Pause", "break": "Break", "clear": "Clear", "help": "Help", "undo": "Undo", "redo": "Redo",
    "find": "Find", "cancel": "Cancel", "select": "Select", "execute": "Execute", "compose": "Multi_key",
    "copy": "XF86Copy", "cut": "XF86Cut", "paste": "XF86Paste",
    "audiovolumeup": "XF86AudioRaiseVolume", "audiovolumedown": "XF86AudioLowerVolume",
    "audiovolumemute": "XF86AudioMute", "mediaplaypause": "XF86AudioPlay", "mediaplay": "XF86AudioPlay",
    "mediapause": "XF86AudioPause", "mediastop": "XF86AudioStop", "mediatracknext": "XF86AudioNext",
    "mediatrackprevious": "XF86AudioPrev", "browserback": "XF86Back", "browserforward": "XF86Forward",
    "browserrefresh": "XF86Refresh", "browserhome": "XF86HomePage", "browsersearch": "XF86Search",
    "browserstop": "XF86Stop", "browserfavorites": "XF86Favorites", "launchmail": "XF86Mail",
    "power": "XF86PowerOff", "sleep": "XF86Sleep", "wakeup": "XF86WakeUp", "eject": "XF86Eject",
    "brightnessup": "XF86MonBrightnessUp", "brightnessdown": "XF86MonBrightnessDown",
    "numpadadd": "KP_Add", "numpadsubtract": "KP_Subtract", "numpadmultiply": "KP_Multiply",
    "numpaddivide": "KP_Divide", "numpaddecimal": "KP_Decimal", "numpadenter": "KP_Enter",
    "numpadequal": "KP_Equal", **{f"numpad{n}": f"KP_{n}" for n in range(10)},
}

_HEX_KEYSYM = re.compile(r"0x[0-9a-f]{1,8}", re.IGNORECASE)
_UNICODE_NAME = re.compile(r"U\+?([0-9a-f]{2,6})", re.IGNORECASE)
_SPACES_AROUND_PLUS = re.compile(r"\s*\+\s*(?=\S)")


@functools.cache
def _keysym_names() -> tuple[dict[str, int], dict[str, int]]:
    """X keysym names from python-xlib's tables: (exact names, unambiguous lower-cased names)."""
    exact: dict[str, int] = {}
    for group in keysymdef.__all__:
        module = importlib.import_module(f"Xlib.keysymdef.{group}")
        for attr, value in vars(module).items():
            if attr.startswith("XK_"):
                name = attr[3:]
                # python-xlib spells XF86 keysyms "XF86_AudioPlay"; X and xdotool say "XF86AudioPlay".
                exact.setdefault(name.replace("XF86_", "XF86", 1), value)
    exact.setdefault("EuroSign", 0x20AC)  # not in python-xlib's tables
    lowered: dict[str, int | None] = {}
    for name, value in exact.items():
        key = name.lower()
        lowered[key] = value if lowered.get(key, value) == value else None
    return exact, {k: v for k, v in lowered.items() if v is not None}


def char_keysym(char: str) -> int:
    """The keysym that types `char`: Latin-1 as itself, a few controls as keys, the rest as Unicode."""
    if char in _CONTROL_CHARS:
        return _CONTROL_CHARS[char]
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    if code < 0x20 or 0x7F <= code < 0xA0:
        raise ValueError(f"control character U+{code:04X} has no key")
    if 0xD800 <= code <= 0xDFFF:
        raise ValueError(f"lone surrogate U+{code:04X} is not a character")
    return UNICODE_KEYSYM_BASE + code


def keysym_for_name(name: str) -> int | None:
    """One key name (`Return`, `ENTER`, `pgdn`, `KP_0`, `F5`, `é`, `U+20AC`, `0xff0d`) or None."""
    if len(name) == 1:
        try:
            return char_keysym(name)
        except ValueError:
            return None
    exact, lowered = _keysym_names()
    alias = _ALIASES.get(name.lower())
    if alias is not None:
        return exact[alias]
    if name in exact:
        return exact[name]
    if _HEX_KEYSYM.fullmatch(name):
        return int(name, 16) or None
    unicode_name = _UNICODE_NAME.fullmatch(name)
    if unicode_name:
        code = int(unicode_name.group(1), 16)
        try:
            return char_keysym(chr(code)) if code <= 0x10FFFF else None
        except ValueError:
            return None
    return lowered.get(name.lower())


def invalid_key(message: str, field: str = "key") -> DesktopError:
    """A 400 `desktop_invalid_action` naming the request field."""
    return invalid_action(message, field)


def _chord_tokens(chord: str) -> list[str]:
    # "+" alone and a trailing "++" (ctrl++) name the plus key itself, as in xdotool.
    if chord == "+":
        return ["+"]
    if chord.endswith("++"):
        return [*chord[:-2].split("+"), "+"]
    return chord.split("+")


def parse_chord(text: str, field: str = "key") -> list[int]:
    """Keysyms of one xdotool chord such as `ctrl+shift+t`, in press order (duplicates dropped)."""
    chord = text.strip()
    if not chord:
        raise invalid_key(f"{field} must not be empty", field)
    keysyms: list[int] = []
    for token in _chord_tokens(chord):
        name = token.strip()
        if not name:
            raise invalid_key(f"empty key name in {text!r}; write the plus key as 'plus' or 'ctrl++'", field)
        keysym = keysym_for_name(name)
        if keysym is None:
            raise invalid_key(
                f"unknown key {name!r} in {text!r}; use an X keysym name (Return, F5, KP_0, Page_Down), "
                f"an alias (ctrl, shift, alt, super, enter, esc, pgdn), a browser key name (ArrowLeft, "
                f"Backspace) or a single character", field)
        if keysym not in keysyms:
            keysyms.append(keysym)
    return keysyms


def parse_keys(text: str, field: str = "key") -> list[list[int]]:
    """A space-separated sequence of chords (`ctrl+a BackSpace`), as xdotool's `key` command takes."""
    normalised = _SPACES_AROUND_PLUS.sub("+", text.strip())
    if not normalised:
        raise invalid_key(f"{field} must not be empty", field)
    return [parse_chord(chord, field) for chord in normalised.split()]


def with_modifiers(chords: list[list[int]], ctrl: bool = False, shift: bool = False, alt: bool = False,
                   cmd: bool = False) -> list[list[int]]:
    """Prepend the requested modifiers to every chord in the order ctrl, shift, alt, super."""
    wanted = [MODIFIER_KEYSYMS[name] for name, on in (("ctrl", ctrl), ("shift", shift), ("alt", alt),
                                                      ("cmd", cmd)) if on]
    return [[*wanted, *(k for k in chord if k not in wanted)] for chord in chords]


def text_keysyms(text: str, field: str = "text") -> list[int]:
    """The keysyms that type `text`; CRLF and CR become one Return. Raises 400/413 for bad text."""
    if not text:
        raise invalid_key(f"{field} must not be empty", field)
    if len(text) > MAX_TEXT_CHARS:
        raise PayloadTooLarge(f"{field} has {len(text)} characters; one request types at most "
                              f"{MAX_TEXT_CHARS}: split it into several requests")
    keysyms = []
    for index, char in enumerate(text):
        if char == "\r" and text[index + 1:index + 2] == "\n":
            continue  # CRLF is one Return
        try:
            keysyms.append(char_keysym(char))
        except ValueError as exc:
            raise invalid_key(f"{field}[{index}]: {exc}; only \\n, \\r, \\t, \\b, ESC and DEL are typed "
                              f"as keys", field) from None
    return keysyms
