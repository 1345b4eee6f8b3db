"""When a keycode just bound to a missing keysym may be typed: the policy, in one place (docs/keyboard.md,
"Unicode typing and the spare keycodes").

The app with the keyboard focus must know the new binding before the key arrives. Where the X server can record
its clients' requests (desktop/x11/mapping_reads.py), the binding may be typed as soon as that app has read the
mapping since the change: xterm, Tk, GTK and Chromium all read it at once, in 1-31 ms on an idle machine
(bench/mapping_reads.py), and a busy one is waited for up to `READ_WAIT_S`. An app that reads the mapping only as
it looks a key up would never read it first: after letting that wait run out twice it gets the fixed pause,
`MAPPING_SETTLE_S`, from then on, as every binding does where nothing can be recorded.

Every method runs on the thread that owns the keymap's connection (it asks the server for the focus).
"""

from __future__ import annotations

from Xlib import X
from Xlib.display import Display
from Xlib.error import XError
from Xlib.ext import res

from desktop.x11.mapping_reads import MappingReads

MAPPING_SETTLE_S = 0.1
"""The pause before a new binding is typed when no read of the mapping can be seen, and for apps that read it only
as they look a key up."""
READ_WAIT_S = 1.0
"""How long a binding waits for the focused app to read the mapping before typing anyway."""
MISSES_FOR_LAZY = 2
"""Waits an app lets run out, none read in time, before it is taken for one that reads as it looks a key up: one
could be an eager app busy with something else (a page loading)."""
READ_POLL_S = 0.005
"""How often the wait for a read looks again."""


class Settling:
    """The bindings of one keymap waiting to be typed, and what is known of the apps that read them."""

    def __init__(self, display: Display) -> None:
        self.display = display
        info = display.display.info
        self.own_base: int = info.resource_id_base
        self.id_mask: int = info.resource_id_mask
        self.reads: MappingReads | None = None
        self._unrecordable = False
        self._changes = 0
        """Our mapping changes since the recording started (its `changes_by` of our connection counts the same)."""
        self._bound_at: dict[int, float] = {}
        self._change_of: dict[int, int] = {}
        self._settled: set[int] = set()
        self._eager: set[int] = set()
        """Apps (a process id, or minus a resource-id base) seen reading a new mapping in time: always waited for."""
        self._missed: dict[int, int] = {}
        """Apps (as in `_eager`) that let the wait for their read run out, and how often; never one seen in time."""
        self._focus: tuple[float, int | None] = (-1.0, None)
        self._pids: dict[int, int] = {}
        """Each client's process id (by resource-id base), as last asked of the server."""

    def changing(self, binding: bool = True) -> None:
        """Call before each change of the keyboard mapping this keymap makes; a binding starts the recording (an
        unbinding only counts, when one runs)."""
        if binding and self.reads is None and not self._unrecordable:
            self.reads = MappingReads.open(self.display.get_display_name())
            if self.reads is None:
                self._unrecordable = True
            else:
                self.reads.watch(self.own_base)
                self._changes = 0
        self._changes += 1

    def bound(self, keycode: int, now: float) -> None:
        """`keycode` was just bound (after `changing`)."""
        self._pids = {}  # clients come and go between bindings: asked again when the focus is looked up
        self._bound_at[keycode] = now
        self._change_of[keycode] = self._changes
        self._settled.discard(keycode)

    def unbound(self, keycode: int) -> None:
        self._bound_at.pop(keycode, None)
        self._change_of.pop(keycode, None)
        self._settled.discard(keycode)

    def settled(self, keycodes: list[int]) -> bool:
        """Whether all of these bound keycodes were found ready to type already (asks nothing of the server)."""
        return all(code in self._settled for code in keycodes)

    def left(self, keycodes: list[int], now: float) -> float:
        """Seconds until these bound keycodes may be typed; 0.0 when they may."""
        wait = 0.0
        for code in keycodes:
            if code in self._settled:
                continue
            left = self._left(code, now)
            if left <= 0:
                self._settled.add(code)
            wait = max(wait, left)
        return wait

    def _left(self, code: int, now: float) -> float:
        at = self._bound_at.get(code, float("-inf"))
        app = self._focused_app(now) if self.reads is not None else None
        if self.reads is None or app is None or self._missed.get(app, 0) >= MISSES_FOR_LAZY:
            return at + MAPPING_SETTLE_S - now
        change = self._change_of.get(code, 0)
        if any(self.reads.read_after(client, self.own_base, change) for client in self._clients_of(app)):
            self._eager.add(app)
            return 0.0
        limit = at + READ_WAIT_S - now
        if limit <= 0:
            if app not in self._eager:
                self._missed[app] = self._missed.get(app, 0) + 1
            return 0.0
        return min(READ_POLL_S, limit)

    def _focused_app(self, now: float) -> int | None:
        """The app owning the focus window, by its process id where the server tells it (X-Resource), else by its
        connection's resource-id base; None when the focus is no app's window (none, the pointer's root, the root
        window). One round trip or two per `now`."""
        if self._focus[0] == now:
            return self._focus[1]
        focus = self.display.get_input_focus().focus
        window = focus if isinstance(focus, int) else focus.id
        base = window & ~self.id_mask if window not in (X.NONE, X.PointerRoot) else 0
        app = None
        if base not in (0, self.own_base):
            if base not in self._pids:  # a client new since the last look, or one whose base was given again
                self._pids = client_pids(self.display)
                self._pids.setdefault(base, -base)  # no process told (no X-Resource, TCP): an app of its own
            app = self._pids[base]
        self._focus = (now, app)
        return app

    def _clients_of(self, app: int) -> list[int]:
        """The connections (resource-id bases) of `app`: every one of its process's (an app may read the mapping on
        one connection and own its windows on another, as Chromium does), or the one base it stands for."""
        return [-app] if app < 0 else [base for base, pid in self._pids.items() if pid == app]

    def close_if_idle(self) -> None:
        """Stop recording once nothing waits to settle or may be rebound (no binding is left)."""
        if not self._bound_at:
            self.close()

    def close(self) -> None:
        reads, self.reads = self.reads, None
        if reads is not None:
            reads.close()


def client_pids(display: Display) -> dict[int, int]:
    """Every client's process id by its resource-id base, as the X-Resource extension tells them (a client on a
    local socket; none over TCP); empty without the extension."""
    if not display.has_extension("X-Resource"):
        return {}
    try:
        reply = display.res_query_client_ids([{"client": 0, "mask": res.LocalClientPIDMask}])
    except XError:
        return {}
    return {value.spec.client: value.value[0] for value in reply.ids
            if value.spec.mask == res.LocalClientPIDMask and value.value}
