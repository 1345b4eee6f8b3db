"""The uids desktops run as (desktop/sandbox/users.py): `--sandbox-uids FIRST-LAST`, parsed, checked against the
server's user namespace, and allocated with real lock files."""

from __future__ import annotations

import argparse
import os

import pytest

from api.cli.main import build_parser
from desktop.sandbox import users
from desktop.sandbox.users import UidRange

POD_MAP = "         0 1800000000      65536\n"
"""/proc/self/uid_map of a Kubernetes pod with `hostUsers: false`."""
HOST_MAP = "         0          0 4294967295\n"


def test_the_default_range_is_above_the_accounts_and_subordinate_ids() -> None:
    assert (UidRange().first, UidRange().last) == (3_000_000, 3_999_999)
    assert str(UidRange.parse(" 10000-65533 ")) == "10000-65533"
    assert UidRange.parse("10000-65533").count == 55534


@pytest.mark.parametrize("text", ["", "10000", "0-100", "100-100", "200-100", "-5-10", "a-b", "10000-4294967295",
                                  "1e4-2e4"])
def test_a_range_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 10000-65533"):
        UidRange.parse(text)


def test_the_server_takes_the_range_from_its_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(users.UIDS_ENV, raising=False)
    assert build_parser(["server"]).parse_args(["server"]).sandbox_uids is None  # the default range
    parsed = build_parser(["server"]).parse_args(["server", "--sandbox-uids", "10000-65533"])
    assert parsed.sandbox_uids == UidRange(10000, 55534)
    monkeypatch.setenv(users.UIDS_ENV, "20000-29999")
    assert build_parser(["server"]).parse_args(["server"]).sandbox_uids == UidRange(20000, 10000)
    assert UidRange.from_env() == UidRange(20000, 10000)


def test_a_bad_range_stops_the_server_before_it_starts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser(["server"]).parse_args(["server", "--sandbox-uids", "0-65535"])
    assert exited.value.code == 2
    assert "--sandbox-uids" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentTypeError):
        from api.cli.main import sandbox_uids
        sandbox_uids("65533-10000")


def test_a_range_a_pods_user_namespace_does_not_map_is_named() -> None:
    assert UidRange().unmapped(POD_MAP) == "uid 3000000 is not mapped"
    assert UidRange(10000, 55534).unmapped(POD_MAP) is None
    assert UidRange(60000, 10000).unmapped(POD_MAP) == "uid 65536 is not mapped"
    assert UidRange().unmapped(HOST_MAP) is None
    # Two extents that join cover the range; a gap between them does not.
    assert UidRange(10, 20).unmapped("0 100 15\n15 500 100\n") is None
    assert UidRange(10, 20).unmapped("0 100 15\n16 500 100\n") == "uid 15 is not mapped"


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid lock files live in /run/sandbox-desktop")
def test_allocation_stays_within_the_range_and_never_hands_out_a_held_uid() -> None:
    small = UidRange(3_999_990, 3)
    held = [users.allocate(small) for _ in range(3)]
    try:
        assert sorted(u.uid for u in held) == [3_999_990, 3_999_991, 3_999_992]
        assert all(u.gid == u.uid and (users.LOCKS / str(u.uid)).exists() for u in held)
        with pytest.raises(OSError, match="no free sandbox uid in 3999990-3999992 after 3 tries"):
            users.allocate(small)
        held.pop(0).release()
        again = users.allocate(small)
        held.append(again)
        assert 3_999_990 <= again.uid <= 3_999_992
    finally:
        for user in held:
            user.release()


def test_this_process_maps_the_default_range_or_says_why() -> None:
    """On this machine's namespace every id is mapped; in a user namespace that maps fewer, the reason names the
    flag to set."""
    reason = UidRange().unmapped()
    if reason is not None:
        assert "--sandbox-uids" in reason and "uid_map" in reason
