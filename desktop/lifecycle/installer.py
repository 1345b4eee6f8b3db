"""`sandbox-desktop install desktop`: install the desktop's system packages with the distro's manager.

The package names come from `desktop.core.dependencies.DEPENDENCIES`; the command shapes come from
`MANAGERS` below. Both are tables, so supporting another distro is a data change.
"""

from __future__ import annotations

import argparse
import codecs
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from desktop.accessibility.browsers import DEBIAN_HOOK_DIR, DEBIAN_HOOK_NAME, install_debian_hook
from desktop.core.dependencies import DEPENDENCIES, TURN_SERVER, Dependency, check_dependencies, which

# A step still running after this long is presumed stuck (a held lock, a hidden prompt).
STEP_TIMEOUT_S = 60 * 60.0


@dataclass(frozen=True)
class Step:
    """One command line; `env` is added to the environment it runs with."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def display(self, sudo: bool) -> str:
        """The line a person would type: `sudo env K=V cmd` or `K=V cmd`."""
        assignments = [f"{key}={value}" for key, value in self.env.items()]
        return shlex.join(self.command(sudo)) if sudo else shlex.join([*assignments, *self.argv])

    def command(self, sudo: bool) -> list[str]:
        """The argv to execute; sudo resets the environment, so `env` carries it through."""
        if not sudo:
            return list(self.argv)
        assignments = [f"{key}={value}" for key, value in self.env.items()]
        return ["sudo", *(["env", *assignments] if assignments else []), *self.argv]


@dataclass(frozen=True)
class Manager:
    """How one package manager is detected and driven."""

    name: str
    """The `--package-manager` value and the key in `Dependency.packages`."""
    binary: str
    """The executable whose presence on PATH selects this manager."""
    prepare: tuple[Step, ...]
    """Steps before the install (refreshing the package index)."""
    install: Step
    """The install command; the package names are appended."""

    def steps(self, packages: Sequence[str]) -> list[Step]:
        """Every step needed to install `packages`."""
        return [*self.prepare, Step((*self.install.argv, *packages), self.install.env)]


# Detection order when --package-manager is not given.
MANAGERS: dict[str, Manager] = {
    "apt": Manager(
        "apt", "apt-get",
        prepare=(Step(("apt-get", "update")),),
        install=Step(("apt-get", "install", "-y", "--no-install-recommends"),
                     {"DEBIAN_FRONTEND": "noninteractive"}),
    ),
    "dnf": Manager("dnf", "dnf", prepare=(), install=Step(("dnf", "install", "-y"))),
    "apk": Manager("apk", "apk", prepare=(), install=Step(("apk", "add", "--no-cache"))),
}


class InstallError(Exception):
    """The installation cannot go ahead; the message says what to do instead."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `install desktop` flags to `parser`."""
    parser.add_argument("-y", "--yes", action="store_true", help="install without asking")
    parser.add_argument("--print-only", action="store_true",
                        help="print the packages and the command, install nothing (no root needed)")
    parser.add_argument("--package-manager", choices=sorted(MANAGERS),
                        help="use this package manager instead of detecting one (apt-get, dnf, apk)")
    parser.add_argument("--no-fonts", action="store_true", help="leave the fonts package out")
    parser.add_argument("--with-turn", action="store_true",
                        help="also install coturn, the TURN server `server --turn local` starts "
                             "(docs/streaming-turn.md)")


def packages_for(manager: str, *, fonts: bool = True,
                 dependencies: Sequence[Dependency] = DEPENDENCIES) -> list[str]:
    """The system packages for `manager`, in table order with the fonts package last."""
    ordered = sorted(dependencies, key=lambda dep: dep.kind == "fonts")
    packages: list[str] = []
    for dep in ordered:
        if dep.kind == "fonts" and not fonts:
            continue
        packages.extend(p for p in dep.packages.get(manager, ()) if p not in packages)
    return packages


def detect_manager(requested: str | None) -> Manager:
    """The requested manager, else the first of apt-get, dnf, apk found on PATH."""
    if requested:
        return MANAGERS[requested]
    for manager in MANAGERS.values():
        if which(manager.binary):
            return manager
    raise InstallError(
        "No supported package manager found (looked for apt-get, dnf and apk on PATH). Desktop install "
        "supports Debian/Ubuntu, Fedora/RHEL and Alpine; elsewhere install the packages listed in "
        "docs/install.md by hand."
    )


def is_root() -> bool:
    """True when running as root (never on platforms without user ids)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def needs_sudo() -> bool:
    """True when not root; raises if there is no sudo to become root with."""
    if is_root():
        return False
    if which("sudo"):
        return True
    raise InstallError("Installing packages needs root: run this as root, or install sudo.")


Body = Callable[[argparse.Namespace, TextIO, TextIO], int]


def run(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None, body: Body | None = None
        ) -> int:
    """Carry out `install desktop` (or another installer's `body`) with parsed `args`; returns the process exit
    code, an `InstallError` printed as the error it is (1)."""
    try:
        return (body or _run)(args, stdin or sys.stdin, out or sys.stdout)
    except InstallError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def run_steps(steps: Sequence[Step], sudo: bool, out: TextIO) -> int:
    """Each step in turn, its output streamed, until one fails; its exit code (0: all done)."""
    for index, step in enumerate(steps, start=1):
        print(f"[{index}/{len(steps)}] {step.display(sudo)}", file=out, flush=True)
        started = time.monotonic()
        code = _stream(step, sudo, out)
        elapsed = time.monotonic() - started
        if code != 0:
            print(f"[{index}/{len(steps)}] failed with exit code {code} after {elapsed:.1f}s; "
                  "fix the error above and run the installer again.", file=out)
            return code if 0 < code < 256 else 1
        print(f"[{index}/{len(steps)}] done in {elapsed:.1f}s", file=out, flush=True)
    return 0


def _run(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    if not sys.platform.startswith("linux") and not (args.print_only and args.package_manager):
        raise InstallError("Desktop install is supported on Linux only (Debian/Ubuntu, Fedora/RHEL, "
                           "Alpine); pass --print-only --package-manager to see the commands.")
    manager = detect_manager(args.package_manager)
    packages = packages_for(manager.name, fonts=not args.no_fonts,
                            dependencies=(*DEPENDENCIES, TURN_SERVER) if args.with_turn else DEPENDENCIES)
    steps = manager.steps(packages)
    try:
        sudo = needs_sudo()
    except InstallError:
        if not args.print_only:
            raise
        sudo = False  # --print-only is for reading: show the plain command, note the privilege.

    print(f"Desktop package manager: {manager.name}", file=out)
    print("Desktop packages:", file=out)
    for package in packages:
        print(f"  - {package}", file=out)
    print("Install command:", file=out)
    print("  " + " && ".join(step.display(sudo) for step in steps), file=out)
    if args.print_only:
        if not is_root() and not sudo:
            print("(run it as root: sudo was not found)", file=out)
        return 0

    if not which(manager.binary):
        raise InstallError(f"{manager.binary} is not on PATH; pick the right --package-manager "
                           f"for this system, or run the command above where {manager.binary} exists.")
    if not args.yes and not _confirm(stdin, out):
        return 1
    code = run_steps(steps, sudo, out)
    return code if code != 0 else _report_after_install(out)


def _chromium_hook(out: TextIO) -> None:
    """Debian's chromium wrapper learns to expose pages inside desktops (desktop/accessibility/browsers.py)."""
    try:
        path = install_debian_hook()
    except OSError as exc:
        print(f"Not written: {DEBIAN_HOOK_DIR / DEBIAN_HOOK_NAME} ({exc.strerror}); as root, the server writes "
              "it when a desktop starts.", file=out)
        return
    if path is not None:
        print(f"Chromium inside desktops exposes its pages to accessibility: {path}", file=out)


def _confirm(stdin: TextIO, out: TextIO) -> bool:
    """Ask on a terminal; with no terminal (or EOF) there is nobody to ask, so cancel."""
    if not stdin.isatty():
        print("Installation cancelled: standard input is not a terminal, so nobody can confirm. "
              "Re-run with --yes to install without asking.", file=out)
        return False
    print("Proceed with desktop dependency installation? [y/N] ", end="", file=out, flush=True)
    answer = stdin.readline()
    if not answer:
        print("\nInstallation cancelled (end of input). Re-run with --yes to install without asking.",
              file=out)
        return False
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("Installation cancelled.", file=out)
    return False


def _stream(step: Step, sudo: bool, out: TextIO) -> int:
    """Run `step`, copying its output to `out` as it arrives; returns its exit code."""
    env = None if sudo else {**os.environ, **step.env}
    try:
        proc = subprocess.Popen(step.command(sudo), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
    except OSError as error:
        print(f"cannot run {step.argv[0]}: {error}", file=out)
        return 127
    assert proc.stdout is not None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + STEP_TIMEOUT_S
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                print(f"\n{step.argv[0]} still running after {STEP_TIMEOUT_S:.0f}s; stopping it.", file=out)
                proc.kill()
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out.write(decoder.decode(chunk))
            out.flush()
        out.write(decoder.decode(b"", final=True))
    finally:
        proc.stdout.close()
        code = proc.wait()
    return code


def _report_after_install(out: TextIO) -> int:
    """Re-check everything and say what (if anything) is still missing."""
    _chromium_hook(out)
    report = check_dependencies()
    if report.ok:
        print("Desktop dependencies installed.", file=out)
        if report.missing_optional:
            print(f"Optional, not found: {', '.join(report.missing_optional)}.", file=out)
        return 0
    print(f"Packages installed, but still missing: {', '.join(report.missing)}.", file=out)
    print(report.message(), file=out)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: `python -m desktop.installer [flags]`."""
    parser = argparse.ArgumentParser(prog="sandbox-desktop install desktop",
                                     description="Install the desktop's system packages.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
