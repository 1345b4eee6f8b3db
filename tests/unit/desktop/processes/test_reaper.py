"""desktop/processes/reaper.py's one pass over /proc, on real processes: marked ones, their parents, bus-started
ones."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from desktop.processes import reaper


@pytest.fixture
def marker() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
def tree(marker: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A marked shell with a marked child (`sleep`), the child's pid read from the shell."""
    env = {**os.environ, "SANDBOX_DESKTOP_INSTANCE": marker, "DBUS_STARTER_BUS_TYPE": "accessibility"}
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait; exec sleep 30"], env=env, stdout=subprocess.PIPE)
    assert shell.stdout is not None
    child = int(shell.stdout.readline())
    yield shell, child
    reaper.kill_pids([child, shell.pid], 0.5)
    shell.wait()


def test_scan_finds_the_marked_processes_their_descendants_and_bus_type(
        marker: str, tree: tuple[subprocess.Popen[bytes], int]) -> None:
    shell, child = tree
    table = reaper.scan(marker)
    assert table.marked == {shell.pid, child}
    assert table.descendants({shell.pid}) == {child}
    assert table.descendants({os.getpid()}) >= {shell.pid, child}
    assert table.bus_activated("accessibility") == {shell.pid, child}
    assert table.bus_activated("session") == set()
    assert reaper.marked_pids(marker) == sorted([shell.pid, child])


def test_a_marker_that_only_begins_another_is_not_it(marker: str, tree: tuple[subprocess.Popen[bytes], int]) -> None:
    assert reaper.scan(marker[:-1]).marked == set()
    assert reaper.marked_pids("") == []


def test_killed_processes_leave_the_table(marker: str, tree: tuple[subprocess.Popen[bytes], int]) -> None:
    shell, child = tree
    reaper.kill_pids([child], 0.5)
    deadline = time.monotonic() + 5
    while child in reaper.scan(marker).marked and time.monotonic() < deadline:
        time.sleep(0.02)  # the shell reaps it; a zombie still has its environ readable for a moment
    assert not reaper.alive(child)
    assert shell.pid in reaper.scan(marker).marked
