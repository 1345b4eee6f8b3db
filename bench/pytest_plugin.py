"""The pytest plugin's costs (docs/pytest.md), measured as a user meets them: `python -m pytest` on generated
projects, times read from the JUnit XML (`time` is setup + call + teardown of each test) and the wall clock.

1. Per-test overhead of the `desktop` fixture: N tests that ask for it against N bare tests, in one session
   each (the first test, which starts the server and makes the desktop, is reported apart), for the
   default (reset between tests, recording kept on failure only), `--desktop-record=off` and
   `--desktop-isolation=fresh`.
2. A suite of 40 tests, each launching an xterm and waiting for its window and for it to be drawn: in one
   process, on 2 and 4 xdist workers (the default: one server for them all), on 4 with a server each, and
   without recording; wall clock and CPU seconds (the whole process tree), as the machine's load allows.
   `--rounds N` runs every configuration N times, round after round, and reports medians: this machine's
   speed drifts over minutes, and a ratio of two runs minutes apart measures the drift as much as xdist.
3. A suite of 40 tests that wait for their app as GUI tests do (an xterm whose command answers a second
   after it starts; the test waits for the answer to be drawn), in one process and on 4 workers.

    .venv/bin/python bench/pytest_plugin.py [--tests 30] [--suite 40] [--rounds 1] [--skip-suite] [--all-plugins]
        [--only overhead|xterm|waiting ...]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

BARE = "def test_{n}():\n    pass\n"
WITH_DESKTOP = "def test_{n}(desktop):\n    pass\n"
SUITE = """
def test_{n}(desktop):
    desktop.launch("xterm", ["-title", "suite {n}"], wait=True)
    window = desktop.expect_window(title="suite {n}")
    desktop.wait_settled(quiet_ms=200, region=(window["x"], window["y"], window["width"], window["height"]))
"""

WAITING = """
def test_{n}(desktop):
    desktop.launch("xterm", ["-title", "waiting {n}", "-e", "sh", "-c", "sleep 1; echo done {n}; exec sleep 60"],
                   wait=True)
    window = desktop.expect_window(title="waiting {n}")
    region = (window["x"], window["y"], window["width"], window["height"])
    desktop.wait_settled(quiet_ms=200, region=region)
    with desktop.expect_screen_change(region=region, timeout=10):
        pass  # the app's answer, a second after it started
"""


@dataclass(frozen=True)
class Run:
    wall: float
    """Seconds of the whole `python -m pytest`, start-up included."""
    cpu: float
    """CPU seconds of pytest and every process it started: its workers, its servers, their X servers and apps
    (all of them waited for by their parents or by this process, `adopt_orphans`)."""
    times: list[float]
    """Each test's JUnit time (setup + call + teardown), in order."""


def run_project(root: Path, body: str, count: int, *options: str, lean: bool) -> Run:
    """Write `count` tests into a fresh project and run it; `lean`: with pytest's own plugins, xdist and this
    one only (else every plugin installed here)."""
    root.mkdir(parents=True)
    (root / "test_generated.py").write_text("\n".join(textwrap.dedent(body).format(n=n) for n in range(count)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SANDBOX_DESKTOP_", "PYTEST_"))}
    plugins: tuple[str, ...] = ()
    if lean:
        # Only pytest, xdist and this plugin, as in a project of its own: the test tools installed beside the
        # server here (schemathesis, hypothesis, ...) cost every pytest process, every xdist worker too,
        # about 2.4 s of CPU to import (0.2 s without them).
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugins = ("-p", "xdist", "-p", "pytest_sandbox_desktop.plugin")
    started, cpu = time.perf_counter(), _children_cpu()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins,
                             "--junitxml=junit.xml", *options], cwd=root, env=env, capture_output=True, text=True,
                            timeout=1800)
    wall = time.perf_counter() - started
    reap_orphans()
    cpu = _children_cpu() - cpu
    if result.returncode not in (0, 1):  # 1: some tests failed; the timings still count, the failures are shown
        raise SystemExit(f"pytest could not run in {root}:\n{result.stdout}\n{result.stderr}")
    if result.returncode == 1:
        print("  (failures:", "; ".join(line for line in result.stdout.splitlines() if line.startswith("FAILED")), ")")
    times = [float(case.get("time", "0")) for case in ET.parse(root / "junit.xml").getroot().iter("testcase")]
    return Run(wall, cpu, times)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the subreaper of what it starts: a process whose parent never waits for it (xdist's
    workers, a server that the controller left to end) comes to us when its parent ends, and `reap_orphans`
    waits for it, so RUSAGE_CHILDREN counts every process of a run."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans(timeout: float = 15.0) -> None:
    """Wait for every process handed to us (see `adopt_orphans`), at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.01)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def overhead(tmp: Path, count: int, lean: bool) -> None:
    print(f"-- per-test overhead of the `desktop` fixture ({count} tests a session; JUnit time: setup+call+teardown)")
    baseline = statistics.median(run_project(tmp / "bare", BARE, count, lean=lean).times)
    print(f"{'bare test (baseline)':<44} median {ms(baseline)}")
    cases = {"desktop, reset, record retain-on-failure": (),
             "desktop, reset, record off": ("--desktop-record=off",),
             "desktop, fresh per test, retain-on-failure": ("--desktop-isolation=fresh",)}
    for index, (name, options) in enumerate(cases.items()):
        run = run_project(tmp / f"desktop-{index}", WITH_DESKTOP, count, "--desktop-size=1280x800", *options,
                          lean=lean)
        later = sorted(run.times[1:])
        p90 = later[min(len(later) - 1, int(len(later) * 0.9))]
        print(f"{name:<44} median {ms(statistics.median(later) - baseline)} over bare   p90 {ms(p90 - baseline)}   "
              f"first test (server + desktop) {run.times[0]:.2f} s   session {run.wall:.1f} s")


def suite(tmp: Path, count: int, rounds: int, lean: bool, parts: set[str]) -> None:
    if "xterm" in parts:
        xterm_suite(tmp, count, rounds, lean)
    if "waiting" in parts:
        waiting_suite(tmp, count, rounds, lean)


def xterm_suite(tmp: Path, count: int, rounds: int, lean: bool) -> None:
    print(f"-- a suite of {count} tests (xterm, its window, its prompt drawn), wall clock of `python -m pytest`, "
          f"median of {rounds} round(s), the runs of a round one after another")
    compare(tmp / "suite", SUITE, count, rounds, lean, {
        "1 process (no xdist)": (),
        "2 workers (default: one server, shared)": ("-n", "2"),
        "4 workers (default: one server, shared)": ("-n", "4"),
        "4 workers, a server each (--desktop-server=per-worker)": ("-n", "4", "--desktop-server=per-worker"),
        "1 process, --desktop-record=off": ("--desktop-record=off",),
        "4 workers, --desktop-record=off": ("-n", "4", "--desktop-record=off")})


def waiting_suite(tmp: Path, count: int, rounds: int, lean: bool) -> None:
    print(f"-- a suite of {count} tests that wait for their app (an xterm whose command answers after a second; "
          "the test waits for that answer on the screen)")
    compare(tmp / "waiting", WAITING, count, rounds, lean, {
        "1 process (no xdist)": (), "4 workers (default: one server, shared)": ("-n", "4")})


def compare(tmp: Path, body: str, count: int, rounds: int, lean: bool, runs: dict[str, tuple[str, ...]]) -> None:
    """Run each configuration of `runs` `rounds` times, round after round; medians against the first."""
    results: dict[str, list[Run]] = {name: [] for name in runs}
    for round_ in range(rounds):
        for index, (name, options) in enumerate(runs.items()):
            results[name].append(run_project(tmp / f"{round_}-{index}", body, count, *options,
                                             "--desktop-size=1024x768", lean=lean))
    baseline = statistics.median(run.wall for run in results[next(iter(runs))])
    for name, done in results.items():
        wall, cpu = statistics.median(r.wall for r in done), statistics.median(r.cpu for r in done)
        walls = ", ".join(f"{r.wall:.1f}" for r in done)
        print(f"{name:<56} wall {wall:6.1f} s ({walls})   {baseline / wall:4.2f}x the 1-process run   "
              f"CPU {cpu:6.1f} s ({cpu / count:.2f} s a test)   "
              f"median test {statistics.median(t for r in done for t in r.times):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=30, help="tests per session for the overhead (default 30)")
    parser.add_argument("--suite", type=int, default=40, help="tests in the xdist suite (default 40)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the suite's configurations this many times, alternating; medians (default 1)")
    parser.add_argument("--skip-suite", action="store_true", help="measure the per-test overhead only")
    parser.add_argument("--only", choices=["overhead", "xterm", "waiting"], action="append",
                        help="run only these parts (repeatable; default all)")
    parser.add_argument("--all-plugins", action="store_true",
                        help="let pytest load every plugin installed in this environment (default: only xdist and "
                             "this one, as in a project of its own)")
    args = parser.parse_args()
    adopt_orphans()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as tmp:
        parts = set(args.only or ("overhead", "xterm", "waiting"))
        if args.skip_suite:
            parts -= {"xterm", "waiting"}
        if "overhead" in parts:
            overhead(Path(tmp), args.tests, not args.all_plugins)
        suite(Path(tmp), args.suite, args.rounds, not args.all_plugins, parts)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
