"""A desktop's limits and usage through the HTTP API of a real server (docs/sandbox-limits.md): a memory hog run
in the desktop is killed and a fork bomb refused at its `pids` while the desktop and the server stay up and
answer; its CPU is throttled once PATCH gives it a `cpu` limit; its usage is in its resource, its status and
the metrics; pause freezes every process of its cgroup, reset kills every app of it (a daemon that left the
desktop's session and environment too) and delete everything; every mistake in the limits is a 4xx naming its
field. What the kernel did is read from /proc and the cgroup files, never taken from the server's word.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, launch_server, wait_for
from tests.support.desktop_sandbox import PYTHON, assert_refused, command_in, created_desktop, python_in, run_in
from tests.support.pids import cgroup_dir, child_host_pid, frozen, in_namespace_of, pid_alive

PIDS = 24
"""The fork bomb's desktop: the apps' processes and threads, at most (the smallest accepted is 16)."""

MEMORY_HOG = """
    chunks = []
    for _ in range(512):  # 4 GiB at most, should the limit not hold
        chunks.append(bytearray(8 * 1024 * 1024))  # zeroed: every page is touched
    print("still alive with", len(chunks) * 8, "MiB")
    """

FORK_BOMB = """
    import errno, os, sys, time
    read_end, write_end = os.pipe()
    forked, failure = 0, None
    for _ in range(1000):
        try:
            pid = os.fork()
        except OSError as error:
            failure = errno.errorcode[error.errno]
            break
        if pid == 0:  # each child waits until the parent is gone (its pipe then reads end of file)
            os.close(write_end)
            os.read(read_end, 1)
            os._exit(0)
        forked += 1
    print(forked, failure, flush=True)
    time.sleep(float(sys.argv[1]))
    """
"""Forks until refused (bounded), says how far it got and why it stopped, holds its children `argv[1]` s."""

SPIN = """
    import time
    deadline = time.monotonic() + 20
    while time.process_time() < 0.3 and time.monotonic() < deadline:
        pass
    """
"""Uses 0.3 s of CPU (bounded by 20 s of wall time)."""

HOLD_MEMORY = """
import time
held = bytearray(150 * 1024 * 1024)
print("held", flush=True)
time.sleep(30)
"""
"""Holds 150 MiB for 30 s."""

DAEMON = "setsid env -i /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!"
"""An app that leaves the desktop's session, its process group and its environment (what a double-forking
daemon does): its pid in the desktop."""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = launch_server(tmp_path_factory.mktemp("limits"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bounded(api: httpx.Client) -> Iterator[dict[str, Any]]:
    """A desktop of the module with memory and pids limits."""
    with created_desktop(api, limits={"memoryMb": 96, "pids": PIDS}) as desktop:
        if "cgroup" not in desktop["sandbox"]["layers"]:
            pytest.skip(f"no cgroups here: {desktop['sandbox']['missing']}")
        yield desktop


def resource(api: httpx.Client, desktop: dict[str, Any]) -> dict[str, Any]:
    answer = api.get(f"/v1/desktops/{desktop['id']}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def host_pid_of(api: httpx.Client, desktop: dict[str, Any], pid_inside: int) -> int:
    """The host pid of the desktop's process numbered `pid_inside` in its own pid namespace."""
    status = api.get(f"/v1/desktops/{desktop['id']}/status").json()
    found = in_namespace_of(child_host_pid(status, "Xvfb"), pid_inside)
    assert found is not None, f"no process {pid_inside} in desktop {desktop['id']}"
    return found


def start_daemon(api: httpx.Client, desktop: dict[str, Any]) -> int:
    """A daemon started in the desktop (`DAEMON`): its host pid."""
    done = run_in(api, DAEMON, desktop["id"])
    assert done["exitCode"] == 0, done
    return host_pid_of(api, desktop, int(done["stdout"]))


def assert_up(srv: ServerProcess, api: httpx.Client, desktop: dict[str, Any], xvfb: int) -> None:
    """The server answers, and the desktop runs commands and shows its screen with the same X server."""
    assert httpx.get(f"{srv.url}/v1/health", timeout=10).status_code == 200
    assert resource(api, desktop)["state"] == "active"
    assert run_in(api, "echo alive", desktop["id"])["stdout"] == "alive\n"
    assert api.get(f"/v1/desktops/{desktop['id']}/screenshot").headers["content-type"] == "image/png"
    status = api.get(f"/v1/desktops/{desktop['id']}/status").json()
    assert child_host_pid(status, "Xvfb") == xvfb


def test_a_memory_hog_is_killed_and_the_desktop_and_server_stay_up(srv: ServerProcess, api: httpx.Client,
                                                                   bounded: dict[str, Any]) -> None:
    xvfb = child_host_pid(api.get(f"/v1/desktops/{bounded['id']}/status").json(), "Xvfb")
    killed = command_in(api, PYTHON, ["-I", "-S", "-c", textwrap.dedent(MEMORY_HOG)], bounded["id"])
    assert killed.get("exitSignal") == 9 and "still alive" not in killed["stdout"], killed
    assert resource(api, bounded)["usage"]["oomKills"] >= 1
    assert_up(srv, api, bounded, xvfb)


def test_a_fork_bomb_is_refused_at_the_pids_limit(srv: ServerProcess, api: httpx.Client,
                                                  bounded: dict[str, Any]) -> None:
    xvfb = child_host_pid(api.get(f"/v1/desktops/{bounded['id']}/status").json(), "Xvfb")
    processes = f"/v1/desktops/{bounded['id']}/processes"
    bomb_args = ["-I", "-S", "-c", textwrap.dedent(FORK_BOMB), "30"]
    started = api.post(processes, json={"command": PYTHON, "args": bomb_args})
    assert started.status_code == 200, started.text
    bomb = started.json()["id"]
    try:
        said = wait_for(lambda: output(api, f"{processes}/{bomb}/logs"), "the fork bomb's count", timeout=20)
        forked, failure = said.split()
        assert failure == "EAGAIN" and 0 < int(forked) < PIDS, said
        # While its children hold every slot, a command the API is asked to start is refused, not a server fault.
        refused = api.post(f"{processes}/run", json={"command": "true"})
        assert refused.status_code == 409, refused.text
        assert "limits.pids" in refused.json()["detail"]
    finally:
        api.post(f"{processes}/{bomb}/kill", params={"waitMs": 5000})
    wait_for(lambda: api.post(f"{processes}/run", json={"command": "true"}).status_code == 200,
             "the slots given back once the bomb ended")
    assert_up(srv, api, bounded, xvfb)


def output(api: httpx.Client, logs: str) -> str:
    """What a process printed so far."""
    entries = api.get(logs).json()["entries"]
    return "".join(base64.b64decode(e["data"]).decode() for e in entries).strip()


def test_usage_is_in_its_resource_status_and_the_metrics(api: httpx.Client, bounded: dict[str, Any]) -> None:
    python_in(api, SPIN, desktop=bounded["id"])  # CPU time to show
    usage = resource(api, bounded)["usage"]
    assert usage["memoryBytes"] > 0 and usage["cpuSeconds"] >= 0.3 and usage["pids"] > 0, usage
    status = api.get(f"/v1/desktops/{bounded['id']}/status").json()["usage"]
    assert status is not None and status["memoryBytes"] > 0 and status["cpuSeconds"] >= usage["cpuSeconds"], status
    assert status["pids"] > 0 and status["oomKills"] is not None, status
    figures = usage_metrics(api, bounded["id"])
    assert set(figures) == {"sandbox_desktop_memory_bytes", "sandbox_desktop_cpu_seconds_total",
                            "sandbox_desktop_pids", "sandbox_desktop_oom_kills_total"}, figures
    assert figures["sandbox_desktop_memory_bytes"] > 0 and figures["sandbox_desktop_pids"] > 0, figures
    assert figures["sandbox_desktop_cpu_seconds_total"] >= usage["cpuSeconds"], figures


def test_a_deleted_desktop_has_no_usage(api: httpx.Client) -> None:
    """Not measurable is null and absent from the metrics, never a 0."""
    with created_desktop(api) as desktop:
        if "cgroup" not in desktop["sandbox"]["layers"]:
            pytest.skip(f"no cgroups here: {desktop['sandbox']['missing']}")
        assert resource(api, desktop)["usage"]["pids"] > 0
        assert usage_metrics(api, desktop["id"])["sandbox_desktop_pids"] > 0
        assert api.delete(f"/v1/desktops/{desktop['id']}").status_code == 204
        gone = resource(api, desktop)
        assert gone["state"] == "deleted" and gone.get("usage") is None, gone
        assert usage_metrics(api, desktop["id"]) == {}


def usage_metrics(api: httpx.Client, desktop_id: str) -> dict[str, float]:
    """The desktop's usage samples in the metrics, by family."""
    metrics = api.get("/v1/metrics")
    assert metrics.status_code == 200, metrics.text
    families = "memory_bytes|cpu_seconds_total|pids|oom_kills_total"
    pattern = rf'^(sandbox_desktop_(?:{families})){{desktop="{desktop_id}"}} (\S+)$'
    return {name: float(value) for name, value in re.findall(pattern, metrics.text, re.MULTILINE)}


def test_a_patch_changes_the_limits_in_force(api: httpx.Client) -> None:
    with created_desktop(api, limits={"pids": PIDS}) as desktop:
        path = f"/v1/desktops/{desktop['id']}"
        xvfb = child_host_pid(api.get(f"{path}/status").json(), "Xvfb")
        desktop_cgroup = cgroup_dir(xvfb, "cpu").parent  # the CPU limit binds the whole desktop
        throttled = throttled_periods(desktop_cgroup)
        python_in(api, SPIN, desktop=desktop["id"])
        assert throttled_periods(desktop_cgroup) == throttled  # no quota: never throttled

        changed = api.patch(path, json={"limits": {"pids": 2 * PIDS, "cpu": 0.2}})
        assert changed.status_code == 200, changed.text
        assert changed.json()["limits"] == {"pids": 2 * PIDS, "cpu": 0.2}  # replaced whole: no memory limit
        python_in(api, SPIN, desktop=desktop["id"])
        assert throttled_periods(desktop_cgroup) > throttled
        forked, failure = python_in(api, FORK_BOMB, "0", desktop=desktop["id"]).split()
        assert failure == "EAGAIN" and PIDS <= int(forked) < 2 * PIDS


def throttled_periods(desktop_cgroup: Path) -> int:
    """CFS periods in which the kernel held the desktop back for its CPU quota."""
    stat = dict(line.split() for line in (desktop_cgroup / "cpu.stat").read_text().splitlines())
    return int(stat["nr_throttled"])


def test_pause_freezes_every_process_of_its_cgroup(api: httpx.Client) -> None:
    with created_desktop(api) as desktop:
        path = f"/v1/desktops/{desktop['id']}"
        daemon = start_daemon(api, desktop)
        xvfb = child_host_pid(api.get(f"{path}/status").json(), "Xvfb")
        paused = api.post(f"{path}/pause")
        assert paused.status_code == 200 and paused.json()["state"] == "paused", paused.text
        assert frozen(daemon) and frozen(xvfb)
        assert api.post(f"{path}/resume").json()["state"] == "active"
        assert not frozen(daemon) and not frozen(xvfb)


def test_reset_kills_every_app_and_delete_everything(api: httpx.Client) -> None:
    with created_desktop(api) as desktop:
        path = f"/v1/desktops/{desktop['id']}"
        xvfb = child_host_pid(api.get(f"{path}/status").json(), "Xvfb")
        daemon = start_daemon(api, desktop)
        assert api.post(f"{path}/reset").status_code == 200
        assert not pid_alive(daemon), "an app that left the session's environment outlived the reset"
        assert pid_alive(xvfb) and resource(api, desktop)["state"] == "active"  # the session stays

        daemon = start_daemon(api, desktop)
        assert api.delete(path).status_code == 204
        assert not pid_alive(daemon) and not pid_alive(xvfb)


@pytest.mark.parametrize(("limits", "field"), [
    ({"memoryMb": 1}, "limits.memoryMb"),
    ({"memoryMb": 10 ** 9}, "limits.memoryMb"),
    ({"memoryMb": "a lot"}, "limits.memoryMb"),
    ({"pids": 1}, "limits.pids"),
    ({"pids": 10 ** 8}, "limits.pids"),
    ({"pids": 1.5}, "limits.pids"),
    ({"cpu": 0}, "limits.cpu"),
    ({"cpu": 4096}, "limits.cpu"),
    ({"cpu": True}, "limits.cpu"),
])
def test_a_mistake_in_the_limits_is_a_4xx_naming_its_field(api: httpx.Client, bounded: dict[str, Any],
                                                           limits: dict[str, Any], field: str) -> None:
    before = {d["id"] for d in api.get("/v1/desktops").json()["desktops"]}
    assert_refused(api.post("/v1/desktops", json={"width": 320, "height": 240, "limits": limits}), field)
    assert {d["id"] for d in api.get("/v1/desktops").json()["desktops"]} == before  # none made
    assert_refused(api.patch(f"/v1/desktops/{bounded['id']}", json={"limits": limits}), field)
    assert resource(api, bounded)["limits"] == {"memoryMb": 96, "pids": PIDS}


def test_a_refused_limit_changes_nothing_else_of_the_patch(api: httpx.Client) -> None:
    """Shrinking the memory below what the apps hold is refused where the kernel refuses it (cgroup v1); the
    network rules and tags of the same PATCH are then not applied either."""
    with created_desktop(api, limits={"memoryMb": 256}, tags={"kept": "yes"}) as desktop:
        path = f"/v1/desktops/{desktop['id']}"
        holder = api.post(f"{path}/processes", json={"command": PYTHON, "args": ["-I", "-S", "-c", HOLD_MEMORY]})
        assert holder.status_code == 200, holder.text
        wait_for(lambda: output(api, f"{path}/processes/{holder.json()['id']}/logs") == "held", "memory held")
        answer = api.patch(path, json={"limits": {"memoryMb": 64}, "network": {"egress": "none"},
                                       "tags": {"kept": "no"}})
        if answer.status_code == 200:
            pytest.skip("the kernel reclaims rather than refuses here (cgroup v2 memory)")
        assert_refused(answer, "limits.memoryMb")
        after = resource(api, desktop)
        assert after["limits"]["memoryMb"] == 256
        assert after["network"]["egress"] == "all" and after["tags"] == {"kept": "yes"}
        assert api.get(f"{path}/network").json()["rules"]["egress"] == "all"

