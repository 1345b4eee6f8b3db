"""The supervisor's tables: every supervised child has a way back after a crash and a place in the stop order."""

from __future__ import annotations

from desktop.lifecycle.supervisor import RESTART, STOP_ORDER
from sandbox_desktop_wire.enums import SupervisedChild


def test_every_child_has_a_restart_and_stops_once() -> None:
    assert set(RESTART) == set(SupervisedChild)
    assert sorted(STOP_ORDER) == sorted(SupervisedChild)
    assert STOP_ORDER[-2:] == (SupervisedChild.XVFB, SupervisedChild.DBUS)  # the X server and the bus last
