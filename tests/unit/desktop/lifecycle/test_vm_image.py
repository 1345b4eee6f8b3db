"""The commands a desktop dressed as OSWorld's VM image finds first on its PATH (desktop/lifecycle/vm_image.py),
written for a PATH of stand-in programs and run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from desktop.lifecycle.vm_image import VmImage


def program(folder: Path, name: str) -> Path:
    """An executable that prints its name and arguments."""
    path = folder / name
    path.write_text(f'#!/bin/sh\necho {name} "$@"\n')
    path.chmod(0o755)
    return path


def run(folder: Path, name: str, *args: str) -> str:
    return subprocess.run([str(folder / name), *args], capture_output=True, text=True, check=True).stdout


def test_chrome_vlc_and_python_stand_ins(tmp_path: Path) -> None:
    machine, runtime = tmp_path / "bin", tmp_path / "run"
    machine.mkdir()
    runtime.mkdir()
    program(machine, "chromium")
    program(machine, "vlc")
    image = VmImage(python=tmp_path / "no-venv")
    written = image.write_commands(runtime, str(machine))
    assert set(written) == {"google-chrome", "google-chrome-stable", "vlc", "python", "dconf"}
    commands = image.bin_folder(runtime)
    assert run(commands, "google-chrome", "--remote-debugging-port=1337", "a b") == \
        "chromium --remote-debugging-port=1337 a b\n"
    assert run(commands, "vlc", "x.mp4") == \
        "vlc --extraintf=http --http-port=8080 --http-password=password x.mp4\n"
    assert written["python"] == ("python3",)  # no desktops' Python: the machine's python3, found by name
    # No dconf: pyautogui's click reads the mouse's handedness with `dconf read`; a key reads unset, writes fail.
    assert run(commands, "dconf", "read", "/org/gnome/desktop/peripherals/mouse/left-handed") == ""
    refused = subprocess.run([str(commands / "dconf"), "write", "/a/b", "true"], capture_output=True, text=True)
    assert refused.returncode == 1 and "dconf-cli" in refused.stderr
    path = image.environment("/usr/bin", runtime)["PATH"]
    assert path == f"{commands}:/usr/bin"


def test_what_the_machine_has_is_left_alone(tmp_path: Path) -> None:
    machine, runtime, venv = tmp_path / "bin", tmp_path / "run", tmp_path / "venv"
    for folder in (machine, runtime, venv / "bin"):
        folder.mkdir(parents=True)
    program(machine, "chromium")
    program(machine, "google-chrome")
    program(machine, "dconf")
    for name in ("python", "python3"):
        program(venv / "bin", name)
    image = VmImage(python=venv)
    assert image.write_commands(runtime, str(machine)) == {}  # a real Chrome and dconf; the venv's python; no vlc
    assert image.environment("/usr/bin", runtime)["PATH"] == f"{image.bin_folder(runtime)}:{venv / 'bin'}:/usr/bin"
