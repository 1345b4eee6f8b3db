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
    """`--desktop-server`: under xdist, one server for all workers (`shared`), a server per worker
    (`per-worker`), or `auto` (default): shared up to `SHARED_UP_TO` workers, a server each beyond.

    A shared server is started by the controller while the workers start, and saves a server start (about
    a second of CPU) and a server's memory per worker; it runs every desktop's capture, encoding and HTTP
    in one Python process, which keeps up with four workers (at four on 2 cores it used about half a core).
    A server per worker spreads that work over processes, as the workers themselves are, so it grows with
    the cores. Without xdist (or with `--desktop-url`) there is one server either way. Figures:
    bench/pytest_plugin.py, docs/pytest.md."""

    AUTO = "auto"
    PER_WORKER = "per-worker"
    SHARED = "shared"

    def resolve(self, workers: int) -> ServerMode:
        """What `auto` means for a run of `workers` xdist workers; the other modes as they are."""
        if self is not ServerMode.AUTO:
            return self
        return ServerMode.SHARED if workers <= SHARED_UP_TO else ServerMode.PER_WORKER


SHARED_UP_TO = 4
"""`--desktop-server=auto` shares one server among at most this many workers (ServerMode)."""


def parse_size(text: str) -> tuple[int, int]:
    """`--desktop-size`: `WIDTHxHEIGHT`."""
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1280x800, got {text!r}")
    return int(width), int(height)
