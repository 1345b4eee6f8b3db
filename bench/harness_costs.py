"""What a test harness pays the server for, against an earlier design: a server's start and a test's recording.

Each round runs the same measurement in a child process on this checkout and on a worktree of `--baseline`
(default 2d3b359, before the server stopped loading httpx at start and before recordings reused their encoder),
one after the other, so that this machine's drift hits both alike; medians over the rounds:
- start: `sandbox-desktop server` from spawn to healthy, wall clock and the server's CPU (/proc);
- a recording started, stopped and deleted at once on a 1440x900 desktop, as the pytest plugin does for every
  test: the server's CPU per cycle over `--cycles` cycles (the first, which opens the capture and the sound, left
  out).

    .venv/bin/python bench/harness_costs.py [--rounds 3] [--cycles 40] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("api", "desktop", "recording", "streaming", "pytest_sandbox_desktop", "client")

CHILD = """
import json, os, sys, tempfile, time
from pathlib import Path
from pytest_sandbox_desktop.server import start_server

def cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

cycles = int(sys.argv[1])
started = time.perf_counter()
server = start_server(Path(tempfile.mkdtemp(prefix="bench-harness-")))
result = {"start_wall": time.perf_counter() - started, "start_cpu": cpu(server.process.pid)}
try:
    with server.client() as client:
        desktop = client.desktops.attach(client.desktops.create(width=1440, height=900).id)
        for index in range(cycles + 1):
            before = cpu(server.process.pid)
            recording = desktop.start_recording()
            desktop.stop_recording()
            desktop.delete_recording(recording.id)
            if index == 0:
                first = cpu(server.process.pid)
        result["cycle_cpu"] = (cpu(server.process.pid) - first) / cycles
finally:
    server.stop()
print(json.dumps(result))
"""


def measure(tree: Path, cycles: int) -> dict[str, float]:
    """The child's figures, run with `tree`'s code (its api, desktop, recording, plugin and client)."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'client'}"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(cycles)], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed in {tree}:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--baseline", default="2d3b359", help="the earlier design's commit (default 2d3b359)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        baseline = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(baseline), args.baseline],
                       check=True)
        try:
            trees = {f"baseline {args.baseline}": baseline, "this checkout": REPO}
            for tree in trees.values():  # both from bytecode, however PYTHONDONTWRITEBYTECODE is set
                subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree, check=True,
                               stdout=subprocess.DEVNULL)
            results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    results[name].append(measure(tree, args.cycles))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)], check=False)
    print(f"{os.cpu_count()} CPUs; medians of {args.rounds} alternating round(s)")
    medians = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
               for name, runs in results.items()}
    for name, figures in medians.items():
        print(f"{name:<22} server start {figures['start_wall']:.2f} s wall, {figures['start_cpu']:.2f} s CPU   "
              f"recording start+stop+delete {figures['cycle_cpu'] * 1000:5.1f} ms CPU")
    old, new = medians.values()
    print(f"{'':<22} start CPU {old['start_cpu'] / new['start_cpu']:.2f}x less, "
          f"recording cycle {old['cycle_cpu'] / new['cycle_cpu']:.2f}x less")


if __name__ == "__main__":
    main()
