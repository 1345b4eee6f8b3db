"""The one reconnect policy of the service's X connections (desktop/x11/reconnect.py), without an X server."""

from __future__ import annotations

import asyncio

import pytest

from desktop.core.errors import DesktopFailed
from desktop.x11.reconnect import ReconnectOnce, not_answering


class Lost(Exception):
    pass


class Theirs(Lost):
    """Lost's subclass that is the caller's error, not the connection's."""


class Attempts:
    """An attempt that raises the given errors in turn, then answers; what the policy did to it."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[object, ...]] = []
        self.events: list[str] = []

    def __call__(self, *args: object) -> str:
        self.calls.append(args)
        if self.errors:
            raise self.errors.pop(0)
        return "answer"

    async def run_async(self, *args: object) -> str:
        return self(*args)

    def policy(self) -> ReconnectOnce:
        return ReconnectOnce((Lost,), not_answering(":9"), drop=lambda: self.events.append("drop"), kept=(Theirs,),
                             retrying=lambda exc: self.events.append(f"retrying after {exc}"))


def run(attempts: Attempts, asynchronous: bool) -> str:
    policy = attempts.policy()
    if asynchronous:
        return asyncio.run(policy.run_async(attempts.run_async, 1, "two"))
    return policy.run(attempts, 1, "two")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_call_that_succeeds_runs_once(asynchronous: bool) -> None:
    attempts = Attempts()
    assert run(attempts, asynchronous) == "answer"
    assert attempts.calls == [(1, "two")] and attempts.events == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_lost_connection_is_dropped_and_the_call_tried_once_more(asynchronous: bool) -> None:
    attempts = Attempts(Lost("gone"))
    assert run(attempts, asynchronous) == "answer"
    assert attempts.calls == [(1, "two")] * 2
    assert attempts.events == ["drop", "retrying after gone"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_lost_twice_drops_again_and_answers_the_owners_error(asynchronous: bool) -> None:
    attempts = Attempts(Lost("gone"), Lost("still gone"))
    with pytest.raises(DesktopFailed) as raised:
        run(attempts, asynchronous)
    assert raised.value.retry_after == 1 and "X display :9 is not answering (still gone)" in raised.value.message
    assert isinstance(raised.value.__cause__, Lost)
    assert attempts.events == ["drop", "retrying after gone", "drop"]


@pytest.mark.parametrize("error", [Theirs("no such window"), ValueError("a bug")])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_callers_errors_and_other_errors_are_raised_as_they_are(error: Exception, asynchronous: bool) -> None:
    attempts = Attempts(error)
    with pytest.raises(type(error)):
        run(attempts, asynchronous)
    assert len(attempts.calls) == 1 and attempts.events == []
