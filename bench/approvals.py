"""Benchmark approvals (docs/approvals.md): how soon a decision reaches the waiting call, and what pending ones cost.

Prints, in one run against a server started with `--approve pointer` and an active desktop:
- decision → agent's answer: from just before `POST /v1/approvals/{id}` is sent to the held `POST
  /v1/desktop/mouse/move` being answered (both clocks this process's), median and p90 over `--runs`; beside it,
  in the same run, the same move on a desktop without a policy (the action's own round trip, the baseline) and
  the decision's own round trip;
- CPU time of the server process over `--seconds` with `--pending` approvals pending, beside the same span with
  none pending.
Usage: .venv/bin/python bench/approvals.py [--runs 40] [--pending 50] [--seconds 10]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import cpu_seconds, summary, timed
from tests.conftest import ServerProcess, launch_server

DISPLAY_NUM = 379
WAIT_LIMIT_S = 10.0


def answered_at(client: httpx.Client, path: str, body: dict[str, int], headers: dict[str, str]) -> float:
    response = client.post(path, json=body, headers=headers)
    at = time.perf_counter()
    if response.status_code != 200:
        raise SystemExit(f"the held call answered {response.status_code}: {response.text}")
    return at


def next_pending(api: httpx.Client, seen: set[str]) -> str:
    """The id of a pending approval not seen before (polled: this is the bench's side, not the server's)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        for approval in api.get("/v1/approvals", params={"status": "pending"}).json()["approvals"]:
            if approval["id"] not in seen:
                seen.add(approval["id"])
                return str(approval["id"])
        time.sleep(0.002)
    raise SystemExit("no approval became pending")


def decision_latency(server: ServerProcess, runs: int) -> None:
    seen: set[str] = set()
    latencies, decisions = [], []
    with server.client() as api, server.client() as agent, ThreadPoolExecutor(1) as pool:
        for i in range(runs):
            answer: Future[float] = pool.submit(answered_at, agent, "/v1/desktop/mouse/move",
                                                {"x": 10 + i % 50, "y": 10}, {})
            approval = next_pending(api, seen)
            time.sleep(0.01)  # the call is parked on its future, not on its way in
            made = time.perf_counter()
            api.post(f"/v1/approvals/{approval}", json={"decision": "approve"}).raise_for_status()
            decisions.append(time.perf_counter() - made)
            latencies.append(answer.result(WAIT_LIMIT_S) - made)
        unheld = api.post("/v1/desktops", json={"approve": [], "width": 800, "height": 600})
        unheld.raise_for_status()
        base = f"/v1/desktops/{unheld.json()['id']}"
        try:
            plain = timed(lambda: agent.post(base + "/mouse/move", json={"x": 10, "y": 10}).raise_for_status(), runs)
        finally:
            api.delete(base)
    baseline = summary("move on a desktop without a policy (baseline)", plain)
    summary("decision POST's own round trip", decisions, baseline, "baseline")
    summary("decision POST sent -> held move answered", latencies, baseline, "baseline")


def pending_cpu(server: ServerProcess, pending: int, seconds: float) -> None:
    limits = httpx.Limits(max_connections=pending + 4, max_keepalive_connections=pending + 4)
    with server.client() as api, server.client(limits=limits, timeout=seconds + 60) as agent, \
            ThreadPoolExecutor(pending) as pool:
        time.sleep(1)
        idle = cpu_span(server.proc.pid, seconds)
        held = [pool.submit(agent.post, "/v1/desktop/mouse/move", json={"x": 5, "y": 5},
                            headers={"Prefer": f"wait={int(seconds) + 30}"}) for _ in range(pending)]
        deadline = time.monotonic() + WAIT_LIMIT_S
        found: list[dict[str, str]] = []
        while len(found) < pending and time.monotonic() < deadline:
            found = api.get("/v1/approvals", params={"status": "pending"}).json()["approvals"]
            time.sleep(0.05)
        if len(found) < pending:
            raise SystemExit(f"only {len(found)} of {pending} approvals became pending")
        time.sleep(1)
        busy = cpu_span(server.proc.pid, seconds)
        for approval in found:
            api.post(f"/v1/approvals/{approval['id']}", json={"decision": "deny", "message": "bench"})
        refused = sum(f.result(WAIT_LIMIT_S).status_code == 403 for f in held)
    print(f"{'server CPU, no approval pending':<52} {idle * 100:6.2f} % of a core over {seconds:g} s")
    print(f"{f'server CPU, {pending} approvals pending':<52} {busy * 100:6.2f} % of a core over {seconds:g} s"
          f"   ({refused} denied afterwards)")


def cpu_span(pid: int, seconds: float) -> float:
    """The process's CPU time over `seconds`, as a share of one core."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--pending", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-approvals-"))
    server = launch_server(tmp, "--approve", "pointer")
    try:
        with server.client() as api:
            started = api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM, "width": 1280, "height": 800})
            if started.status_code != 200:
                raise SystemExit(f"desktop start failed: {started.text}")
        print(f"server with --approve pointer, desktop {started.json()['display']} 1280x800\n")
        decision_latency(server, args.runs)
        print()
        pending_cpu(server, args.pending, args.seconds)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
