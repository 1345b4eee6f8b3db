"""What a sandbox costs: an isolated desktop against today's unisolated one, in the same run (docs/security.md).

Two servers side by side, one `--isolation auto` (each desktop its own uid, namespaces, cgroup and network) and
one `--isolation off` (the design before sandboxes), measured in alternating rounds:
- create-to-active (`POST /v1/desktops`, which answers once the desktop is active), delete, pause, resume;
- a command run in the desktop (`POST /v1/desktops/{id}/processes/run` of `true`);
- screenshot, click and a batch step (click + screenshot) on the desktop;
- the memory an idle desktop adds: the server's whole process tree (summed PSS) with N idle desktops, minus
  with none, over N.
Targets (issue "Every desktop a sandbox"): create <= 200 ms, delete <= 100 ms, pause/resume <= 20 ms, a command
<= 5 ms more, <= 2 MB more memory per idle desktop, screenshot/click/batch within 1.1x.
Usage: .venv/bin/python bench/sandbox.py [--rounds 4] [--count 8] [--requests 50] [--idle 4]
       [--parts lifecycle,calls,memory]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import timed
from bench.footprint import MIB, process_table, tree_memory, tree_of
from desktop.sandbox import serving
from tests.conftest import ServerProcess, launch_server

SIZE = {"width": 1280, "height": 800}
MODES = ("auto", "off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds of each measurement")
    parser.add_argument("--count", type=int, default=8, help="creates (and deletes, pauses) per round")
    parser.add_argument("--requests", type=int, default=50, help="calls per round for the per-call figures")
    parser.add_argument("--idle", type=int, default=4, help="idle desktops for the memory figure")
    parser.add_argument("--parts", default="lifecycle,calls,memory", help="which measurements, comma-separated")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        servers = {mode: launch_server(Path(tmp) / mode, "--isolation", mode, "--max-desktops", "40")
                   for mode in MODES}
        try:
            clients = {mode: servers[mode].client(timeout=60) for mode in MODES}
            if "lifecycle" in parts:
                report(lifecycle(clients, args), "lifecycle (ms)")
            if "calls" in parts:
                report(calls(clients, args), "calls on a desktop (ms)")
            if "memory" in parts:
                memory(servers, clients, args.idle)
        finally:
            for server in servers.values():
                server.stop()


def lifecycle(clients: dict[str, httpx.Client], args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            api = clients[mode]
            for _ in range(args.count):
                began = time.perf_counter()
                made = api.post("/v1/desktops", json=SIZE)
                created = time.perf_counter() - began
                assert made.status_code == 201 and made.json()["state"] == "active", made.text
                base = f"/v1/desktops/{made.json()['id']}"
                record(found[mode], "create to active", created)
                for name, method in (("pause", "POST"), ("resume", "POST"), ("delete", "DELETE")):
                    path = base if method == "DELETE" else f"{base}/{name}"
                    began = time.perf_counter()
                    api.request(method, path).raise_for_status()
                    record(found[mode], name, time.perf_counter() - began)
    return found


def calls(clients: dict[str, httpx.Client], args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    desktops = {mode: clients[mode].post("/v1/desktops", json=SIZE).json()["id"] for mode in MODES}
    step = {"actions": [{"type": "click", "x": 600, "y": 400}], "screenshot": {"format": "png"}}
    try:
        for _ in range(args.rounds):
            for mode in MODES:
                api, base = clients[mode], f"/v1/desktops/{desktops[mode]}"
                requests = {
                    "command run (true)": ("POST", f"{base}/processes/run", {"command": "true"}),
                    "screenshot (png)": ("GET", f"{base}/screenshot", None),
                    "click": ("POST", f"{base}/mouse/click", {"x": 600, "y": 400}),
                    "batch step (click + png)": ("POST", f"{base}/actions", step),
                }
                for name, (method, path, body) in requests.items():
                    def call(api: httpx.Client = api, method: str = method, path: str = path,
                             body: object = body) -> None:
                        api.request(method, path, json=body).raise_for_status()
                    for seconds in timed(call, args.requests):
                        record(found[mode], name, seconds)
    finally:
        for mode in MODES:
            clients[mode].delete(f"/v1/desktops/{desktops[mode]}")
    return found


def memory(servers: dict[str, ServerProcess], clients: dict[str, httpx.Client], idle: int) -> None:
    print(f"\nmemory an idle {SIZE['width']}x{SIZE['height']} desktop adds (the server's tree, summed PSS):")
    per: dict[str, float] = {}
    for mode in MODES:
        # One desktop made and deleted first: what the server loads once (lazy imports, the zygote's first
        # fork, caches) is not a cost of each desktop.
        clients[mode].delete(f"/v1/desktops/{clients[mode].post('/v1/desktops', json=SIZE).json()['id']}")
        time.sleep(1)
        before = tree_memory(server_processes(servers[mode])).pss
        made = [clients[mode].post("/v1/desktops", json=SIZE).json()["id"] for _ in range(idle)]
        time.sleep(3 + serving.IDLE_S)  # settled: fonts read, buses quiet, the sandboxes' serving processes gone
        after = tree_memory(server_processes(servers[mode])).pss
        for desktop in made:
            clients[mode].delete(f"/v1/desktops/{desktop}")
        per[mode] = (after - before) / idle / MIB
        print(f"  {mode:<5} {per[mode]:7.1f} MiB per desktop ({idle} desktops)")
    print(f"  isolated - unisolated: {per['auto'] - per['off']:+.1f} MiB per desktop (target <= +2)")


def server_processes(server: ServerProcess) -> set[int]:
    """The server's tree, and what its desktops' buses activated: an unisolated desktop's D-Bus services
    (the accessibility registry, dconf) daemonize out of the tree, while a sandbox's init reaps and keeps them.
    They are found by their environment, which names the server's state directory (their HOME)."""
    table = process_table()
    mark = str(server.state_dir).encode()
    strays = set()
    for pid in table:
        with contextlib.suppress(OSError):
            if mark in Path(f"/proc/{pid}/environ").read_bytes():
                strays.add(pid)
    return tree_of(server.proc.pid, table) | strays


def record(into: dict[str, list[float]], name: str, seconds: float) -> None:
    into.setdefault(name, []).append(seconds)


def report(found: dict[str, dict[str, list[float]]], title: str) -> None:
    print(f"\n{title}: median (p90) isolated | unisolated | ratio")
    for name in found["auto"]:
        medians = {mode: statistics.median(found[mode][name]) * 1000 for mode in MODES}
        p90 = {mode: sorted(found[mode][name])[int(len(found[mode][name]) * 0.9)] * 1000 for mode in MODES}
        print(f"  {name:<28} {medians['auto']:8.2f} ({p90['auto']:7.2f}) | {medians['off']:8.2f} ({p90['off']:7.2f})"
              f" | {medians['auto'] / medians['off']:.2f}x")


if __name__ == "__main__":
    main()
