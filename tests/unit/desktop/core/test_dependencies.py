"""Dependency detection against real directories: fake executables on a temp PATH, temp font trees."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from desktop.core.dependencies import (
    DEPENDENCIES,
    INSTALL_COMMAND,
    Dependency,
    DependencyChecker,
    check_dependencies,
    has_fonts,
    which,
)

REQUIRED_BINARIES = ("Xvfb", "xkbcomp", "openbox", "xdg-open")


def make_exe(directory: Path, name: str, executable: bool = True) -> Path:
    """A tiny shell script called `name`, with or without the execute bits."""
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    mode = 0o755 if executable else 0o644
    path.chmod(mode)
    return path


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    return path


@pytest.fixture
def fontdir(tmp_path: Path) -> Path:
    """A font root holding one TrueType file in a nested directory, as distributions lay them out."""
    root = tmp_path / "fonts"
    (root / "truetype" / "dejavu").mkdir(parents=True)
    (root / "truetype" / "dejavu" / "DejaVuSans.ttf").write_bytes(b"\x00\x01\x00\x00")
    return root


def test_which_finds_only_executable_regular_files(bindir: Path, tmp_path: Path) -> None:
    exe = make_exe(bindir, "openbox")
    make_exe(bindir, "Xvfb", executable=False)
    (bindir / "xkbcomp").mkdir()
    path = f"{tmp_path / 'nothing-here'}{os.pathsep}{bindir}"
    assert which("openbox", path) == str(exe)
    assert which("Xvfb", path) is None, "a file without the exec bit cannot be run"
    assert which("xkbcomp", path) is None, "a directory is not an executable"
    assert which("xdg-open", path) is None


def test_which_skips_empty_path_entries(bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_exe(bindir, "Xvfb")
    monkeypatch.chdir(bindir)
    assert which("Xvfb", f"{os.pathsep}/nonexistent") is None, "an empty entry must not mean cwd"


def test_which_defaults_to_environment_path(bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = make_exe(bindir, "openbox")
    monkeypatch.setenv("PATH", str(bindir))
    assert which("openbox") == str(exe)
    monkeypatch.setenv("PATH", "")
    assert which("openbox") is None


def test_everything_present(bindir: Path, fontdir: Path) -> None:
    for name in (*REQUIRED_BINARIES, "dbus-daemon", "pulseaudio", "parec", "ip", "nft"):
        make_exe(bindir, name)
    report = check_dependencies(str(bindir), font_dirs=[str(fontdir)])
    assert report.missing == ()
    assert report.missing_optional == ()
    assert report.ok
    assert report.install_command is None


def test_missing_binaries_in_fixed_order(bindir: Path, fontdir: Path) -> None:
    make_exe(bindir, "openbox")
    make_exe(bindir, "xkbcomp", executable=False)
    report = check_dependencies(str(bindir), font_dirs=[str(fontdir)])
    assert report.missing == ("Xvfb", "xkbcomp", "xdg-open")
    assert report.missing_optional == ("dbus-daemon", "pulseaudio", "parec", "ip", "nft")
    assert not report.ok
    assert report.install_command == INSTALL_COMMAND


def test_optional_dependency_never_makes_the_report_fail(bindir: Path, fontdir: Path) -> None:
    for name in REQUIRED_BINARIES:
        make_exe(bindir, name)
    report = check_dependencies(str(bindir), font_dirs=[str(fontdir)])
    assert report.ok
    assert report.missing_optional == ("dbus-daemon", "pulseaudio", "parec", "ip", "nft")


def test_message_names_missing_and_the_installer(bindir: Path, tmp_path: Path) -> None:
    make_exe(bindir, "xkbcomp")
    make_exe(bindir, "xdg-open")
    report = check_dependencies(str(bindir), font_dirs=[str(tmp_path / "no-fonts")])
    assert report.missing == ("Xvfb", "openbox", "fonts")
    assert report.message() == (
        "Desktop dependencies are not installed: Xvfb, openbox, fonts. Run "
        "`sandbox-desktop install desktop --yes` to install them, or install the required tools manually."
    )


def test_fonts_detection(tmp_path: Path) -> None:
    root = tmp_path / "fonts"
    (root / "X11" / "misc").mkdir(parents=True)
    (root / "X11" / "misc" / "6x13.pcf.gz").write_bytes(b"bitmap")
    (root / "X11" / "misc" / "fonts.dir").write_text("0\n")
    assert not has_fonts([str(root)]), "bitmap fonts are not usable by fontconfig/Xft apps"
    assert not has_fonts([str(tmp_path / "missing-root")])

    (root / "opentype").mkdir()
    (root / "opentype" / "Noto.OTF").write_bytes(b"OTTO")
    assert has_fonts([str(tmp_path / "missing-root"), str(root)]), "later roots and any case count"


def test_fonts_through_symlinks(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "Font.ttc").write_bytes(b"ttcf")
    root = tmp_path / "fonts"
    root.mkdir()
    (root / "linked-dir").symlink_to(store, target_is_directory=True)
    assert has_fonts([str(root)])

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Gone.ttf").symlink_to(tmp_path / "does-not-exist.ttf")
    assert not has_fonts([str(broken)]), "a dangling symlink is not a font"


def test_fonts_in_report(bindir: Path, fontdir: Path, tmp_path: Path) -> None:
    for name in REQUIRED_BINARIES:
        make_exe(bindir, name)
    assert check_dependencies(str(bindir), font_dirs=[str(tmp_path / "empty")]).missing == ("fonts",)
    assert check_dependencies(str(bindir), font_dirs=[str(fontdir)]).missing == ()


def test_home_font_dir_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fonts = tmp_path / ".local" / "share" / "fonts"
    fonts.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not has_fonts(["~/.local/share/fonts"])
    (fonts / "Mine.ttf").write_bytes(b"\x00\x01\x00\x00")
    assert has_fonts(["~/.local/share/fonts"])


def test_python_modules_of_the_package_are_importable() -> None:
    # The real table: Xlib, mss and av come with the package and must be found by this interpreter.
    python = [dep for dep in DEPENDENCIES if dep.kind == "python"]
    assert [dep.name for dep in python] == ["python:Xlib", "python:mss", "python:av", "python:dbus_fast"]
    report = check_dependencies("", font_dirs=[], dependencies=python)
    assert report.missing == ()


def test_missing_python_module_gets_a_pip_hint(bindir: Path, tmp_path: Path) -> None:
    deps = [
        Dependency("Xvfb", "binary", "Xvfb", "X server"),
        Dependency("python:no_such_mod_xyz", "python", "no_such_mod_xyz", "test",
                   packages={"pip": ("no-such-dist",)}),
        Dependency("python:mss", "python", "mss", "screenshots", packages={"pip": ("mss",)}),
    ]
    report = check_dependencies(str(bindir), font_dirs=[], dependencies=deps)
    assert report.missing == ("Xvfb", "python:no_such_mod_xyz")
    assert report.pip_packages == ("no-such-dist",)
    assert report.install_command == INSTALL_COMMAND, "system packages first: the installer fixes most"
    message = report.message()
    assert "to install the system packages" in message
    assert "-m pip install no-such-dist`" in message

    make_exe(bindir, "Xvfb")
    only_python = check_dependencies(str(bindir), font_dirs=[], dependencies=deps)
    assert only_python.missing == ("python:no_such_mod_xyz",)
    assert only_python.install_command is not None
    assert only_python.install_command.endswith("-m pip install no-such-dist")
    assert INSTALL_COMMAND not in only_python.message()


def test_reported_names_keep_the_documented_order() -> None:
    required = [dep.name for dep in DEPENDENCIES if dep.required]
    assert required == ["Xvfb", "xkbcomp", "openbox", "xdg-open", "fonts",
                        "python:Xlib", "python:mss", "python:av"]
    assert [dep.name for dep in DEPENDENCIES if not dep.required] == ["dbus-daemon", "at-spi-bus-launcher",
                                                                       "pulseaudio", "parec", "ip", "nft",
                                                                       "python:dbus_fast"]


def test_checker_caches_for_ttl_then_notices_changes(bindir: Path, fontdir: Path) -> None:
    for name in REQUIRED_BINARIES:
        make_exe(bindir, name)
    ttl = 0.3
    checker = DependencyChecker(ttl=ttl, path=str(bindir), font_dirs=[str(fontdir)])
    assert checker.report().missing == ()

    (bindir / "openbox").unlink()
    assert checker.report().missing == (), "within the TTL the cached report is served"
    started = time.monotonic()
    deadline = started + 5.0
    while checker.report().missing == () and time.monotonic() < deadline:
        time.sleep(0.02)
    noticed_after = time.monotonic() - started
    assert checker.report().missing == ("openbox",)
    assert noticed_after <= ttl + 1.0, "noticed soon after the TTL, not later"

    make_exe(bindir, "openbox")
    assert checker.report().missing == ("openbox",), "still cached"
    assert checker.report(fresh=True).missing == (), "fresh=True rescans at once"


def test_checker_exec_bit_change_is_noticed_on_fresh(bindir: Path, fontdir: Path) -> None:
    for name in REQUIRED_BINARIES:
        make_exe(bindir, name)
    checker = DependencyChecker(ttl=60.0, path=str(bindir), font_dirs=[str(fontdir)])
    assert checker.report().ok
    (bindir / "Xvfb").chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert checker.report().ok
    assert checker.report(fresh=True).missing == ("Xvfb",)


def test_checker_ttl_zero_always_rescans(bindir: Path, fontdir: Path) -> None:
    checker = DependencyChecker(ttl=0, path=str(bindir), font_dirs=[str(fontdir)])
    assert "openbox" in checker.report().missing
    make_exe(bindir, "openbox")
    assert "openbox" not in checker.report().missing


def test_checker_follows_environment_path(bindir: Path, fontdir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    checker = DependencyChecker(ttl=0, font_dirs=[str(fontdir)])
    monkeypatch.setenv("PATH", str(bindir))
    assert checker.report().missing[:1] == ("Xvfb",)
    make_exe(bindir, "Xvfb")
    assert "Xvfb" not in checker.report().missing


def test_checker_rejects_negative_ttl() -> None:
    with pytest.raises(ValueError, match="ttl"):
        DependencyChecker(ttl=-1)
