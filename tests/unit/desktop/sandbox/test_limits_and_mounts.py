"""desktop/sandbox/limits.py's checks of a caller's limits, and cgroupfs.py's reading of mountinfo and
/proc/self/cgroup on the three kinds of machines (pure v2, hybrid, a container's bind mount): no root needed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from desktop.core.errors import InvalidAction
from desktop.sandbox.cgroupfs import known_controllers, own_dir, parse_mounts, parse_own
from desktop.sandbox.limits import Limits

CONTROLLERS = frozenset({"cpu", "cpuacct", "memory", "pids", "freezer", "cpuset"})


def test_limits_from_the_wire() -> None:
    assert Limits.parse(None) == Limits() == Limits.parse({})
    limits = Limits.parse({"memoryMb": 2048, "pids": 256, "cpu": 1, "other": "ignored", "memory_mb": 1})
    assert limits == Limits(memory_mb=2048, pids=256, cpu=1.0)
    assert limits.memory_bytes == 2048 << 20 and limits.cpu_quota_us == 100_000
    assert limits.wire() == {"memoryMb": 2048, "pids": 256, "cpu": 1.0}
    assert Limits.parse({"memoryMb": None, "cpu": 0.5}).cpu_quota_us == 50_000


@pytest.mark.parametrize(("data", "field"), [
    ({"memoryMb": 32}, "limits.memoryMb"),
    ({"memoryMb": 1 << 40}, "limits.memoryMb"),
    ({"memoryMb": 512.0}, "limits.memoryMb"),
    ({"memoryMb": True}, "limits.memoryMb"),
    ({"pids": 4}, "limits.pids"),
    ({"pids": "100"}, "limits.pids"),
    ({"cpu": 0}, "limits.cpu"),
    ({"cpu": -1}, "limits.cpu"),
    ({"cpu": float("nan")}, "limits.cpu"),
    ({"cpu": len(os.sched_getaffinity(0)) + 1}, "limits.cpu"),
])
def test_a_callers_mistake_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidAction) as refused:
        Limits.parse(data)
    assert refused.value.extensions["errors"][0]["field"] == field
    assert field in refused.value.message


HYBRID = """\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
"""
HYBRID_OWN = "9:name=systemd:/\n4:memory:/ci/job 1\n2:cpuacct:/\n1:cpu:/\n8:pids:/\n0::/\n"


def test_a_hybrid_machine() -> None:
    mounts = parse_mounts(HYBRID, CONTROLLERS)
    assert [(m.version, str(m.path), sorted(m.controllers)) for m in mounts] == [
        (1, "/sys/fs/cgroup/cpu", ["cpu"]), (1, "/sys/fs/cgroup/cpuacct", ["cpuacct"]),
        (1, "/sys/fs/cgroup/memory", ["memory"]), (1, "/sys/fs/cgroup/pids", ["pids"]),
        (1, "/sys/fs/cgroup/systemd", ["name=systemd"]), (2, "/sys/fs/cgroup/unified", [])]
    own = parse_own(HYBRID_OWN)
    assert own_dir(mounts[2], own) == Path("/sys/fs/cgroup/memory/ci/job 1")
    assert own_dir(mounts[0], own) == Path("/sys/fs/cgroup/cpu")
    assert own_dir(mounts[5], own) == Path("/sys/fs/cgroup/unified")


def test_a_pure_v2_machine_and_a_co_mounted_v1_pair() -> None:
    mounts = parse_mounts("30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
                          "31 23 0:27 / /mnt/cg\\040v1 rw - cgroup cgroup rw,cpu,cpuacct\n", CONTROLLERS)
    assert mounts[0].version == 2 and mounts[1].path == Path("/mnt/cg v1")
    assert mounts[1].controllers == {"cpu", "cpuacct"}
    own = parse_own("3:cpu,cpuacct:/a\n0::/user.slice/session-1.scope\n")
    assert own_dir(mounts[0], own) == Path("/sys/fs/cgroup/user.slice/session-1.scope")
    assert own_dir(mounts[1], own) == Path("/mnt/cg v1/a")


def test_a_containers_mount_of_a_subtree() -> None:
    mounts = parse_mounts("500 400 0:26 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n", CONTROLLERS)
    assert own_dir(mounts[0], parse_own("0::/kubepods/pod1/c1\n")) == Path("/sys/fs/cgroup/c1")
    assert own_dir(mounts[0], parse_own("0::/kubepods/pod2\n")) is None  # outside what is mounted
    assert own_dir(mounts[0], parse_own("1:memory:/x\n")) is None  # no v2 line at all


def test_the_kernels_controller_names() -> None:
    assert known_controllers("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t3\t1\nmemory\t4\t9\t1\n") == {
        "cpu", "memory"}
