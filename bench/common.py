"""What every benchmark shares: timing, the printed summary, and a server with a busy desktop."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.scene import close_scene, open_scene, wait_for_windows
from tests.conftest import ServerProcess, launch_server


def timed(fn: Callable[[], object], count: int, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """`count` timings of `fn()` in seconds (wall clock unless another `clock` is given)."""
    out = []
    for _ in range(count):
        start = clock()
        fn()
        out.append(clock() - start)
    return out


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of a process (all its threads; this one's by default), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident memory of a process in KiB, from /proc (0 for one without any, a zombie)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(values: list[float], q: float) -> float:
    """The value below which a fraction `q` of `values` lies (the nearest rank); NaN for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def summary(name: str, samples: list[float], baseline: float | None = None, against: str = "health") -> float:
    """Print `name: median p90 (n)` in ms with the ratio to a baseline median; returns the median."""
    median = statistics.median(samples)
    p90 = percentile(samples, 0.9)
    ratio = f"  ({median / baseline:.2f}x {against})" if baseline else ""
    print(f"{name:<52} median {median * 1000:8.2f} ms   p90 {p90 * 1000:8.2f} ms   n={len(samples)}{ratio}")
    return median


def wait_for_http(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 20,
                  log: Path | None = None) -> None:
    """Until `url` answers 200; SystemExit naming `what` once its process ended or `timeout` passed first (with the
    end of its `log`, when it has one)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = f":\n{log.read_text()[-2000:]}" if log is not None else ""
            raise SystemExit(f"{what} did not start (exit {proc.poll()}){tail}")
        time.sleep(0.05)


def bounded(fn: Callable[[], object], count: int, deadline: float) -> list[float]:
    """`timed`, stopped early at `deadline` (monotonic)."""
    samples: list[float] = []
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        samples += timed(fn, 1)
    return samples


def compare_translation(name: str, ours: tuple[str, Callable[[], object]], rest: Callable[[], object], count: int,
                        deadline: float, target_ms: float = 1.0) -> float:
    """A translating endpoint against the `POST /v1/desktop/actions` batch doing the same, in alternating rounds
    (drift in the machine's load falls on both alike): both medians, the ratio, and the median of the paired
    differences, which is what the translation adds; returns that."""
    label, call = ours
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        mine += timed(call, 1)
        theirs += timed(rest, 1)
    rest_median = summary(f"{name}: POST /actions", theirs)
    our_median = summary(f"{name}: {label}", mine, rest_median, "/actions")
    paired = statistics.median(a - b for a, b in zip(mine, theirs, strict=True))
    print(f"{'':<52} added at p50: {(our_median - rest_median) * 1000:+.2f} ms; median of the paired "
          f"differences {paired * 1000:+.2f} ms (target <= {target_ms:g} ms)\n")
    return paired


@dataclass
class BenchDesktop:
    """A running server with an active desktop and the realistic scene on it."""

    server: ServerProcess
    api: httpx.Client
    display: str
    tmp: Path
    scene: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The environment for peer tools (xdotool, xclip, import) on this display."""
        return dict(os.environ, DISPLAY=self.display)

    def health_baseline(self, count: int) -> float:
        """The HTTP round-trip floor, measured in this run."""
        return summary("GET /v1/health (HTTP baseline)", timed(lambda: self.api.get("/v1/health"), count))


@contextlib.contextmanager
def bench_desktop(name: str, display_num: int, *, width: int = 1440, height: int = 900,
                  terminals: int = 6, images: int = 2) -> Iterator[BenchDesktop]:
    """Start a server and a desktop, open the scene, and clean everything up afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    # Shared with the desktop (`--share`): a sandboxed desktop sees its own /tmp, not the machine's, and the
    # benches hand their apps pages and files through this folder.
    tmp.chmod(0o755)
    server = launch_server(tmp, "--share", str(tmp))
    api = server.client()
    bench = None
    try:
        started = api.post("/v1/desktop/start", json={"displayNum": display_num, "width": width, "height": height})
        if started.status_code != 200:
            raise SystemExit(f"desktop start failed: {started.text}")
        bench = BenchDesktop(server, api, started.json()["display"], tmp)
        bench.scene = open_scene(bench.display, terminals=terminals, images=images)
        listed = wait_for_windows(api, len(bench.scene))
        print(f"display {bench.display} {width}x{height}, {listed} windows open, {os.cpu_count()} cores\n")
        yield bench
    finally:
        if bench is not None:
            close_scene(bench.scene)
        api.post("/v1/desktop/stop")
        api.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
