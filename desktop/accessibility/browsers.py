"""Chromium and Electron expose their pages to the accessibility bus only when started with
`--force-renderer-accessibility` (with accessibility switched on as well): without it a page is four
empty objects. Switching it on later does nothing, so the switch is added when they start:

- by `Apps.launch` and `/v1/processes` on a desktop, for any executable of the Chromium family (by name,
  or by the resource packs every Chromium, Electron and CEF build ships next to its binary);
- by Debian's and Ubuntu's `chromium` wrapper script, through a file `install desktop` puts in
  `/etc/chromium.d`, for Chromium started any other way inside a desktop (xdg-open, a terminal).

docs/accessibility.md "Which apps expose a tree".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

SWITCH = "--force-renderer-accessibility"
CHROMIUM_NAMES = frozenset({
    "chromium", "chromium-browser", "chrome", "google-chrome", "google-chrome-stable", "google-chrome-beta",
    "google-chrome-unstable", "microsoft-edge", "microsoft-edge-stable", "brave", "brave-browser", "vivaldi",
    "vivaldi-stable", "opera", "electron", "thorium-browser",
})
CHROMIUM_RESOURCES = ("chrome_100_percent.pak", "v8_context_snapshot.bin", "snapshot_blob.bin")
"""Shipped next to the binary of every Chromium, Electron and CEF build."""

DEBIAN_HOOK_DIR = Path("/etc/chromium.d")
DEBIAN_HOOK_NAME = "sandbox-desktop-accessibility"
DEBIAN_HOOK = f"""# Written by `sandbox-desktop install desktop`: inside a sandbox-desktop desktop, Chromium
# exposes its pages to the accessibility bus (docs/accessibility.md). Elsewhere it does nothing.
if [ "$SANDBOX_DESKTOP_ACCESSIBILITY" = 1 ]; then
  export CHROMIUM_FLAGS="$CHROMIUM_FLAGS {SWITCH}"
fi
"""


def is_chromium_family(executable: str) -> bool:
    """Whether `executable` (a path) is a Chromium-based browser or an Electron/CEF app."""
    name = os.path.basename(executable)
    if name in CHROMIUM_NAMES:
        return True
    real = Path(os.path.realpath(executable))
    return any((real.parent / resource).exists() for resource in CHROMIUM_RESOURCES)


def with_accessibility(executable: str, args: Sequence[str]) -> list[str]:
    """`args` with the switch added in front when `executable` needs it (and it is not there yet)."""
    if SWITCH in args or not is_chromium_family(executable):
        return list(args)
    return [SWITCH, *args]


def install_debian_hook(directory: Path = DEBIAN_HOOK_DIR) -> Path | None:
    """Write the wrapper-script hook where Debian's `chromium` reads it; None where there is no such
    directory (another distribution, or Chromium not installed). Blocking; needs write access."""
    if not directory.is_dir():
        return None
    path = directory / DEBIAN_HOOK_NAME
    if not path.exists() or path.read_text() != DEBIAN_HOOK:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(DEBIAN_HOOK)
        tmp.replace(path)
    return path
