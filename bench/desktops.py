"""Benchmark the desktops resource: create-to-active, delete, pause, resume, and a screenshot and a
click on one of 8 idle desktops against the same on a single desktop.

Baselines measured in the same run: the single desktop's own `POST /v1/desktop/start` (the previous
design's only way to get a desktop) for create, and that desktop's screenshot and click for the
per-desktop calls. Then the cost of each additional desktop: the server's process tree (server, every
Xvfb, openbox, session bus) measured with bench/footprint.py's sampler with 0, then N idle, then N
paused desktops. Targets (docs/desktops.md): create <= 300 ms, delete <= 200 ms, pause/resume
<= 50 ms, calls on 8 idle desktops within 1.5x of one, <= 40 MB and <= 0.5 % of a core per idle
desktop, 0 % per paused one.
Usage: .venv/bin/python bench/desktops.py [--rounds 10] [--desktops 8] [--requests 100] [--seconds 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import summary, timed
from bench.footprint import MIB, Phase, measure
from tests.conftest import launch_server

SIZE = {"width": 1280, "height": 800}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--desktops", type=int, default=8)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each footprint phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-desktops-") as tmp:
        server = launch_server(Path(tmp), "--max-desktops", str(max(args.desktops, args.rounds) + 2))
        try:
            with server.client(timeout=60) as api:
                run(api, args)
                footprint(api, server.proc.pid, args)
        finally:
            server.stop()


def run(api: object, args: argparse.Namespace) -> None:
    import httpx
    assert isinstance(api, httpx.Client)

    def single_start() -> None:
        assert api.post("/v1/desktop/start", json=SIZE).json()["state"] == "active"
        api.post("/v1/desktop/stop")

    start = summary("single desktop: POST /v1/desktop/start (+stop)", timed(single_start, args.rounds))
    created: list[str] = []

    def create() -> None:
        response = api.post("/v1/desktops", json=SIZE)
        assert response.status_code == 201, response.text
        created.append(response.json()["id"])

    summary("POST /v1/desktops (to active)", timed(create, args.rounds), start, "single start")
    summary("DELETE /v1/desktops/{id}", timed(lambda: api.delete(f"/v1/desktops/{created.pop()}"), args.rounds))
    create()
    one = created[0]
    pause = timed(lambda: api.post(f"/v1/desktops/{one}/pause"), 1)
    resume = timed(lambda: api.post(f"/v1/desktops/{one}/resume"), 1)
    for _ in range(args.rounds - 1):
        pause += timed(lambda: api.post(f"/v1/desktops/{one}/pause"), 1)
        resume += timed(lambda: api.post(f"/v1/desktops/{one}/resume"), 1)
    summary("POST /v1/desktops/{id}/pause", pause)
    summary("POST /v1/desktops/{id}/resume", resume)

    def reset_with_an_app() -> None:
        api.post(f"/v1/desktops/{one}/launch", json={"app": "xterm", "wait": True})
        started = time.perf_counter()
        assert api.post(f"/v1/desktops/{one}/reset").status_code == 200
        resets.append(time.perf_counter() - started)

    resets: list[float] = []
    for _ in range(args.rounds):
        reset_with_an_app()
    summary("POST /v1/desktops/{id}/reset (an xterm open)", resets)
    api.delete(f"/v1/desktops/{created.pop()}")

    def calls(base: str) -> tuple[list[float], list[float]]:
        shot = timed(lambda: api.get(f"{base}/screenshot"), args.requests)
        click = timed(lambda: api.post(f"{base}/mouse/click", json={"x": 10, "y": 10}), args.requests)
        return shot, click

    assert api.post("/v1/desktop/start", json=SIZE).json()["state"] == "active"
    lone_shot, lone_click = calls("/v1/desktop")
    shot_base = summary("one desktop: full PNG screenshot", lone_shot)
    click_base = summary("one desktop: click", lone_click)
    for _ in range(args.desktops - 1):
        create()
    shot, click = calls(f"/v1/desktops/{created[-1]}")
    summary(f"{args.desktops} idle desktops: full PNG screenshot", shot, shot_base, "one desktop")
    summary(f"{args.desktops} idle desktops: click", click, click_base, "one desktop")
    for desktop_id in created:
        api.delete(f"/v1/desktops/{desktop_id}")



def footprint(api: object, root: int, args: argparse.Namespace) -> None:
    """Memory (PSS) and CPU of the whole tree with no created desktop, N idle ones, then N paused ones."""
    import httpx
    assert isinstance(api, httpx.Client)
    api.post("/v1/desktop/stop")
    empty = Phase("no created desktop", measure(root, args.seconds))
    ids = []
    for _ in range(args.desktops):
        response = api.post("/v1/desktops", json=SIZE)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    idle = Phase(f"{args.desktops} idle desktops", measure(root, args.seconds))
    for desktop_id in ids:
        api.post(f"/v1/desktops/{desktop_id}/pause")
    paused = Phase(f"{args.desktops} paused desktops", measure(root, args.seconds))
    for phase in (empty, idle, paused):
        print(f"{phase.name:<52} PSS {phase.peak('pss') / MIB:8.1f} MB   pod {phase.peak('pod') / MIB:8.1f} MB   "
              f"CPU {phase.cpu_mean:6.2f} % of a core")
    n = args.desktops
    print(f"{'per idle desktop':<52} PSS {(idle.peak('pss') - empty.peak('pss')) / n / MIB:8.1f} MB   "
          f"pod {(idle.peak('pod') - empty.peak('pod')) / n / MIB:8.1f} MB   "
          f"CPU {(idle.cpu_mean - empty.cpu_mean) / n:6.3f} % of a core")
    print(f"{'per paused desktop':<52} CPU {(paused.cpu_mean - empty.cpu_mean) / n:6.3f} % of a core")
    for desktop_id in ids:
        api.delete(f"/v1/desktops/{desktop_id}")


if __name__ == "__main__":
    main()
