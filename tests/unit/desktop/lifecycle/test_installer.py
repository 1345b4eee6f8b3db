"""`install desktop` end to end, with a fake package manager on a temp PATH: nothing is installed."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.core.dependencies import Dependency, has_fonts
from desktop.lifecycle.installer import MANAGERS, Step, add_arguments, packages_for, run
from tests.support.paths import REPO

# Command lines are shown without `sudo` only when running as root (as CI does).
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="expected command lines assume root (no sudo)")

EXPECTED = {
    "apt": (
        ["xvfb", "x11-xkb-utils", "openbox", "dbus-x11", "at-spi2-core", "pulseaudio", "pulseaudio-utils",
         "iproute2", "nftables", "xdg-utils", "fonts-dejavu-core"],
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        "xvfb x11-xkb-utils openbox dbus-x11 at-spi2-core pulseaudio pulseaudio-utils iproute2 nftables xdg-utils "
        "fonts-dejavu-core",
    ),
    "dnf": (
        ["xorg-x11-server-Xvfb", "xkbcomp", "openbox", "dbus-x11", "at-spi2-core", "pulseaudio", "pulseaudio-utils",
         "iproute", "nftables", "xdg-utils", "dejavu-sans-fonts"],
        "dnf install -y xorg-x11-server-Xvfb xkbcomp openbox dbus-x11 at-spi2-core pulseaudio pulseaudio-utils "
        "iproute nftables xdg-utils dejavu-sans-fonts",
    ),
    "apk": (
        ["xvfb", "xkbcomp", "openbox", "dbus", "at-spi2-core", "pulseaudio", "pulseaudio-utils", "iproute2",
         "nftables", "xdg-utils", "font-dejavu"],
        "apk add --no-cache xvfb xkbcomp openbox dbus at-spi2-core pulseaudio pulseaudio-utils iproute2 nftables "
        "xdg-utils font-dejavu",
    ),
}

# A stand-in apt-get: logs each call (with the DEBIAN_FRONTEND it saw), talks like apt, and on
# "install" drops executables for the desktop's binaries next to itself, as the real packages would.
FAKE_APT = """#!/bin/sh
here=${0%/*}
echo "$* DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-unset}" >> "$here/../calls.log"
echo "fake apt-get: $1"
if [ "$1" = update ] && [ -n "$FAIL_UPDATE" ]; then echo "E: could not lock" >&2; exit 100; fi
if [ "$1" = install ] && [ -n "$PROVIDE" ]; then
  for b in Xvfb xkbcomp openbox xdg-open dbus-daemon pulseaudio parec ip nft; do
    printf '#!/bin/sh\\nexit 0\\n' > "$here/$b"; chmod 755 "$here/$b"
  done
fi
exit 0
"""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def fake_path(tmp_path: Path) -> Path:
    """A PATH directory with only a fake apt-get, a pass-through sudo and the tools they use."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    apt = bindir / "apt-get"
    apt.write_text(FAKE_APT)
    apt.chmod(0o755)
    sudo = bindir / "sudo"
    sudo.write_text('#!/bin/sh\nexec "$@"\n')
    sudo.chmod(0o755)
    for tool in ("env", "chmod"):  # what sudo and the fake's "install" need
        real = shutil.which(tool)
        assert real, f"{tool} is part of coreutils"
        (bindir / tool).symlink_to(real)
    return bindir


def run_cli(*argv: str, path: Path,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point in a child process, with no stdin and `path` as its whole PATH."""
    env = {k: v for k, v in os.environ.items() if k != "DEBIAN_FRONTEND"}
    env.update({"PATH": str(path), **(extra_env or {})})
    return subprocess.run(
        [sys.executable, "-m", "desktop.lifecycle.installer", *argv], cwd=REPO, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )


def calls(fake_path: Path) -> list[str]:
    log = fake_path.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@as_root
@pytest.mark.parametrize("manager", ["apt", "dnf", "apk"])
def test_print_only_for_each_manager(manager: str) -> None:
    out = io.StringIO()
    assert run(parse("--print-only", "--package-manager", manager), out=out) == 0
    packages, command = EXPECTED[manager]
    assert out.getvalue().splitlines() == [
        f"Desktop package manager: {manager}",
        "Desktop packages:",
        *[f"  - {p}" for p in packages],
        "Install command:",
        f"  {command}",
    ]


@pytest.mark.parametrize("manager", ["apt", "dnf", "apk"])
def test_no_fonts_drops_the_fonts_package(manager: str) -> None:
    out = io.StringIO()
    assert run(parse("--print-only", "--no-fonts", "--package-manager", manager), out=out) == 0
    packages, _ = EXPECTED[manager]
    text = out.getvalue()
    assert f"  - {packages[-1]}" not in text
    assert packages[-1] not in text.split("Install command:")[1]
    for package in packages[:-1]:
        assert f"  - {package}\n" in text


@pytest.mark.parametrize("manager", ["apt", "dnf", "apk"])
def test_with_turn_adds_coturn_for_the_live_views_own_turn_server(manager: str) -> None:
    out = io.StringIO()
    assert run(parse("--print-only", "--with-turn", "--package-manager", manager), out=out) == 0
    packages, _ = EXPECTED[manager]
    listed = [line[4:] for line in out.getvalue().splitlines() if line.startswith("  - ")]
    assert listed == [*packages[:-1], "coturn", packages[-1]]  # the fonts package stays last
    assert "coturn" not in "".join(packages)  # not without the flag (test_print_only_for_each_manager)


def test_print_only_detects_the_manager_and_installs_nothing(fake_path: Path) -> None:
    result = run_cli("--print-only", path=fake_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Desktop package manager: apt\n")
    assert calls(fake_path) == []


def test_fonts_package_is_last_whatever_the_table_order() -> None:
    deps = [
        Dependency("fonts", "fonts", "", "text", packages={"apt": ("fonts-x",)}),
        Dependency("a", "binary", "a", "a", packages={"apt": ("pkg-a", "shared")}),
        Dependency("b", "binary", "b", "b", packages={"apt": ("shared", "pkg-b"), "dnf": ("b-rpm",)}),
    ]
    assert packages_for("apt", dependencies=deps) == ["pkg-a", "shared", "pkg-b", "fonts-x"]
    assert packages_for("apt", fonts=False, dependencies=deps) == ["pkg-a", "shared", "pkg-b"]
    assert packages_for("dnf", dependencies=deps) == ["b-rpm"]


def test_every_manager_covers_every_system_dependency() -> None:
    from desktop.core.dependencies import DEPENDENCIES

    for dep in DEPENDENCIES:
        if dep.kind != "python":
            assert set(dep.packages) == set(MANAGERS), f"{dep.name} lacks a package for some manager"


def test_sudo_command_lines() -> None:
    step = Step(("apt-get", "install", "-y", "xvfb"), {"DEBIAN_FRONTEND": "noninteractive"})
    assert step.command(sudo=False) == ["apt-get", "install", "-y", "xvfb"]
    assert step.display(sudo=False) == "DEBIAN_FRONTEND=noninteractive apt-get install -y xvfb"
    # sudo resets the environment, so the variable has to travel through `env`.
    assert step.command(sudo=True) == ["sudo", "env", "DEBIAN_FRONTEND=noninteractive",
                                       "apt-get", "install", "-y", "xvfb"]
    assert step.display(sudo=True) == "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y xvfb"
    assert Step(("dnf", "install", "-y")).display(sudo=True) == "sudo dnf install -y"


def test_without_yes_on_empty_stdin_cancels(fake_path: Path) -> None:
    result = run_cli(path=fake_path)
    assert result.returncode == 1
    assert "Install command:" in result.stdout
    assert "cancelled" in result.stdout.lower()
    assert "--yes" in result.stdout
    assert calls(fake_path) == [], "nothing may run without confirmation"


def _answer_on_a_terminal(answer: bytes, fake_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Run the installer in-process with a real pseudo-terminal as stdin carrying `answer`."""
    monkeypatch.setenv("PATH", str(fake_path))
    master, slave = os.openpty()
    try:
        if answer:
            os.write(master, answer)
        else:
            os.write(master, b"\x04")  # ^D on an empty line: end of input
        with os.fdopen(os.dup(slave), "r") as stdin:
            out = io.StringIO()
            code = run(parse(), stdin=stdin, out=out)
    finally:
        os.close(master)
        os.close(slave)
    return code, out.getvalue()


@pytest.mark.parametrize("answer", [b"n\n", b"\n", b"nope\n", b""])
def test_anything_but_yes_on_a_terminal_cancels(answer: bytes, fake_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _answer_on_a_terminal(answer, fake_path, monkeypatch)
    assert code == 1
    assert "Proceed with desktop dependency installation? [y/N] " in out
    assert "cancelled" in out.lower()
    assert calls(fake_path) == []


def test_yes_on_a_terminal_installs(fake_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _answer_on_a_terminal(b"YES\n", fake_path, monkeypatch)
    assert [c.split()[0] for c in calls(fake_path)] == ["update", "install"]
    assert code == 1, "the fake manager provides nothing, so dependencies are still missing"
    assert "still missing: Xvfb, xkbcomp, openbox, xdg-open" in out


@as_root
def test_yes_runs_steps_streams_output_and_reports_what_is_missing(fake_path: Path) -> None:
    result = run_cli("--yes", path=fake_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert calls(fake_path) == [
        "update DEBIAN_FRONTEND=unset",
        "install -y --no-install-recommends xvfb x11-xkb-utils openbox dbus-x11 at-spi2-core pulseaudio "
        "pulseaudio-utils iproute2 nftables xdg-utils fonts-dejavu-core DEBIAN_FRONTEND=noninteractive",
    ]
    step1 = out.index("[1/2] apt-get update\n")
    step2 = out.index("[2/2] DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends xvfb")
    assert step1 < out.index("fake apt-get: update") < out.index("[1/2] done in ") < step2
    assert step2 < out.index("fake apt-get: install") < out.index("[2/2] done in ")
    assert "still missing: Xvfb, xkbcomp, openbox, xdg-open" in out
    assert "sandbox-desktop install desktop --yes" in out


def test_yes_succeeds_when_the_packages_provide_everything(fake_path: Path) -> None:
    if not has_fonts():
        pytest.skip("this machine has no fonts; the re-check would rightly report them missing")
    result = run_cli("--yes", path=fake_path, extra_env={"PROVIDE": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("Desktop dependencies installed.")


@as_root
def test_a_failing_step_stops_the_install(fake_path: Path) -> None:
    result = run_cli("-y", path=fake_path, extra_env={"FAIL_UPDATE": "1"})
    assert result.returncode == 100
    assert "E: could not lock" in result.stdout, "stderr of the manager is streamed too"
    assert "[1/2] failed with exit code 100" in result.stdout
    assert [c.split()[0] for c in calls(fake_path)] == ["update"], "install must not run after a failure"


def test_no_package_manager_found(tmp_path: Path) -> None:
    result = run_cli("--yes", path=tmp_path)
    assert result.returncode == 1
    assert "No supported package manager found" in result.stderr
    assert "apt-get, dnf and apk" in result.stderr


def test_requested_manager_must_exist_to_install(fake_path: Path) -> None:
    result = run_cli("--yes", "--package-manager", "dnf", path=fake_path)
    assert result.returncode == 1
    assert "dnf is not on PATH" in result.stderr
    assert calls(fake_path) == []
