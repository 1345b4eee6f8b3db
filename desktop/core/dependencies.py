"""What the desktop needs at run time, and whether this machine has it.

One table (`DEPENDENCIES`) names every dependency, how to detect it and which package provides it
for each package manager; detection and `sandbox-desktop install desktop` both read it. Detection
only stats files and looks up import specs, so a report costs well under a millisecond; the
`DependencyChecker` caches it anyway so hot paths don't rescan PATH on every call.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from desktop.core.errors import DependenciesMissing

INSTALL_COMMAND = "sandbox-desktop install desktop --yes"

Kind = Literal["binary", "helper", "fonts", "python"]
LIBEXEC_DIRS = ("/usr/libexec", "/usr/lib/at-spi2-core", "/usr/lib/at-spi2", "/usr/lib")
"""Where distributions put programs that other programs run (`helper` dependencies), not on PATH."""

# Where fontconfig (and so every Xft/GTK/Qt app) looks for fonts by default.
FONT_DIRS: tuple[str, ...] = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts")
FONT_SUFFIXES = (".ttf", ".otf", ".ttc")
# A font tree with no usable font is small; this only stops a pathological (or looping) tree.
MAX_FONT_SCAN_ENTRIES = 50_000


@dataclass(frozen=True)
class Dependency:
    """One thing the desktop needs, how it is detected and which packages provide it."""

    name: str
    """The reported name (as in `missingDependencies`)."""
    kind: Kind
    """`binary`: an executable on PATH; `helper`: one in a libexec directory; `fonts`: any scalable font;
    `python`: an importable module."""
    target: str
    """The executable or module looked up (unused for fonts)."""
    purpose: str
    """What the service uses it for, shown to people deciding whether to install it."""
    required: bool = True
    """Required ones make the desktop `install_required`; optional ones are only reported."""
    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)
    """Packages that provide it, per installer: `apt`, `dnf`, `apk` (system) or `pip` (Python)."""


# The fixed report order: binaries, fonts, then Python modules. The install order of system
# packages follows this table too, with the fonts package last (`--no-fonts` drops it).
DEPENDENCIES: tuple[Dependency, ...] = (
    Dependency("Xvfb", "binary", "Xvfb", "the virtual X server",
               packages={"apt": ("xvfb",), "dnf": ("xorg-x11-server-Xvfb",), "apk": ("xvfb",)}),
    Dependency("xkbcomp", "binary", "xkbcomp", "compiling the keymap; Xvfb has no keyboard without it",
               packages={"apt": ("x11-xkb-utils",), "dnf": ("xkbcomp",), "apk": ("xkbcomp",)}),
    Dependency("openbox", "binary", "openbox", "the window manager",
               packages={"apt": ("openbox",), "dnf": ("openbox",), "apk": ("openbox",)}),
    Dependency("dbus-daemon", "binary", "dbus-daemon", "a session bus for apps that want one",
               required=False,
               packages={"apt": ("dbus-x11",), "dnf": ("dbus-x11",), "apk": ("dbus",)}),
    Dependency("at-spi-bus-launcher", "helper", "at-spi-bus-launcher",
               "the accessibility bus: element trees, find, act and element waits", required=False,
               packages={"apt": ("at-spi2-core",), "dnf": ("at-spi2-core",), "apk": ("at-spi2-core",)}),
    Dependency("pulseaudio", "binary", "pulseaudio", "the desktop's sound server (docs/audio.md)", required=False,
               packages={"apt": ("pulseaudio",), "dnf": ("pulseaudio",), "apk": ("pulseaudio",)}),
    Dependency("parec", "binary", "parec", "reading the desktop's sound for the live view and recordings",
               required=False,
               packages={"apt": ("pulseaudio-utils",), "dnf": ("pulseaudio-utils",), "apk": ("pulseaudio-utils",)}),
    Dependency("ip", "binary", "ip", "each desktop's own network namespace (docs/sandbox-network.md)",
               required=False, packages={"apt": ("iproute2",), "dnf": ("iproute",), "apk": ("iproute2",)}),
    Dependency("nft", "binary", "nft", "each desktop's network rules and connection log (docs/sandbox-network.md)",
               required=False, packages={"apt": ("nftables",), "dnf": ("nftables",), "apk": ("nftables",)}),
    Dependency("xdg-open", "binary", "xdg-open", "POST /v1/desktop/open",
               packages={"apt": ("xdg-utils",), "dnf": ("xdg-utils",), "apk": ("xdg-utils",)}),
    Dependency("fonts", "fonts", "", "text in apps (any TrueType/OpenType font)",
               packages={"apt": ("fonts-dejavu-core",), "dnf": ("dejavu-sans-fonts",),
                         "apk": ("font-dejavu",)}),
    Dependency("python:Xlib", "python", "Xlib", "input, windows and clipboard (XTest, EWMH)",
               packages={"pip": ("python-xlib",)}),
    Dependency("python:mss", "python", "mss", "screenshots (XShm)", packages={"pip": ("mss",)}),
    Dependency("python:av", "python", "av", "recording (PyAV with its bundled FFmpeg)",
               packages={"pip": ("av",)}),
    Dependency("python:dbus_fast", "python", "dbus_fast", "talking to the accessibility bus (asyncio D-Bus)",
               required=False, packages={"pip": ("dbus-fast",)}),
)


TURN_SERVER = Dependency("turnserver", "binary", "turnserver",
                         "the live view's own TURN relay (`server --turn local`, docs/streaming-turn.md)",
                         required=False,
                         packages={"apt": ("coturn",), "dnf": ("coturn",), "apk": ("coturn",)})
"""Not a desktop's dependency (the server's, and only with `--turn local`): installed with `install desktop
--with-turn`, and not reported in a desktop's status."""


@dataclass(frozen=True)
class DependencyReport:
    """The outcome of one scan: what is missing, in the fixed order of `DEPENDENCIES`."""

    missing: tuple[str, ...] = ()
    """Required dependencies that are missing (the wire's `missingDependencies`)."""
    missing_optional: tuple[str, ...] = ()
    """Optional dependencies that are missing; the desktop works without them."""
    pip_packages: tuple[str, ...] = ()
    """pip packages that provide the missing Python modules (the system installer can't)."""

    @property
    def ok(self) -> bool:
        """True when every required dependency is present."""
        return not self.missing

    @property
    def install_command(self) -> str | None:
        """The one command that fixes the most: the installer for system packages, else pip."""
        if any(not name.startswith("python:") for name in self.missing):
            return INSTALL_COMMAND
        if self.pip_packages:
            return pip_command(self.pip_packages)
        return None

    def refusal(self) -> DependenciesMissing:
        """The problem of an action or a start while some are missing: `message`, the names and the command."""
        return DependenciesMissing(self.message(), missingDependencies=list(self.missing),
                                   installCommand=self.install_command)

    def message(self) -> str:
        """A sentence naming what is missing and the command that installs it."""
        if not self.missing:
            return "All desktop dependencies are installed."
        text = f"Desktop dependencies are not installed: {', '.join(self.missing)}."
        system = [name for name in self.missing if not name.startswith("python:")]
        if system and self.pip_packages:
            text += (f" Run `{INSTALL_COMMAND}` to install the system packages, or install the"
                     " required tools manually.")
        elif system:
            text += f" Run `{INSTALL_COMMAND}` to install them, or install the required tools manually."
        if self.pip_packages:
            text += f" Install the Python modules with `{pip_command(self.pip_packages)}`."
        return text


def pip_command(packages: Sequence[str]) -> str:
    """The pip command line that installs `packages` into the running interpreter."""
    return f"{sys.executable} -m pip install {' '.join(packages)}"


def which(name: str, path: str | None = None) -> str | None:
    """The first executable regular file called `name` on `path` (default: $PATH), or None.

    Unlike the reference, a file without the execute bit doesn't count: it could not be run.
    Empty PATH entries are skipped rather than meaning the current directory.
    """
    search = os.environ.get("PATH", os.defpath) if path is None else path
    for directory in search.split(os.pathsep):
        if not directory:
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_helper(name: str) -> str | None:
    """A helper program (`at-spi-bus-launcher`) in one of the libexec directories, or None."""
    for directory in LIBEXEC_DIRS:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def has_fonts(font_dirs: Sequence[str] = FONT_DIRS) -> bool:
    """True if any TrueType/OpenType font file lies under one of `font_dirs`."""
    seen = 0
    for root in font_dirs:
        top = os.path.expanduser(root)
        if not os.path.isdir(top):
            continue
        # followlinks: distributions symlink font directories; the entry cap guards against loops.
        for directory, dirnames, filenames in os.walk(top, followlinks=True):
            seen += len(dirnames) + len(filenames)
            for filename in filenames:
                if filename.lower().endswith(FONT_SUFFIXES) and os.path.isfile(
                    os.path.join(directory, filename)
                ):
                    return True
            if seen > MAX_FONT_SCAN_ENTRIES:
                return False
    return False


def has_module(module: str) -> bool:
    """True if `module` can be imported by this interpreter (nothing is imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def is_present(dependency: Dependency, path: str | None = None,
               font_dirs: Sequence[str] = FONT_DIRS) -> bool:
    """Whether one dependency is satisfied on this machine."""
    if dependency.kind == "binary":
        return which(dependency.target, path) is not None
    if dependency.kind == "helper":
        return find_helper(dependency.target) is not None
    if dependency.kind == "fonts":
        return has_fonts(font_dirs)
    return has_module(dependency.target)


def check_dependencies(
    path: str | None = None,
    *,
    font_dirs: Sequence[str] | None = None,
    dependencies: Sequence[Dependency] = DEPENDENCIES,
) -> DependencyReport:
    """Scan PATH (default: $PATH), the font directories and the Python path once."""
    roots = FONT_DIRS if font_dirs is None else tuple(font_dirs)
    absent = [dep for dep in dependencies if not is_present(dep, path, roots)]
    pip: list[str] = []
    for dep in absent:
        if dep.required and dep.kind == "python":
            pip.extend(p for p in dep.packages.get("pip", ()) if p not in pip)
    return DependencyReport(
        missing=tuple(dep.name for dep in absent if dep.required),
        missing_optional=tuple(dep.name for dep in absent if not dep.required),
        pip_packages=tuple(pip),
    )


class DependencyChecker:
    """Caches the report for `ttl` seconds (default 2.0) so hot paths don't rescan PATH every call.

    Safe to share between the event loop and worker threads. A freshly installed or removed binary
    is noticed at the latest `ttl` seconds later; `report(fresh=True)` rescans at once.
    """

    def __init__(self, ttl: float = 2.0, path: str | None = None, *,
                 font_dirs: Sequence[str] | None = None) -> None:
        if ttl < 0:
            raise ValueError(f"ttl must be >= 0 seconds, got {ttl}")
        self.ttl = ttl
        self._path = path
        self._font_dirs = font_dirs
        self._lock = threading.Lock()
        self._report: DependencyReport | None = None
        self._checked_at = 0.0

    def report(self, *, fresh: bool = False) -> DependencyReport:
        """The cached report, rescanned when older than `ttl` or when `fresh` is set."""
        with self._lock:
            now = time.monotonic()
            if fresh or self._report is None or now - self._checked_at >= self.ttl:
                self._report = check_dependencies(self._path, font_dirs=self._font_dirs)
                self._checked_at = now
            return self._report
