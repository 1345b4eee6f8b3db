"""`sandbox-desktop install osworld`: the apps OSWorld's task domains drive, and the desktops' Python with
pyautogui, on Debian/Ubuntu (docs/osworld.md "Installing the apps").

The apps are a table (`APPS`), one row per thing a domain needs; `--only` picks rows by name. What OSWorld's VM
image has that Debian does not package is listed in `NOT_ON_DEBIAN` and printed with every plan. The desktops'
Python is a venv over the machine's python3 (its packages stay visible) with pyautogui added: PEP 668 keeps pip
out of Debian's own python3, and a desktop's sandbox sees /opt where it may not see the server's own venv.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from desktop.lifecycle import installer
from desktop.lifecycle.installer import MANAGERS, InstallError, Step, _confirm, is_root, needs_sudo
from desktop.lifecycle.vm_image import DESKTOPS_PYTHON

BASE_PYTHON = "/usr/bin/python3"
"""The machine's python3, which every desktop's sandbox sees (a server's own may live in a hidden HOME)."""
PYTHON_PACKAGES = ("pyautogui~=0.9.54", "python-xlib>=0.33")
"""What OSWorld's actions import (its harness pins pyautogui 0.9.54), and the X library pyautogui uses on Linux."""


@dataclass(frozen=True)
class TaskApp:
    name: str
    """Its `--only` name."""
    wanted_by: str
    """The task domains (evaluation_examples/examples/<domain>) that drive it."""
    debian: tuple[str, ...]
    """Its Debian packages."""


APPS: tuple[TaskApp, ...] = (
    TaskApp("chromium", "chrome, multi_apps (as `google-chrome` on the desktop's PATH)", ("chromium",)),
    TaskApp("socat", "chrome (tasks forward 9222 to Chrome's 1337 with it)", ("socat",)),
    TaskApp("libreoffice", "libreoffice_calc, libreoffice_impress, libreoffice_writer",
            ("libreoffice-calc", "libreoffice-impress", "libreoffice-writer")),
    TaskApp("gimp", "gimp", ("gimp",)),
    TaskApp("vlc", "vlc", ("vlc",)),
    TaskApp("thunderbird", "thunderbird", ("thunderbird",)),
    TaskApp("terminal", "os, multi_apps (GNOME Terminal: its text is in the accessibility tree)",
            ("gnome-terminal",)),
    TaskApp("files", "os, multi_apps (the file manager)", ("nautilus",)),
    TaskApp("fonts", "libreoffice_*, multi_apps (metric-compatible stand-ins for the Office fonts documents name)",
            ("fonts-liberation2", "fonts-crosextra-carlito", "fonts-crosextra-caladea")),
    TaskApp("python", "every task: pyautogui actions run with the desktop's `python` (its click runs `dconf read`)",
            ("python3-venv", "python3-tk", "python-is-python3", "dconf-cli")),
)
BY_NAME = {app.name: app for app in APPS}
NOT_ON_DEBIAN: tuple[tuple[str, str], ...] = (
    ("Visual Studio Code (vs_code)", "not in Debian; Microsoft's own apt repository has `code`"),
    ("Google Chrome", "not in Debian (Google's apt repository has it); Chromium stands in as `google-chrome`"),
    ("Google Drive, Gmail and other logins", "tasks that sign in need accounts OSWorld's settings hold; no package"),
    ("Ubuntu's GNOME Shell, its settings and extensions", "desktops run openbox; `gsettings` keys of GNOME Shell "
                                                          "apply to nothing"),
)


def app_names(text: str) -> tuple[str, ...]:
    """`--only`: comma-separated names of `APPS`; an unknown one is an argument error naming the known ones."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown app {', '.join(unknown) or '(none given)'}; "
                                         f"known: {', '.join(BY_NAME)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-y", "--yes", action="store_true", help="install without asking")
    parser.add_argument("--print-only", action="store_true",
                        help="print the plan (packages, commands, what Debian lacks), install nothing")
    parser.add_argument("--only", type=app_names, metavar="NAME[,NAME...]",
                        help=f"install only these ({', '.join(BY_NAME)}); default: all")
    parser.add_argument("--python-dir", type=Path, default=DESKTOPS_PYTHON, metavar="DIR",
                        help=f"where the desktops' Python goes (default {DESKTOPS_PYTHON}; the server's "
                             "--osworld-python)")
    parser.add_argument("--no-apt", action="store_true",
                        help="install no system packages: only the desktops' Python (python3-venv must be there)")
    parser.add_argument("--package-manager", choices=sorted(MANAGERS),
                        help="only apt is supported: the app set is Debian's and Ubuntu's")


def plan(args: argparse.Namespace) -> list[Step]:
    """Every step, in order: the Debian packages, then the desktops' Python."""
    chosen = [BY_NAME[name] for name in (args.only or BY_NAME)]
    packages = [] if args.no_apt else [p for app in chosen for p in app.debian]
    steps = MANAGERS["apt"].steps(packages) if packages else []
    if any(app.name == "python" for app in chosen):
        venv = Path(args.python_dir).expanduser().absolute()
        steps += [Step((BASE_PYTHON, "-m", "venv", "--system-site-packages", str(venv))),
                  Step((str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", *PYTHON_PACKAGES))]
    return steps


def run(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    return installer.run(args, stdin, out, body=_run)


def _run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    if args.package_manager not in (None, "apt"):
        raise InstallError(f"OSWorld's apps are listed for Debian and Ubuntu (apt) only, not {args.package_manager}: "
                           "install the same apps with your distribution's names (docs/osworld.md)")
    steps = plan(args)
    try:
        sudo = needs_sudo()
    except InstallError:
        if not args.print_only:
            raise
        sudo = False
    print("OSWorld apps (Debian packages):", file=out)
    for app in APPS:
        if args.only is None or app.name in args.only:
            print(f"  - {app.name}: {' '.join(app.debian)}  [{app.wanted_by}]", file=out)
    print("Not on Debian (tasks that need them fail):", file=out)
    for thing, why in NOT_ON_DEBIAN:
        print(f"  - {thing}: {why}", file=out)
    print("Commands:", file=out)
    for step in steps:
        print("  " + step.display(sudo), file=out)
    if args.print_only:
        return 0
    if not is_root() and not sudo:
        raise InstallError("installing needs root: run this as root, or install sudo")
    if not args.yes and not _confirm(stdin, out):
        return 1
    code = installer.run_steps(steps, sudo, out)
    if code == 0:
        print("OSWorld apps installed.", file=out)
    return code
