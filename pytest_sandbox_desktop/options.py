"""The plugin's closed sets of option values. Standard library only: pytest imports the plugin in every
session of an environment where it is installed, so what it imports before a test asks for a desktop
must cost nothing (the client and its wire models load with the first `desktop` fixture)."""

from __future__ import annotations

import argparse
import enum


class RecordMode(enum.StrEnum):
    """`--desktop-record`: which tests keep their recording."""

    ON = "on"
    OFF = "off"
    RETAIN_ON_FAILURE = "retain-on-failure"


class Isolation(enum.StrEnum):
    """`--desktop-isolation`: how a test gets a clean desktop. `reset` (POST /v1/desktops/{id}/reset, about
    20 ms) is several times cheaper than `fresh` (create, then delete: about 190 ms); bench/pytest_plugin.py."""

    RESET = "reset"
    FRESH = "fresh"


class ServerMode(enum.StrEnum):
    """`--desktop-server`: under xdist, a server per worker (default) or one for all workers. One server
    saves a server start per worker but runs every desktop's capture, encoding and HTTP in one Python
    process; a server per worker spreads them over processes, as the workers themselves are, so it grows
    with the cores. On 2 cores neither was steadily faster (bench/pytest_plugin.py, docs/pytest.md).
    Without xdist (or with `--desktop-url`) there is one server either way."""

    PER_WORKER = "per-worker"
    SHARED = "shared"


def parse_size(text: str) -> tuple[int, int]:
    """`--desktop-size`: `WIDTHxHEIGHT`."""
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1280x800, got {text!r}")
    return int(width), int(height)
