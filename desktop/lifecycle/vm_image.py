"""What programs written for OSWorld's Ubuntu VM image assume of the machine, given to a desktop that asks for it
(`"osworld": true`, docs/osworld.md "What tasks assume"): its HOME also at `/home/user` (in its own mount
namespace), and on its PATH, before the machine's, a folder of commands the image has and Debian names otherwise:
`google-chrome` (Chromium), `python` (the desktops' Python with pyautogui, or the machine's python3), a `vlc`
with its HTTP interface on, and a `dconf` that reads every key unset where the machine has none (pyautogui needs
one to click). Each desktop has its own network namespace, so the fixed ports tasks use inside
(Chrome's 1337, socat's 9222, VLC's 8080) never collide between desktops: nothing is rewritten."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from desktop.core.dependencies import which

HOME_ALIAS = "/home/user"
"""Where the image's user's HOME is, which most tasks hard-code."""
DESKTOPS_PYTHON = Path("/opt/sandbox-desktop/osworld-python")
"""The desktops' Python by default: a venv over the machine's python3 with pyautogui, made by
`sandbox-desktop install osworld` (desktop/lifecycle/osworld_install.py)."""
CDP_PORT = 9222
"""Inside a desktop, where the harness expects Chrome's DevTools (tasks run socat from 9222 to Chrome's 1337)."""
VLC_PORT = 8080
"""Inside a desktop, VLC's HTTP interface."""
VLC_PASSWORD = "password"
"""The image's VLC HTTP password, which the harness's VLC getters send."""
BROWSERS = ("chromium", "chromium-browser")
DCONF_READ_ONLY = """# The machine has no dconf (Debian's dconf-cli, `sandbox-desktop install osworld` installs it), and
# pyautogui's click and drag run `dconf read` for the mouse's handedness, failing without it: a key read here is
# unset (prints nothing), as the image's is. Writing settings is not stood in for.
[ "$1" = read ] && exit 0
echo "dconf: not installed on this machine (dconf-cli); only 'dconf read' is stood in for" >&2
exit 1
"""
"""The body of the `dconf` written where the machine has none."""


@dataclass(frozen=True)
class VmImage:
    """A desktop dressed as OSWorld's VM image; in force from its next start (the mount namespace is made then)."""

    python: Path | None = DESKTOPS_PYTHON
    """The desktops' Python (a venv whose `bin/` goes on PATH), when it exists."""
    home_alias: str = HOME_ALIAS

    def bin_folder(self, runtime: Path) -> Path:
        """Where its commands are: in the desktop's runtime directory, which its sandbox sees at the same path."""
        return runtime / "vm-image-bin"

    def environment(self, base_path: str, runtime: Path) -> dict[str, str]:
        """PATH with its commands first, then the desktops' Python, then the machine's."""
        parts = [str(self.bin_folder(runtime))]
        if self.python is not None and (self.python / "bin" / "python3").exists():
            parts.append(str(self.python / "bin"))
        return {"PATH": os.pathsep.join([*parts, base_path])}

    def write_commands(self, runtime: Path, path: str) -> dict[str, tuple[str, ...]]:
        """Write the commands the machine lacks into `bin_folder` (blocking); `path` is the PATH they would be
        looked up on. Answers each command written and what it runs (nothing: a stand-in of its own)."""
        folder = self.bin_folder(runtime)
        folder.mkdir(mode=0o755, exist_ok=True)
        written: dict[str, tuple[str, ...]] = {}
        browser = next((found for name in BROWSERS if (found := which(name, path))), None)
        if browser is not None and not which("google-chrome", path):
            written["google-chrome"] = written["google-chrome-stable"] = (browser,)
        vlc = which("vlc", path)
        if vlc is not None:  # the image's vlcrc turns the HTTP interface on; flags do it here
            written["vlc"] = (vlc, "--extraintf=http", f"--http-port={VLC_PORT}", f"--http-password={VLC_PASSWORD}")
        if self.python is None or not (self.python / "bin" / "python").exists():
            # By name: the machine's python3 as the desktop's PATH finds it (the server's own may be out of sight).
            written["python"] = ("python3",)
        bodies = {name: f'exec {shlex.join(argv)} "$@"\n' for name, argv in written.items()}
        if not which("dconf", path):
            written["dconf"], bodies["dconf"] = (), DCONF_READ_ONLY
        for name, body in bodies.items():
            script = folder / name
            script.write_text("#!/bin/sh\n# Written by sandbox-desktop for OSWorld tasks (docs/osworld.md).\n" + body)
            script.chmod(0o755)
        return written
