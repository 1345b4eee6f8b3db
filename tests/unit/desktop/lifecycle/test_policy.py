"""desktop/lifecycle/policy.py: what a server's `--desktop-policy` gives a desktop and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.core.errors import DomainError
from desktop.lifecycle.policy import DesktopPolicy, PolicyRefused, Timer
from desktop.sandbox.limits import Limits
from desktop.sandbox.netrules import EgressMode, NetworkRules

POLICY = DesktopPolicy.parse({
    "tags": {"tenant": "acme"}, "maxTtlSeconds": 3600, "maxAutoPauseSeconds": 600,
    "network": {"egress": "none"}, "limits": {"memoryMb": 1024, "pids": 256},
})


def field_of(error: DomainError) -> str:
    """The request field a domain error names (its `errors` member)."""
    return str(error.extensions["errors"][0]["field"])


def refused_field(error: pytest.ExceptionInfo[PolicyRefused]) -> str:
    return field_of(error.value)


def test_nothing_imposed_leaves_every_request_as_it_is() -> None:
    policy = DesktopPolicy()
    assert not policy.imposes
    assert policy.tags_of({"a": "b"}) == {"a": "b"}
    assert policy.timer(Timer.TTL, None) is None and policy.timer(Timer.TTL, 10**6) == 10**6
    assert policy.network_of(None) is None and policy.limits_of(None) is None


def test_tags_are_added_and_may_be_repeated_not_changed() -> None:
    assert POLICY.tags_of({"task": "t1"}) == {"task": "t1", "tenant": "acme"}
    assert POLICY.tags_of({"tenant": "acme"}) == {"tenant": "acme"}
    with pytest.raises(PolicyRefused) as error:
        POLICY.tags_of({"tenant": "other"})
    assert refused_field(error) == "tags.tenant" and "tenant='acme'" in str(error.value)


def test_a_timer_is_capped_and_set_where_left_out() -> None:
    assert POLICY.timer(Timer.TTL, None) == 3600 and POLICY.timer(Timer.TTL, 60) == 60
    assert POLICY.timer(Timer.IDLE_TIMEOUT, None) is None  # not capped
    with pytest.raises(PolicyRefused) as error:
        POLICY.timer(Timer.AUTO_PAUSE, 601)
    assert refused_field(error) == "autoPauseSeconds" and "at most 600" in str(error.value)


def test_the_network_rules_are_the_policys() -> None:
    assert POLICY.network_of(None) == NetworkRules(EgressMode.NONE)
    assert POLICY.network_of(NetworkRules(EgressMode.NONE)) == NetworkRules(EgressMode.NONE)
    with pytest.raises(PolicyRefused) as error:
        POLICY.network_of(NetworkRules())
    assert refused_field(error) == "network"


def test_limits_are_capped_one_by_one() -> None:
    assert POLICY.limits_of(None) == Limits(memory_mb=1024, pids=256)
    assert POLICY.limits_of(Limits(memory_mb=512, cpu=0.5)) == Limits(memory_mb=512, pids=256, cpu=0.5)
    with pytest.raises(PolicyRefused) as error:
        POLICY.limits_of(Limits(pids=257))
    assert refused_field(error) == "limits.pids"


@pytest.mark.parametrize(("data", "key"), [
    ({"maxTTLSeconds": 5}, "maxTTLSeconds"),  # a typo is an unknown key, not a policy that imposes nothing
    ({"maxTtlSeconds": 0}, "maxTtlSeconds"),
    ({"maxAutoDeleteSeconds": True}, "maxAutoDeleteSeconds"),
    ({"tags": {"a": 1}}, "tags"),
    ({"network": {"egress": "some"}}, "network.egress"),
    ({"network": "none"}, "network"),
    ({"limits": {"memoryMb": 1}}, "limits.memoryMb"),
    ([], "policy"),
])
def test_a_mistake_in_the_file_names_its_key(data: Any, key: str) -> None:
    with pytest.raises(DomainError) as error:
        DesktopPolicy.parse(data)
    assert field_of(error.value) == key
