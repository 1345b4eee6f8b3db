"""Benchmark the foundation: cold start to `active`, status latency, SIGKILL recovery.

Prints medians and p90s beside the HTTP baseline (`GET /v1/health`) measured in the same run.
Usage: .venv/bin/python bench/lifecycle.py [--starts 15] [--requests 300] [--kills 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import summary, timed
from tests.conftest import launch_server
from tests.support.pids import child_host_pid


def x_answers(display: str) -> bool:
    return subprocess.run(["xdpyinfo", "-display", display], capture_output=True, timeout=10).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--windows", type=int, default=10)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    server = launch_server(tmp)
    api = server.client()
    try:
        health = summary("GET /v1/health (HTTP baseline)", timed(lambda: api.get("/v1/health"), args.requests))

        starts = []
        for _ in range(args.starts):
            begin = time.perf_counter()
            body = api.post("/v1/desktop/start", json={"displayNum": 160}).json()
            starts.append(time.perf_counter() - begin)
            assert body["state"] == "active", body
            api.post("/v1/desktop/stop")
        summary("cold start to active (POST /start)", starts, health)

        display = api.post("/v1/desktop/start", json={"displayNum": 160}).json()["display"]
        env = dict(os.environ, DISPLAY=display)
        terms = [subprocess.Popen(["xterm", "-T", f"bench-{i}", "-geometry", f"60x15+{20 * i}+{20 * i}"], env=env)
                 for i in range(args.windows)]
        deadline = time.monotonic() + 20
        while len(api.get("/v1/desktop/windows").json()["windows"]) < args.windows and time.monotonic() < deadline:
            time.sleep(0.05)
        count = len(api.get("/v1/desktop/windows").json()["windows"])
        summary(f"GET /v1/desktop/status ({count} windows)",
                timed(lambda: api.get("/v1/desktop/status"), args.requests), health)
        summary(f"GET /v1/desktop/windows ({count} windows)",
                timed(lambda: api.get("/v1/desktop/windows"), args.requests), health)
        for term in terms:
            term.kill()
            term.wait()

        recoveries = []
        for _ in range(args.kills):
            status = api.get("/v1/desktop/status").json()
            xvfb = child_host_pid(status, "Xvfb")  # a sandboxed desktop's pids are its own namespace's
            killed = time.perf_counter()
            os.kill(xvfb, signal.SIGKILL)
            while True:  # no request to the server: recovery must be unattended
                if x_answers(display) and not Path(f"/proc/{xvfb}").exists():
                    break
                if time.perf_counter() - killed > 10:
                    raise SystemExit("display did not come back within 10 s")
            recoveries.append(time.perf_counter() - killed)
            # A fresh session per kill, so crash back-off (for repeated crashes) never applies.
            api.post("/v1/desktop/stop")
            api.post("/v1/desktop/start", json={"displayNum": 160})
        summary("SIGKILL Xvfb -> display answers again", recoveries)
    finally:
        api.close()
        server.stop()


if __name__ == "__main__":
    main()
