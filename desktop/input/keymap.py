"""The keyboard mapping of one X connection, and the spare keycodes it binds for missing keysyms.

A keysym the layout lacks (é on a US layout, 日, 🙂) is typed by binding it to a keycode that has
no keysym at all (Xvfb has about 19). Bindings are kept as a small LRU and only changed once a
keycode has been idle for a while: toolkits that read the keymap lazily (GTK through XKB) look a
key event up when they process it, so rebinding right after sending it would mangle the text
(docs/keyboard.md). Every method runs in the input thread that owns the connection.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from Xlib import X
from Xlib.display import Display

from desktop.core.errors import InputFailed
from desktop.input.settling import Settling
from desktop.x11 import mapping

ISO_LEVEL3_SHIFT = 0xFE03
CAPS_LOCK = 0xFFE5
# Core-map columns of group 1 and the modifiers that select them: plain, Shift, level 3 (AltGr),
# Shift + level 3. Columns 2 and 3 belong to group 2, which we never switch to.
_LEVELS = ((0, False, False), (1, True, False), (4, False, True), (5, True, True))


@dataclass(frozen=True)
class Stroke:
    """How to produce one keysym: its keycode and the modifier keycodes held while pressing it."""

    keycode: int
    modifiers: tuple[int, ...] = ()


class Keymap:
    """Keysym -> stroke lookup for one `Display`, plus an LRU of spare-keycode bindings."""

    def __init__(self, display: Display) -> None:
        self.display = display
        info = display.display.info
        self.min_keycode: int = info.min_keycode
        self.max_keycode: int = info.max_keycode
        self.spare: list[int] = []
        """Keycodes with no keysym in the layout (including the ones we bound)."""
        self.pinned: set[int] = set()
        """Bound keycodes currently held down: never rebound or restored while held."""
        self.shift: int | None = None
        self.level3: int | None = None
        self.caps_lock: int | None = None
        self.level3_mask = 0
        self._modifier_mask: dict[int, int] = {}
        self._layout: dict[int, Stroke] = {}
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> keycode, least recent first
        self._used: dict[int, float] = {}  # keycode -> monotonic time of its last key event
        self._settling = Settling(display)
        """When each new binding may be typed: clients read a changed mapping on their own time."""
        self.seen = 0
        """The connection's count of mapping changes when the mapping was last read (desktop/x11/mapping.py)."""
        self.refresh()

    # -- reading the server's mapping ---------------------------------------------------------

    def current(self) -> Keymap:
        """This keymap, read again first if the mapping changed since it was read (a MappingNotify arrived)."""
        mapping.drain(self.display)
        if self.changed():
            self.refresh()
        return self

    def changed(self) -> bool:
        """Whether a mapping change was told of on this connection since the mapping was read (not draining)."""
        return mapping.changes(self.display) != self.seen

    def refresh(self) -> None:
        """Re-read the mapping and modifiers (two round trips); forget bindings someone overwrote."""
        self.seen = mapping.changes(self.display)  # first: a change told of while reading is read next time
        count = self.max_keycode - self.min_keycode + 1
        rows = self.display.get_keyboard_mapping(self.min_keycode, count)
        modmap = self.display.get_modifier_mapping()
        for keysym, keycode in list(self._bound.items()):
            if rows[keycode - self.min_keycode][0] != keysym:
                self._forget(keysym)
        ours = set(self._bound.values())
        self.spare = [self.min_keycode + i for i, row in enumerate(rows)
                      if self.min_keycode + i in ours or not any(row)]
        self._modifier_mask = {code: 1 << index for index, codes in enumerate(modmap) for code in codes if code}
        first = {row[0]: self.min_keycode + i for i, row in reversed(list(enumerate(rows))) if row and row[0]}
        self.shift = next((code for code in modmap[X.ShiftMapIndex] if code), None)
        self.level3 = first.get(ISO_LEVEL3_SHIFT)
        if self.level3 not in self._modifier_mask:
            self.level3 = None
        self.level3_mask = self._modifier_mask.get(self.level3, 0) if self.level3 else 0
        self.caps_lock = first.get(CAPS_LOCK)
        self._layout = self._strokes(rows, ours)

    def _strokes(self, rows: list[tuple[int, ...]], ours: set[int]) -> dict[int, Stroke]:
        # Lowest level first, so '1' is the plain key and not a keypad key's second level.
        strokes: dict[int, Stroke] = {}
        for column, shift, level3 in _LEVELS:
            if (shift and self.shift is None) or (level3 and self.level3 is None):
                continue
            modifiers = tuple(code for code, on in ((self.shift, shift), (self.level3, level3)) if on and code)
            for i, row in enumerate(rows):
                keycode = self.min_keycode + i
                if column < len(row) and row[column] and keycode not in ours:
                    strokes.setdefault(row[column], Stroke(keycode, modifiers))
        return strokes

    def modifier_mask(self, keycode: int) -> int:
        """The modifier bit `keycode` sets (ShiftMask, Mod5Mask...), 0 if it is no modifier."""
        return self._modifier_mask.get(keycode, 0)

    # -- lookup and binding ---------------------------------------------------------------------

    def in_layout(self, keysym: int) -> bool:
        return keysym in self._layout

    def stroke(self, keysym: int) -> Stroke | None:
        """How to type `keysym` now, or None if it needs a binding first."""
        keycode = self._bound.get(keysym)
        return Stroke(keycode) if keycode is not None else self._layout.get(keysym)

    @property
    def capacity(self) -> int:
        """How many distinct unmapped keysyms one batch of key events can use."""
        return sum(1 for code in self.spare if code not in self.pinned)

    def bind(self, keysyms: list[int], now: float, hold: float) -> float:
        """Bind every keysym of `keysyms` that has no stroke; 0.0 when done, else seconds to wait.

        A keycode is only rebound once `hold` seconds have passed since its last key event, so a
        client never looks up an event after its binding changed. All changes are sent before any
        key event that uses them, on the same connection, so the server applies them in order.
        """
        missing = [k for k in dict.fromkeys(keysyms) if self.stroke(k) is None]
        if not missing:
            return 0.0
        in_use = set(self._bound.values())
        free = [code for code in self.spare if code not in in_use and code not in self.pinned]
        shortfall = len(missing) - len(free)
        if shortfall > 0:
            keep = set(keysyms)
            victims = [code for keysym, code in self._bound.items()
                       if keysym not in keep and code not in self.pinned][:shortfall]
            if len(victims) < shortfall:
                raise InputFailed(
                    f"no spare keycode left for {len(missing)} keysyms missing from the keyboard layout "
                    f"({len(self.spare)} spare keycodes, {len(self.pinned)} held down); release held keys "
                    f"with POST /v1/desktop/keyboard/up or send fewer distinct characters at once")
            wait = max(hold - (now - self._used.get(code, 0.0)) for code in victims)
            if wait > 0:
                return wait
            for code in victims:
                self._forget(next(k for k, c in self._bound.items() if c == code))
            free += victims
        for keysym, keycode in zip(missing, free, strict=False):
            # Same keysym in both columns: Shift and Caps Lock cannot change what the key types.
            self._settling.changing()
            self.display.change_keyboard_mapping(keycode, [(keysym, keysym)])
            self._bound[keysym] = keycode
            self._used[keycode] = now
            self._settling.bound(keycode, now)
        return 0.0

    def settling(self, keysyms: list[int], now: float) -> float:
        """Seconds left until the bindings of `keysyms` may be typed (0.0 when they may, or need none): until the
        app with the focus has read the new mapping, or a fixed pause (desktop/input/settling.py). Chromium looks
        up a key that arrives before it has the new mapping in the old one, where the keycode has no keysym, and
        drops it (tests/api/input/test_keyboard_chromium.py). May ask the server for the focus."""
        return self._settling.left([self._bound[k] for k in dict.fromkeys(keysyms) if k in self._bound], now)

    def settled(self, keysyms: list[int]) -> bool:
        """Whether every binding of `keysyms` was found ready to type already; asks the server nothing."""
        return self._settling.settled([self._bound[k] for k in keysyms if k in self._bound])

    def use(self, keycode: int, now: float) -> None:
        """Record a key event on `keycode` (an LRU touch for bound keycodes)."""
        if keycode in self._used:
            self._used[keycode] = now
            keysym = next((k for k, c in self._bound.items() if c == keycode), None)
            if keysym is not None:
                self._bound.move_to_end(keysym)

    def restore_idle(self, now: float, idle: float) -> float | None:
        """Unbind keycodes idle for `idle` seconds; returns seconds until the next one is due, or None."""
        due: list[float] = []
        for keysym, keycode in list(self._bound.items()):
            if keycode in self.pinned:
                continue
            left = idle - (now - self._used[keycode])
            if left <= 0:
                self._unbind(keysym)
            else:
                due.append(left)
        self._settling.close_if_idle()
        return min(due) if due else None

    def restore_all(self) -> None:
        """Unbind every keycode we bound (the caller releases held keys first)."""
        for keysym in list(self._bound):
            self._unbind(keysym)
        self.pinned.clear()
        self._settling.close_if_idle()

    def close(self) -> None:
        """Stop watching for mapping reads (the keymap's connection is done with)."""
        self._settling.close()

    def _unbind(self, keysym: int) -> None:
        keycode = self._bound[keysym]
        self._settling.changing(binding=False)
        self.display.change_keyboard_mapping(keycode, [(X.NoSymbol, X.NoSymbol)])
        self._forget(keysym)

    def _forget(self, keysym: int) -> None:
        keycode = self._bound.pop(keysym)
        self._used.pop(keycode, None)
        self.pinned.discard(keycode)
        self._settling.unbound(keycode)
