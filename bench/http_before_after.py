"""A change to the HTTP path, before and after: the same calls against a server of another checkout and of this one.

Starts a server of each checkout (`--before DIR`: a worktree of the code before, e.g. `git worktree add --detach
/tmp/before HEAD~1`; this checkout is the after), each with a desktop, and times over one kept-alive httpx
connection per server `GET /v1/health`, `POST /v1/desktop/mouse/move`, `GET /v1/desktop/mouse/position` and
`GET /v1/desktop/status`, in alternating rounds (the order of the two servers flipped every round, so load from
elsewhere falls on both alike). Prints each call's median round trip and the server's CPU per call (from /proc),
before and after, and their ratio.
Usage: .venv/bin/python bench/http_before_after.py --before DIR [--requests 3000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tests.conftest as harness
from bench.common import cpu_seconds, timed

CALLS: dict[str, Callable[[httpx.Client, int], httpx.Response]] = {
    "GET /v1/health": lambda client, i: client.get("/v1/health"),
    "POST /v1/desktop/mouse/move": lambda client, i: client.post("/v1/desktop/mouse/move",
                                                                 json={"x": 300 + 40 * (i % 2), "y": 300}),
    "GET /v1/desktop/mouse/position": lambda client, i: client.get("/v1/desktop/mouse/position"),
    "GET /v1/desktop/status": lambda client, i: client.get("/v1/desktop/status"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the code before the change")
    parser.add_argument("--requests", type=int, default=3000, help="timings per call and server (default 3000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--display-num", type=int, default=281, help="the first of the two desktops' displays")
    args = parser.parse_args()
    checkouts = {"before": args.before.resolve(), "after": harness.REPO}
    if not (checkouts["before"] / "api" / "cli" / "main.py").exists():
        raise SystemExit(f"{checkouts['before']} is not a checkout of this project")

    with contextlib.ExitStack() as stack:
        clients: dict[str, tuple[httpx.Client, int]] = {}
        for offset, (name, checkout) in enumerate(checkouts.items()):
            harness.REPO = checkout  # launch_server runs `python -m api.cli.main` in REPO
            server = harness.launch_server(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ba-"))))
            stack.callback(server.stop)
            client = stack.enter_context(server.client())
            started = client.post("/v1/desktop/start", json={"displayNum": args.display_num + offset,
                                                             "width": 1280, "height": 800})
            if started.status_code != 200:
                raise SystemExit(f"{name}: the desktop did not start: {started.text}")
            clients[name] = (client, server.proc.pid)

        def run(name: str, call: str, count: int) -> float:
            """`count` timed calls to the server `name`; the server's CPU seconds they took."""
            client, pid = clients[name]
            send = CALLS[call]
            counter = iter(range(count))
            before = cpu_seconds(pid)
            samples[name, call] += timed(lambda: check(send(client, next(counter))), count)
            return cpu_seconds(pid) - before

        samples: dict[tuple[str, str], list[float]] = {(name, call): [] for name in clients for call in CALLS}
        cpu = dict.fromkeys(samples, 0.0)
        for name in clients:
            for call in CALLS:
                run(name, call, 100)  # warm each connection, path and desktop
        samples = {key: [] for key in samples}
        block = max(1, args.requests // args.rounds)
        for round_ in range(args.rounds):
            for name in (list(clients) if round_ % 2 == 0 else list(reversed(clients))):
                for call in CALLS:
                    cpu[name, call] += run(name, call, block)

        print(f"{'call':<32} {'before':>20} {'after':>20}  after/before")
        for call in CALLS:
            medians = {name: statistics.median(samples[name, call]) for name in clients}
            per_call = {name: cpu[name, call] / len(samples[name, call]) * 1e6 for name in clients}
            time_ratio, cpu_ratio = medians["after"] / medians["before"], per_call["after"] / per_call["before"]
            print(f"{call:<32} {medians['before'] * 1000:7.3f} ms {per_call['before']:5.0f} us "
                  f"{medians['after'] * 1000:7.3f} ms {per_call['after']:5.0f} us  "
                  f"{time_ratio:.2f}x time, {cpu_ratio:.2f}x CPU")


def check(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise SystemExit(f"{response.request.method} {response.request.url.path} -> {response.status_code}: "
                         f"{response.text}")


if __name__ == "__main__":
    main()
