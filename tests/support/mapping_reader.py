"""An X app for tests of typing through new bindings (tests/unit/desktop/input/test_settling.py): it maps a window,
takes the keyboard focus, prints "ready", then on each keyboard mapping change waits `delay` seconds and reads the
new mapping, appending the time (monotonic) to `log` just before it asks for it; with a negative `delay` it never reads.

Usage: python tests/support/mapping_reader.py DISPLAY DELAY LOG
"""

from __future__ import annotations

import sys
import time

from Xlib import X
from Xlib.display import Display


def main() -> None:
    name, delay, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    display = Display(name)
    window = display.screen().root.create_window(0, 0, 100, 100, 0, display.screen().root_depth,
                                                  event_mask=X.KeyPressMask)
    window.map()
    display.sync()
    window.set_input_focus(X.RevertToParent, X.CurrentTime)
    display.sync()
    print("ready", flush=True)
    while True:
        event = display.next_event()
        if event.type != X.MappingNotify or event.request != X.MappingKeyboard or delay < 0:
            continue
        time.sleep(delay)
        with open(log, "a") as out:  # before the read: a test that saw the read finds the line
            out.write(f"{time.monotonic()}\n")
        display.get_keyboard_mapping(event.first_keycode, event.count)


if __name__ == "__main__":
    main()
