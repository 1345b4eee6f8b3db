"""`sandbox-desktop install osworld`: its plan, its argument checks, and a run against a stand-in apt-get on a temp
PATH (nothing is installed; the desktops' Python itself is made for real by tests/api/osworld/test_vm_image.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.lifecycle.osworld_install import APPS, NOT_ON_DEBIAN
from tests.support.paths import REPO
from tests.unit.desktop.lifecycle.test_installer import as_root, calls, fake_path

__all__ = ["fake_path"]  # the fixture, shared with `install desktop`'s tests


def install(*argv: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DEBIAN_FRONTEND"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "api.cli.main", "install", "osworld", *argv], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


@as_root
def test_the_plan_lists_every_domains_app_what_debian_lacks_and_the_commands(tmp_path: Path) -> None:
    done = install("--print-only", "--python-dir", str(tmp_path / "py"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for app in APPS:
        assert f"  - {app.name}: {' '.join(app.debian)}" in out
    for thing, _ in NOT_ON_DEBIAN:
        assert thing in out
    assert "Visual Studio Code" in out and "Google Chrome" in out
    commands = out[out.index("Commands:\n"):].splitlines()[1:]
    assert commands[0].strip() == "apt-get update"
    packages = commands[1].split("--no-install-recommends ")[1].split()
    assert {"chromium", "socat", "libreoffice-calc", "gimp", "vlc", "thunderbird", "gnome-terminal", "nautilus",
            "fonts-liberation2", "python3-venv", "python3-tk"} <= set(packages)
    assert commands[2].strip() == f"/usr/bin/python3 -m venv --system-site-packages {tmp_path / 'py'}"
    assert commands[3].strip().startswith(f"{tmp_path / 'py' / 'bin' / 'pip'} install")
    assert "pyautogui" in commands[3] and not (tmp_path / "py").exists()  # printed, not done


@as_root
def test_only_picks_apps_and_no_apt_leaves_the_system_alone() -> None:
    out = install("--print-only", "--only", "gimp,vlc").stdout
    assert "  - gimp: gimp" in out and "  - vlc: vlc" in out and "libreoffice" not in out
    assert "apt-get install -y --no-install-recommends gimp vlc\n" in out and "venv" not in out
    python_only = install("--print-only", "--only", "python", "--no-apt").stdout
    assert "apt-get" not in python_only and "-m venv --system-site-packages" in python_only


@pytest.mark.parametrize(("argv", "code", "message"), [
    (("--only", "gimp,vs_code"), 2, "unknown app vs_code; known: chromium, socat, libreoffice"),
    (("--only", ","), 2, "unknown app (none given)"),
    (("--package-manager", "dnf", "--print-only"), 1, "Debian and Ubuntu (apt) only, not dnf"),
    (("--package-manager", "zypper"), 2, "invalid choice: 'zypper'"),
])
def test_arguments_are_checked(argv: tuple[str, ...], code: int, message: str) -> None:
    done = install(*argv)
    assert done.returncode == code and message in done.stderr, done.stderr


@as_root
def test_yes_runs_the_apt_steps(fake_path: Path) -> None:
    done = install("--yes", "--only", "gimp,socat", path=str(fake_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls(fake_path) == ["update DEBIAN_FRONTEND=unset",
                                "install -y --no-install-recommends gimp socat DEBIAN_FRONTEND=noninteractive"]
    assert "[2/2] DEBIAN_FRONTEND=noninteractive apt-get install" in done.stdout
    assert done.stdout.endswith("OSWorld apps installed.\n")


def test_without_yes_and_no_terminal_nothing_runs(fake_path: Path) -> None:
    done = install("--only", "gimp", path=str(fake_path))
    assert done.returncode == 1 and "cancelled" in done.stdout
    assert calls(fake_path) == []
