"""The desktop HOME: default openbox configuration and the environment desktop processes get."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import time
from pathlib import Path

# One desktop, no root-window mouse bindings: openbox's defaults switch desktops when the wheel
# turns over the root window, after which every window vanishes from per-desktop views.
DEFAULT_RC_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sandbox-desktop because none was here; edit freely, it is never overwritten. -->
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <resistance><strength>0</strength><screen_edge_strength>0</screen_edge_strength></resistance>
  <focus>
    <focusNew>yes</focusNew>
    <followMouse>no</followMouse>
  </focus>
  <placement><policy>Smart</policy><center>yes</center></placement>
  <theme>
    <name>Clearlooks</name>
    <titleLayout>NLIMC</titleLayout>
    <keepBorder>yes</keepBorder>
    <animateIconify>no</animateIconify>
  </theme>
  <desktops>
    <number>1</number>
    <firstdesk>1</firstdesk>
    <names><name>desktop</name></names>
    <popupTime>0</popupTime>
  </desktops>
  <resize><drawContents>yes</drawContents></resize>
  <applications/>
  <keyboard/>
  <mouse>
    <dragThreshold>1</dragThreshold>
    <doubleClickTime>500</doubleClickTime>
    <context name="Frame">
      <mousebind button="A-Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="A-Left" action="Drag"><action name="Move"/></mousebind>
    </context>
    <context name="Titlebar">
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Left" action="Drag"><action name="Move"/></mousebind>
      <mousebind button="Left" action="DoubleClick"><action name="ToggleMaximize"/></mousebind>
    </context>
    <context name="Top"><mousebind button="Left" action="Drag"><action name="Resize"><edge>top</edge></action></mousebind></context>
    <context name="Left"><mousebind button="Left" action="Drag"><action name="Resize"><edge>left</edge></action></mousebind></context>
    <context name="Right"><mousebind button="Left" action="Drag"><action name="Resize"><edge>right</edge></action></mousebind></context>
    <context name="Bottom"><mousebind button="Left" action="Drag"><action name="Resize"><edge>bottom</edge></action></mousebind></context>
    <context name="BLCorner"><mousebind button="Left" action="Drag"><action name="Resize"/></mousebind></context>
    <context name="BRCorner"><mousebind button="Left" action="Drag"><action name="Resize"/></mousebind></context>
    <context name="TLCorner"><mousebind button="Left" action="Drag"><action name="Resize"/></mousebind></context>
    <context name="TRCorner"><mousebind button="Left" action="Drag"><action name="Resize"/></mousebind></context>
    <!-- No bindings in the Client context: they make openbox grab the pointer synchronously on every
         click into a window, which freezes it and reorders injected input. sandbox-desktop focuses and
         raises the clicked window itself (EWMH) before the press. -->
    <context name="Close"><mousebind button="Left" action="Click"><action name="Close"/></mousebind></context>
    <context name="Maximize"><mousebind button="Left" action="Click"><action name="ToggleMaximize"/></mousebind></context>
    <context name="Iconify"><mousebind button="Left" action="Click"><action name="Iconify"/></mousebind></context>
    <context name="Root"/>
  </mouse>
  <menu><hideDelay>200</hideDelay></menu>
</openbox_config>
"""


def prepare_home(home: Path, template: Path | None = None) -> Path:
    """Create HOME (a copy of `template`, when the desktop has one) and write the default `rc.xml` unless the
    user (or the template) put their own there."""
    if template is not None:
        shutil.copytree(template, home, symlinks=True, dirs_exist_ok=True)
    config = home / ".config" / "openbox"
    config.mkdir(parents=True, exist_ok=True)
    for sub in (".cache", ".local/share", ".local/share/fonts"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    rc = config / "rc.xml"
    if not rc.exists():
        tmp = rc.with_suffix(".xml.tmp")
        tmp.write_text(DEFAULT_RC_XML)
        tmp.replace(rc)
    return rc


REMOVE_ATTEMPTS = 5


def _vanished_is_removed(function: object, path: str,
                         exc_info: tuple[type[BaseException], BaseException, object]) -> None:
    """rmtree's error handler: an entry that disappeared meanwhile (a process renaming its temporary file as
    it exits) is as good as removed; anything else is raised."""
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def restore_home(home: Path, template: Path | None = None) -> None:
    """HOME as a fresh desktop gets it: everything in it removed, then prepared again (docs/desktops.md, reset).
    The folder itself stays (a sandboxed desktop has it bound into its namespace: a new folder at the same path
    would not be the one its programs see). A file written while the tree is removed (a process still exiting)
    makes rmtree fail with ENOTEMPTY: the removal is tried again, a few times."""
    if home.is_symlink() or home.is_file():
        home.unlink()
    home.mkdir(parents=True, exist_ok=True)
    for attempt in range(REMOVE_ATTEMPTS):
        try:
            for entry in os.scandir(home):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, onerror=_vanished_is_removed)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
            break
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY or attempt == REMOVE_ATTEMPTS - 1:
                raise
            time.sleep(0.05)
    prepare_home(home, template)


def autostart_script(home: Path) -> Path | None:
    """The user's `~/.config/openbox/autostart`, run once per desktop start, if it exists."""
    path = home / ".config" / "openbox" / "autostart"
    return path if path.is_file() else None


CHROMIUM_ACCESSIBILITY_SWITCH = "--force-renderer-accessibility"
ACCESSIBILITY_MARK = "SANDBOX_DESKTOP_ACCESSIBILITY"
"""Set to 1 for every process on a desktop (user processes too): what Debian's chromium hook looks for."""
ACCESSIBILITY_ENVIRONMENT = {
    ACCESSIBILITY_MARK: "1",
    "ACCESSIBILITY_ENABLED": "1",  # Chromium and Electron: register with the accessibility bus
    "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",  # Qt 5.x and 6: the AT-SPI bridge without a screen reader
    "QT_ACCESSIBILITY": "1",
    "GNOME_ACCESSIBILITY": "1",  # GTK 2 and Java's ATK wrapper
}
"""What makes every toolkit expose its tree (docs/accessibility.md "Which apps expose a tree"); GTK 3
and 4 register by themselves once the bus is reachable."""


def runtime_dir(display: str) -> Path:
    """The desktop's `XDG_RUNTIME_DIR`: private to the desktop (its display number is unique on the
    machine) and short, because sockets are made in it (the accessibility bus's among them) and a
    Unix socket's path must fit in 108 bytes, which a state directory under a long path may not."""
    return Path(tempfile.gettempdir()) / f"sandbox-desktop-{os.getuid()}" / f"run{display.lstrip(':')}"


def prepare_runtime_dir(display: str) -> Path:
    """Create the runtime directory empty and 0700 (what the XDG spec asks of it); blocking."""
    path = runtime_dir(display)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)  # a previous desktop on this display left it behind
    path.mkdir(mode=0o700)
    return path


def desktop_environment(base: dict[str, str], home: Path, display: str, marker: str) -> dict[str, str]:
    """The environment of every desktop process: ours on top of the server's.

    `SANDBOX_DESKTOP_INSTANCE` is inherited by every descendant, so stopping the desktop can find
    (and stop) processes that double-forked away from their process group.
    """
    env = dict(base)
    for key in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XAUTHORITY", "WAYLAND_DISPLAY",
                "NO_AT_BRIDGE", "AT_SPI_BUS_ADDRESS",
                # The server's own sound server is not the desktop's: the supervisor adds its own (docs/audio.md).
                "PULSE_SERVER", "PULSE_SINK", "PULSE_SOURCE", "PULSE_COOKIE", "PULSE_RUNTIME_PATH"):
        env.pop(key, None)
    env.update(ACCESSIBILITY_ENVIRONMENT)
    # Debian's and Ubuntu's `chromium` wrapper scripts read CHROMIUM_FLAGS: the switch that fills page trees.
    flags = base.get("CHROMIUM_FLAGS", "")
    if CHROMIUM_ACCESSIBILITY_SWITCH not in flags.split():
        env["CHROMIUM_FLAGS"] = f"{flags} {CHROMIUM_ACCESSIBILITY_SWITCH}".strip()
    env.update({
        "XDG_RUNTIME_DIR": str(runtime_dir(display)),
        "DISPLAY": display,
        "HOME": str(home),
        "USER": base.get("USER") or "sandbox-desktop",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_SESSION_TYPE": "x11",
        "SANDBOX_DESKTOP_INSTANCE": marker,
    })
    return env
