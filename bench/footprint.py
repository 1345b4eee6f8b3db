"""What one pod needs: memory and CPU of a server's whole process tree with a 1280x800 desktop, per workload.

The tree is the server and everything under it (Xvfb, openbox, dbus, launched apps, their children):
what one container runs. Memory three ways (see `Memory`): summed RSS, summed PSS, and an estimate of
what the pod's memory cgroup is charged. CPU is the tree's user+system time, reaped children included.
Each phase warms up, then samples every 0.25 s. The agent loop runs back to back (no model think time):
click into an xterm, type, settle, full-size PNG. The viewer decodes in a process outside the tree.
Usage: /tmp/venv/bin/python bench/footprint.py [--seconds 20] [--no-chromium]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_desktop
from tests.conftest import REPO, ServerProcess, launch_server

DISPLAY_NUM = 460
WIDTH, HEIGHT = 1280, 800
WARMUP_S = 3.0
SAMPLE_S = 0.25
"""Short enough to see the bursts a CPU limit would throttle (a PNG encode, a page load)."""
MEMORY_EVERY = 4
TICK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
STEP_SCREENSHOT = {"format": "png"}


@dataclass(frozen=True)
class Memory:
    """The tree's memory three ways, in bytes."""

    rss: int
    """Summed RSS: pages shared between processes counted once per process (an upper bound)."""
    pss: int
    """Summed PSS: shared pages split between all their users, processes outside the tree included."""
    pod: int
    """What the pod's memory cgroup would be charged with no other pod sharing its image's pages:
    anonymous memory (PSS: only forks of the tree share it) plus each file-backed mapping's resident
    pages counted once in the tree (shared libraries, the X framebuffer's SysV segments, /dev/shm)."""


@dataclass(frozen=True)
class Sample:
    """The tree at one instant."""

    at: float
    procs: int
    cpu: float
    """Seconds of CPU the tree has used so far, reaped children included."""
    running: dict[int, float]
    """Each live process's own CPU seconds (a reaped child's lands on its parent all at once)."""
    memory: Memory | None
    """Read every MEMORY_EVERY samples (smaps of a browser's processes takes a while to read)."""


@dataclass(frozen=True)
class Phase:
    """One workload and what the tree used during it."""

    name: str
    samples: list[Sample]
    steps: int = 0

    @property
    def seconds(self) -> float:
        return self.samples[-1].at - self.samples[0].at

    @property
    def cpu_mean(self) -> float:
        """% of one core over the whole phase."""
        return (self.samples[-1].cpu - self.samples[0].cpu) / self.seconds * 100

    @property
    def cpu_peak(self) -> float:
        """% of one core over the busiest SAMPLE_S, counting processes alive at both ends of it."""
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return max(sum(b.running[pid] - a.running[pid] for pid in a.running.keys() & b.running.keys())
                   / (b.at - a.at) * 100 for a, b in pairs)

    def peak(self, kind: str) -> int:
        """The highest `rss`, `pss` or `pod` figure seen."""
        return max(getattr(s.memory, kind) for s in self.samples if s.memory is not None)


def process_table() -> dict[int, tuple[int, int, float, float]]:
    """Every process: pid -> (ppid, session id, own CPU seconds, its reaped children's)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        own, reaped = (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK
        table[int(entry.name)] = (int(fields[1]), int(fields[3]), own, reaped)
    return table


def tree_of(root: int, table: dict[int, tuple[int, int, float, float]]) -> set[int]:
    """`root`, its descendants, and anything left in its session (a double fork escapes the first)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found | {pid for pid, (_, sid, *_) in table.items() if sid == root}


def rollup(pid: int) -> dict[str, int]:
    """smaps_rollup's sizes in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0]) * 1024
    return fields


def file_pages(pid: int) -> Iterator[tuple[tuple[str, str, str], int]]:
    """((device, inode, offset), resident bytes not turned anonymous) of each file-backed mapping."""
    key, rss = None, 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if "-" in head[0] and not head[0].endswith(":"):
            key = (head[3], head[4], head[2]) if head[4] != "0" else None
        elif key is not None and head[0] == "Rss:":
            rss = int(head[1]) * 1024
        elif key is not None and head[0] == "Anonymous:":
            yield key, rss - int(head[1]) * 1024


def tree_memory(pids: set[int]) -> Memory:
    rss = pss = anon = 0
    files: dict[tuple[str, str, str], int] = {}
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = rollup(pid)
            pages = list(file_pages(pid))
            rss, pss, anon = rss + fields["Rss"], pss + fields["Pss"], anon + fields.get("Pss_Anon", 0)
            for key, size in pages:
                files[key] = max(files.get(key, 0), size)
    return Memory(rss, pss, anon + sum(files.values()))


def sample(root: int, with_memory: bool) -> Sample:
    table = process_table()
    pids = tree_of(root, table)
    return Sample(time.monotonic(), len(pids), sum(table[pid][2] + table[pid][3] for pid in pids),
                  {pid: table[pid][2] for pid in pids}, tree_memory(pids) if with_memory else None)


def measure(root: int, seconds: float) -> list[Sample]:
    """A sample every SAMPLE_S for `seconds`."""
    samples = [sample(root, True)]
    while samples[-1].at - samples[0].at < seconds:
        time.sleep(max(0.0, samples[0].at + len(samples) * SAMPLE_S - time.monotonic()))
        samples.append(sample(root, len(samples) % MEMORY_EVERY == 0))
    return samples


class AgentLoop:
    """Click into a terminal, type, wait for the screen to settle, take a full-size PNG; back to back."""

    def __init__(self, server: ServerProcess, target: dict[str, int]) -> None:
        self.server, self.target = server, target
        self.steps = 0
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-loop", daemon=True)

    def __enter__(self) -> AgentLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise SystemExit(f"the agent loop failed: {self.error!r}")

    def _run(self) -> None:
        try:
            self._steps()
        except Exception as exc:
            self.error = exc

    def _steps(self) -> None:
        with self.server.client() as api:
            while not self._stop.is_set():
                reply = api.post("/v1/desktop/actions", json={
                    "actions": [{"type": "click", **self.target},
                                {"type": "type", "text": f"echo step {self.steps}\n", "delayMs": 0}],
                    "settle": {"quietMs": 100, "timeoutMs": 2000},
                    "screenshot": STEP_SCREENSHOT,
                })
                reply.raise_for_status()
                self.steps += 1


@contextlib.contextmanager
def recording(api: httpx.Client, report: dict[str, float]) -> Iterator[None]:
    """Record the screen; afterwards `report["bytes_per_s"]` is the MP4's growth rate."""
    api.post("/v1/desktop/recording/start", json={}).raise_for_status()
    try:
        yield
    finally:
        info = api.post("/v1/desktop/recording/stop").json()
        report["bytes_per_s"] = info["bytes"] / max(0.001, info["durationMs"] / 1000)


@contextlib.contextmanager
def viewer(server: ServerProcess, api: httpx.Client, seconds: float, report: dict[str, float]) -> Iterator[None]:
    """One WebRTC viewer (streaming.viewer, decoding in a process of its own, outside the tree);
    afterwards `report["fps"]` is the rate the server sent it pictures at, at the end."""
    api.post("/v1/desktop/stream/start").raise_for_status()
    proc = subprocess.Popen([sys.executable, "-m", "streaming.viewer", server.url, server.token or "",
                             "--seconds", str(seconds)], cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if api.get("/v1/desktop/stream/status").json().get("viewers") or proc.poll() is not None:
                break
            time.sleep(0.1)
        if proc.poll() is not None:
            raise SystemExit(f"the viewer exited with {proc.returncode} before connecting")
        yield
        report["fps"] = api.get("/v1/desktop/stream/status").json().get("fps") or 0.0
    finally:
        proc.kill()
        proc.wait()
        api.post("/v1/desktop/stream/stop")


def launch(api: httpx.Client, app: str, *args: str) -> dict[str, object]:
    reply = api.post("/v1/desktop/launch", json={"app": app, "args": list(args), "wait": True,
                                                 "waitTimeoutMs": 30000})
    reply.raise_for_status()
    return dict(reply.json())


def window_target(api: httpx.Client, window_id: object) -> dict[str, int]:
    window = next(w for w in api.get("/v1/desktop/windows").json()["windows"] if w["id"] == window_id)
    return {"x": window["x"] + 60, "y": window["y"] + 60}


def probe_costs(server: ServerProcess) -> None:
    """Wall time and CPU of one `sandbox-desktop ready` (the readiness exec probe) and of `/v1/health`."""
    env = dict(os.environ, SANDBOX_DESKTOP_URL=server.url, SANDBOX_DESKTOP_TOKEN=server.token or "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "api.cli.main", "ready"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=30)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"readiness probe `sandbox-desktop ready`: exit {done.returncode}, {wall * 1000:.0f} ms wall, "
          f"{cpu * 1000:.0f} ms CPU (a Python start-up plus the end-to-end check)")
    started = time.perf_counter()
    with urllib.request.urlopen(server.url + "/v1/health", timeout=5) as reply:  # a plain GET, as the kubelet's
        reply.read()
    print(f"liveness probe GET /v1/health: {(time.perf_counter() - started) * 1000:.1f} ms")


def startup_time() -> None:
    """How long a pod takes from exec to a healthy server, and to an active desktop."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-footprint-start-"))
    started = time.perf_counter()
    server = launch_server(tmp)
    healthy = time.perf_counter() - started
    try:
        with server.client() as api:
            api.post("/v1/desktop/start", json={"displayNum": DISPLAY_NUM + 1, "width": WIDTH,
                                                "height": HEIGHT}).raise_for_status()
            print(f"start-up: server healthy after {healthy:.2f} s, desktop active after "
                  f"{time.perf_counter() - started:.2f} s")
            api.post("/v1/desktop/stop")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def round_up(value: float, step: float) -> float:
    return math.ceil(value / step) * step


def print_table(phases: list[Phase]) -> None:
    print(f"\n{'phase':<44} {'procs':>5} {'RSS sum':>8} {'PSS sum':>8} {'pod est.':>8} {'CPU mean':>9} "
          f"{'CPU peak':>9} {'steps/s':>8}")
    print(f"{'':<50} {'peak MiB':>8} {'peak MiB':>8} {'peak MiB':>8} {'% core':>9} {'% 0.25 s':>9}")
    for p in phases:
        rate = f"{p.steps / p.seconds:8.1f}" if p.steps else f"{'-':>8}"
        print(f"{p.name:<44} {max(s.procs for s in p.samples):5d} {p.peak('rss') / MIB:8.0f} "
              f"{p.peak('pss') / MIB:8.0f} {p.peak('pod') / MIB:8.0f} {p.cpu_mean:9.0f} {p.cpu_peak:9.0f} {rate}")


def suggest(profile: str, phases: list[Phase], loop_cpu: float) -> None:
    """Request: 1.25x the peak pod memory and the agent loop's mean CPU; limit: 2x the memory and the
    busiest 0.25 s rounded up to half a core, never under one core (bursts are short; an agent waits on them)."""
    memory = max(p.peak("pod") for p in phases) / MIB
    cpu_limit = max(1.0, round_up(max(p.cpu_peak for p in phases) / 100, 0.5))
    print(f"  {profile:<34} requests cpu {round_up(loop_cpu / 100, 0.1) * 1000:4.0f}m memory "
          f"{round_up(memory * 1.25, 64):5.0f}Mi;  limits cpu {cpu_limit * 1000:4.0f}m memory "
          f"{round_up(memory * 2, 128):5.0f}Mi")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--no-chromium", action="store_true", help="skip the phase with a Chromium open")
    args = parser.parse_args()
    seconds = args.seconds
    with bench_desktop("footprint", DISPLAY_NUM, width=WIDTH, height=HEIGHT, terminals=0, images=0) as bench:
        server, api, root = bench.server, bench.api, bench.server.proc.pid
        phases: list[Phase] = []

        def run(name: str, *contexts: contextlib.AbstractContextManager[object]) -> Phase:
            with contextlib.ExitStack() as stack:
                loop = None
                for context in contexts:
                    entered = stack.enter_context(context)
                    loop = entered if isinstance(entered, AgentLoop) else loop
                time.sleep(WARMUP_S)
                steps = loop.steps if loop else 0
                samples = measure(root, seconds)
                phase = Phase(name, samples, (loop.steps - steps) if loop else 0)
            phases.append(phase)
            print(f"  measured: {name}", flush=True)
            return phase

        time.sleep(WARMUP_S)
        run("idle desktop")
        xterm = launch(api, "xterm", "-geometry", "100x35+0+0")
        target = window_target(api, xterm["windowId"])
        rec: dict[str, float] = {}
        live: dict[str, float] = {}
        span = seconds + WARMUP_S + 5
        run("agent loop", AgentLoop(server, target))
        run("agent loop + recording", recording(api, rec), AgentLoop(server, target))
        run("agent loop + 1 WebRTC viewer", viewer(server, api, span, live), AgentLoop(server, target))
        run("agent loop + recording + 1 viewer", recording(api, rec), viewer(server, api, span, live),
            AgentLoop(server, target))
        service = list(phases)
        if not args.no_chromium:
            profile = bench.tmp / "chromium-profile"
            launch(api, "chromium", "--no-sandbox", "--no-first-run", "--disable-gpu", f"--user-data-dir={profile}",
                   "--window-position=640,0", "--window-size=640,800", "file:///usr/share/doc")
            run("+ Chromium (1 tab): agent loop + rec + viewer", recording(api, rec), viewer(server, api, span, live),
                AgentLoop(server, target))
        print_table(phases)
        print(f"\nrecording: {rec.get('bytes_per_s', 0) * 3600 / MIB:.0f} MiB per hour of agent loop "
              f"(ephemeral storage if recordings stay in the pod)")
        print(f"live view: the server was sending the viewer {live.get('fps', 0):.1f} pictures/s at the end")
        probe_costs(server)
        names = Counter(process_names(root))
        print("process tree now: " + ", ".join(f"{name} x{count}" for name, count in sorted(names.items())))
        loop_cpu = max(p.cpu_mean for p in phases if p.steps)
        print(f"\nsuggested (cpu request: the agent loop's mean, {loop_cpu:.0f} % of a core, back to back; memory "
              "request 1.25x and limit 2x the peak pod estimate; cpu limit: the busiest 0.25 s, >= 1 core)")
        suggest("desktop + terminal apps:", service, loop_cpu)
        if len(phases) > len(service):
            suggest("desktop + a Chromium:", phases, loop_cpu)
    startup_time()


def process_names(root: int) -> list[str]:
    names = []
    for pid in tree_of(root, process_table()):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
    return names


if __name__ == "__main__":
    main()
